import { afterEach, beforeEach, describe, expect, jest, test } from "bun:test";
import {
  createPiPresenter,
  EVENT_MESSAGE,
  EVENT_RECORD,
  insertedEventId,
  type PiMessage,
  type PiPresenter,
  WAKE_MESSAGE,
} from "../../extensions/pi-tasks/presenter.ts";
import { renderEvent, renderWake } from "../../extensions/pi-tasks/render.ts";
import { cancelAbortGraceMs, insertionScanEntries, wakeObservationMs } from "../../src/protocol/limits.ts";
import { assignmentOf, presentationItem, taskView } from "../helpers/extension-fakes.ts";
import { flushMicrotasks } from "../../testkit/async.ts";

type Options = { triggerTurn?: boolean; deliverAs?: "steer" | "followUp" | "nextTurn" };

interface Harness {
  readonly presenter: PiPresenter;
  readonly sent: { message: PiMessage; options: Options }[];
  readonly appended: { customType: string; data: unknown }[];
  readonly branch: unknown[];
  state: {
    idle: boolean;
    pending: boolean;
    bound: boolean;
    recordInserts: boolean;
    failSend: boolean;
    aborts: number;
    abortOnCancel: boolean;
  };
}

function harness(shared: Partial<Harness["state"]> = {}): Harness {
  const sent: Harness["sent"] = [];
  const appended: Harness["appended"] = [];
  const branch: unknown[] = [];
  const state = {
    idle: true,
    pending: false,
    bound: true,
    recordInserts: true,
    failSend: false,
    aborts: 0,
    abortOnCancel: false,
    ...shared,
  };
  const presenter = createPiPresenter({
    sendMessage(message, options) {
      if (state.failSend) throw new Error("Extension runtime not initialized");
      sent.push({ message, options });
      // Pi records an idle insertion synchronously as a custom_message entry.
      if (state.recordInserts && message.customType === EVENT_MESSAGE)
        branch.push({ type: "custom_message", customType: message.customType, content: message.content, details: message.details });
    },
    appendEntry(customType, data) {
      appended.push({ customType, data });
    },
    session: () =>
      state.bound
        ? { isIdle: () => state.idle, hasPendingMessages: () => state.pending, branch: () => branch, abort: () => void (state.aborts += 1) }
        : undefined,
    abortOnCancel: state.abortOnCancel,
  });
  return { presenter, sent, appended, branch, state };
}

function wakeEnd(wakeId: string) {
  return { role: "custom", customType: WAKE_MESSAGE, details: { wakeId } };
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

describe("canPresent", () => {
  test("only while Pi is bound, idle and has nothing queued (its own queue or ours)", async () => {
    const { presenter, state, sent } = harness();
    expect(presenter.canPresent()).toBe(true);
    state.idle = false;
    expect(presenter.canPresent()).toBe(false);
    state.idle = true;
    state.pending = true;
    expect(presenter.canPresent()).toBe(false);
    state.pending = false;
    state.bound = false;
    expect(presenter.canPresent()).toBe(false);
    state.bound = true;
    // A queued wake (not yet seen as a message) holds presentation: Pi's hasPendingMessages()
    // does not count extension messages.
    const woken = presenter.wake([presentationItem(taskView())]);
    expect(presenter.queued()).toBe(1);
    expect(presenter.canPresent()).toBe(false);
    presenter.onMessageEnd(wakeEnd((sent[0]!.message.details as { wakeId: string }).wakeId));
    expect(await woken).toBe(true);
    expect(presenter.queued()).toBe(0);
    expect(presenter.canPresent()).toBe(true);
  });
});

describe("insert", () => {
  test("sends one pi-tasks-event with the rendered text and the full event in details, without starting a turn", () => {
    const { presenter, sent } = harness();
    const task = taskView({ task: "paint the fence" });
    const item = presentationItem(task);
    expect(presenter.insert(item)).toBe(true);
    expect(sent).toHaveLength(1);
    const [{ message, options }] = sent as [{ message: PiMessage; options: Options }];
    expect(message.customType).toBe(EVENT_MESSAGE);
    expect(message.display).toBe(true);
    expect(message.content).toBe(renderEvent(item.event, task));
    expect(message.details).toEqual({ taskId: task.taskId, eventId: item.eventId, role: item.role, event: item.event });
    expect(options.triggerTurn).toBe(false);
    expect(presenter.inserted(item.eventId)).toBe(true);
  });

  test("answers false (and remembers nothing) when Pi did not record the entry", () => {
    const { presenter, state } = harness();
    state.recordInserts = false;
    const item = presentationItem(taskView());
    expect(presenter.insert(item)).toBe(false);
    expect(presenter.inserted(item.eventId)).toBe(false);
  });

  test("the branch scan reads only the last insertionScanEntries entries", () => {
    const { presenter, branch } = harness();
    const item = presentationItem(taskView());
    const entry = { type: "custom_message", customType: EVENT_MESSAGE, details: { eventId: item.eventId } };
    branch.push(entry, ...Array.from({ length: insertionScanEntries - 1 }, () => ({ type: "message" })));
    expect(presenter.inserted(item.eventId)).toBe(true);
    branch.push({ type: "message" });
    expect(presenter.inserted(item.eventId)).toBe(false);
  });

  test("an insertion seen as a message_end counts even after it scrolled out of the scan", () => {
    const { presenter, branch } = harness();
    const item = presentationItem(taskView());
    presenter.onMessageEnd({ role: "custom", customType: EVENT_MESSAGE, details: { eventId: item.eventId } });
    branch.push(...Array.from({ length: insertionScanEntries + 5 }, () => ({ type: "message" })));
    expect(presenter.inserted(item.eventId)).toBe(true);
  });

  test("insertedEventId recognises only pi-tasks-event custom messages", () => {
    expect(insertedEventId({ type: "custom_message", customType: EVENT_MESSAGE, details: { eventId: "e1" } })).toBe("e1");
    expect(insertedEventId({ type: "custom", customType: EVENT_MESSAGE, data: { eventId: "e1" } })).toBeUndefined();
    expect(insertedEventId({ type: "custom_message", customType: WAKE_MESSAGE, details: { eventId: "e1" } })).toBeUndefined();
    expect(insertedEventId({ type: "custom_message", customType: EVENT_MESSAGE, details: {} })).toBeUndefined();
    expect(insertedEventId(null)).toBeUndefined();
  });
});

describe("wake", () => {
  test("one hidden pi-tasks-wake per batch, triggering a turn through the follow-up queue", async () => {
    const { presenter, sent } = harness();
    const items = [presentationItem(taskView()), presentationItem(taskView())];
    const woken = presenter.wake(items);
    expect(sent).toHaveLength(1);
    const [{ message, options }] = sent as [{ message: PiMessage; options: Options }];
    expect(message.customType).toBe(WAKE_MESSAGE);
    expect(message.display).toBe(false);
    expect(message.content).toBe(renderWake(2));
    expect((message.details as { eventIds: string[] }).eventIds).toEqual(items.map((item) => item.eventId));
    expect(options).toEqual({ triggerTurn: true, deliverAs: "followUp" });
    presenter.onMessageEnd(wakeEnd((message.details as { wakeId: string }).wakeId));
    expect(await woken).toBe(true);
  });

  test("a wake never seen within wakeObservationMs answers false and stops holding presentation", async () => {
    const { presenter } = harness();
    let result: boolean | undefined;
    void Promise.resolve(presenter.wake([presentationItem(taskView())])).then((value) => {
      result = value;
    });
    jest.advanceTimersByTime(wakeObservationMs - 1);
    await flushMicrotasks();
    expect(result).toBeUndefined();
    expect(presenter.canPresent()).toBe(false);
    jest.advanceTimersByTime(1);
    await flushMicrotasks();
    expect(result).toBe(false);
    expect(presenter.canPresent()).toBe(true);
  });

  test("another wake's message_end or a non-custom message does not count as this wake", async () => {
    const { presenter } = harness();
    let result: boolean | undefined;
    void Promise.resolve(presenter.wake([presentationItem(taskView())])).then((value) => {
      result = value;
    });
    presenter.onMessageEnd(wakeEnd("some-other-wake"));
    presenter.onMessageEnd({ role: "user", customType: WAKE_MESSAGE, details: { wakeId: "x" } });
    presenter.onMessageEnd(undefined);
    await flushMicrotasks();
    expect(result).toBeUndefined();
    expect(presenter.queued()).toBe(1);
    jest.advanceTimersByTime(wakeObservationMs);
    await flushMicrotasks();
    expect(result).toBe(false);
  });

  test("a throwing sendMessage rethrows and leaves nothing queued", () => {
    const { presenter, state } = harness();
    state.failSend = true;
    expect(() => presenter.wake([presentationItem(taskView())])).toThrow("Extension runtime not initialized");
    expect(presenter.queued()).toBe(0);
    expect(presenter.canPresent()).toBe(true);
  });

  test("dispose settles pending wakes as not observed", async () => {
    const { presenter } = harness();
    const woken = presenter.wake([presentationItem(taskView())]);
    presenter.dispose();
    expect(await woken).toBe(false);
    expect(presenter.queued()).toBe(0);
  });
});

describe("archive and loss records", () => {
  test("archive writes one pi-tasks-event-record entry with the full event and sends no message", () => {
    const { presenter, sent, appended } = harness();
    const task = taskView({ events: [{ type: "task.parent_acknowledged", payload: {} }] });
    const item = presentationItem(task, task.events[1]!, { visible: false });
    presenter.archive(item);
    expect(sent).toEqual([]);
    expect(appended).toEqual([
      { customType: EVENT_RECORD, data: { taskId: task.taskId, eventId: item.eventId, role: item.role, event: item.event } },
    ]);
  });
});

describe("the assignment text the presenter inserts", () => {
  test("names the task and the event, so the model can act without details", () => {
    const { presenter, sent } = harness();
    const task = taskView({ task: "rename the module" });
    presenter.insert(presentationItem(task));
    const content = sent[0]!.message.content;
    expect(content).toContain(task.taskId);
    expect(content).toContain(assignmentOf(task).eventId);
    expect(content).toContain("rename the module");
  });
});

describe("interrupt (a cancel reaching a busy worker)", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function cancelItem() {
    const task = taskView({
      role: "worker",
      status: "cancelled",
      events: [{ type: "task.cancelled", payload: { summary: "no longer needed" } }],
    });
    return presentationItem(task, task.events.find((event) => event.type === "task.cancelled")!, {
      kind: "relay",
      envelopeId: crypto.randomUUID(),
    });
  }

  test("steers at once, aborts a gate worker's turn, and reports `aborted` when the turn ends within the grace period", async () => {
    const h = harness({ idle: false, abortOnCancel: true });
    const outcomes: string[] = [];
    expect(await h.presenter.interrupt!(cancelItem(), (outcome) => outcomes.push(outcome))).toBe(true);
    expect(h.sent.map((entry) => entry.options)).toEqual([{ triggerTurn: true, deliverAs: "steer" }]);
    expect(h.state.aborts).toBe(1);
    jest.advanceTimersByTime(200);
    expect(outcomes).toEqual([]);
    h.state.idle = true;
    jest.advanceTimersByTime(100);
    expect(outcomes).toEqual(["aborted"]);
    // The aborted turn never read the cancel: one hidden wake gives the model a turn to read it, as for an idle worker.
    const item = h.sent.at(-1)!;
    expect(item.options).toEqual({ triggerTurn: true, deliverAs: "followUp" });
    expect((item.message as { customType?: string }).customType).toBe(WAKE_MESSAGE);
  });

  test("aborted, and Pi never delivered the steer even in the woken turn: it is appended once, without another turn", async () => {
    const h = harness({ idle: false, abortOnCancel: true, recordInserts: false });
    await h.presenter.interrupt!(cancelItem(), () => undefined);
    h.state.idle = true;
    jest.advanceTimersByTime(100);
    // The wake went out (unobserved here), then the session is idle again with no sign of the cancel.
    jest.advanceTimersByTime(wakeObservationMs + 100);
    await flushMicrotasks();
    jest.advanceTimersByTime(100);
    expect(h.sent.map((entry) => entry.options)).toEqual([
      { triggerTurn: true, deliverAs: "steer" },
      { triggerTurn: true, deliverAs: "followUp" },
      { triggerTurn: false },
    ]);
  });

  test("without an abort (the steer is read in the running turn), no wake follows once it is idle", async () => {
    const h = harness({ idle: false });
    await h.presenter.interrupt!(cancelItem(), () => undefined);
    h.state.idle = true;
    jest.advanceTimersByTime(100);
    expect(h.sent.map((entry) => entry.options)).toEqual([{ triggerTurn: true, deliverAs: "steer" }]);
  });

  test("a steer dropped with the aborted turn is appended without a turn, so the model still reads the cancel", async () => {
    const h = harness({ idle: false, recordInserts: false });
    const outcomes: string[] = [];
    await h.presenter.interrupt!(cancelItem(), (outcome) => outcomes.push(outcome));
    h.state.idle = true;
    jest.advanceTimersByTime(100);
    expect(outcomes).toEqual(["aborted"]);
    expect(h.sent.map((entry) => entry.options)).toEqual([{ triggerTurn: true, deliverAs: "steer" }, { triggerTurn: false }]);
  });

  test(`without an abort (not a gate worker), still busy after ${cancelAbortGraceMs} ms is \`busy\``, async () => {
    const h = harness({ idle: false });
    const outcomes: string[] = [];
    await h.presenter.interrupt!(cancelItem(), (outcome) => outcomes.push(outcome));
    expect(h.state.aborts).toBe(0);
    jest.advanceTimersByTime(cancelAbortGraceMs - 100);
    expect(outcomes).toEqual([]);
    jest.advanceTimersByTime(200);
    expect(outcomes).toEqual(["busy"]);
  });
});
