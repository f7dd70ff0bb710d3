/**
 * TaskCore operations against the real relay (started through its CLI), with a fault proxy in
 * front of it to count, hold and inspect relay requests. Each test builds its own cores.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { OPERATION } from "../../src/core/bookkeeping.ts";
import { coreInternals, createTaskCore, type TaskCore } from "../../src/core/task-core.ts";
import type { PresentationHost, PresentationItem } from "../../src/core/host.ts";
import { maxTaskTimeoutMs, minTaskTimeoutMs } from "../../src/protocol/limits.ts";
import { RELAY_ID } from "../../src/protocol/names.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { relayBacklog, settle } from "../../testkit/drain.ts";
import { requestEnvelopes } from "../../src/protocol/wire.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { introduce } from "../../testkit/introduce.ts";
import { isHello } from "../../testkit/sealed.ts";
import { deferred, failure, raised, settledYet } from "../../testkit/async.ts";
import { eventsOf, expectCode, receiptStages, requestsOf, sentEnvelopes } from "../helpers/core-kit.ts";
import { createMemoryHost } from "../../testkit/memory-host.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(10_000);

const fx = useRelayFixture({ proxy: true });
const opened: Party[] = [];

afterEach(() => closeParties(opened.splice(0)));

async function party(): Promise<Party> {
  const created = await createParty({ url: fx.proxy.url, requestTimeoutMs: 4_000 });
  opened.push(created);
  return created;
}

async function pair(): Promise<{ origin: Party; worker: Party; settle: (rounds?: number) => Promise<number> }> {
  const origin = await party();
  const worker = await party();
  await introduce(origin.core, worker.core);
  return { origin, worker, settle: (rounds) => settle([origin, worker], rounds) };
}

/** One pass on each party, in the order given. */
async function passes(...parties: Party[]): Promise<void> {
  for (const each of parties) await each.core.refresh();
}

/** A party whose presentation host is the memory host with some methods replaced. */
async function customParty(
  override: (host: ReturnType<typeof createMemoryHost>, core: () => TaskCore) => Partial<PresentationHost>,
): Promise<Party> {
  const host = createMemoryHost();
  const name = `custom-${crypto.randomUUID()}`;
  let core: TaskCore | undefined;
  const custom = { ...host, ...override(host, () => core!) } as PresentationHost;
  core = createTaskCore({
    store: createTaskStore(),
    session: createVolatileTaskSession({ url: fx.proxy.url, callerSession: name, requestTimeoutMs: 4_000 }),
    host: custom,
  });
  await core.connect();
  const created = { name, core, host };
  opened.push(created);
  return created;
}

function to(party: Party) {
  return party.core.endpoint()!;
}

function archivedIds(party: Party): string[] {
  return party.host.archived.map((item) => item.eventId);
}

function wokenIds(party: Party): string[] {
  return party.host.wakes.flat().map((item) => item.eventId);
}

// -------------------------------------------------------------------------------------------------

describe("createTask", () => {
  test("task, task.created and the assignment envelope are committed in one transaction", async () => {
    const { origin, worker } = await pair();
    const seen: { tasks: number; created: number; assignments: number }[] = [];
    origin.core.onChange(() => {
      const store = coreInternals(origin.core).store;
      const tasks = store.listTasks();
      let created = 0;
      let assignments = 0;
      for (const task of tasks) {
        for (const event of eventsOf(task, "task.created")) {
          created += 1;
          const reservation = store.getOperation(task.taskId, `assignment:${event.eventId}`);
          const envelopeId = reservation?.envelopeIds[0];
          if (envelopeId !== undefined && store.getOutbox(envelopeId)?.kind === "assignment") assignments += 1;
        }
      }
      seen.push({ tasks: tasks.length, created, assignments });
    });
    const result = await origin.core.createTask({ to: to(worker), task: "write the narrow fix" });
    expect(seen.length).toBeGreaterThan(0);
    // Every committed state has all three or none of them.
    for (const state of seen) expect([state.created, state.assignments]).toEqual([state.tasks, state.tasks]);
    expect(seen[0]).toEqual({ tasks: 1, created: 1, assignments: 1 });
    const outbox = coreInternals(origin.core).store.getOutbox(result.envelopeId)!;
    expect(outbox.kind).toBe("assignment");
    expect(coreInternals(origin.core).store.getEnvelope(result.envelopeId)!.payload.taskId).toBe(result.taskId);
  });

  test("returns only after the relay accepted its own assignment envelope", async () => {
    const { origin, worker } = await pair();
    fx.proxy.push({ operation: "send", kind: "hold", when: (request) => (request.body as any).callerSession === origin.name });
    const creating = origin.core.createTask({ to: to(worker), task: "held at the relay door" });
    await fx.proxy.waitFor((stats) => stats.held === 1);
    expect(await settledYet(creating, 50)).toBe(false);
    const [task] = origin.core.listTasks();
    expect(task!.deliveryEvidence.relayAcceptance).toBe("pending");
    expect(origin.core.hasPendingWork()).toBe(true);
    fx.proxy.release();
    const result = await creating;
    expect(coreInternals(origin.core).store.getOutbox(result.envelopeId)!.state).toBe("accepted");
    expect(origin.core.getTask(result.taskId).deliveryEvidence.relayAcceptance).toBe("accepted");
    // The relay really holds it: the worker receives exactly that envelope.
    await worker.core.refresh();
    expect(worker.core.getTask(result.taskId).role).toBe("worker");
  });

  test("invalid input is INVALID_REQUEST with details.path; no task and no relay request", async () => {
    const { origin, worker } = await pair();
    const target = to(worker);
    const cases: [unknown, string][] = [
      [{ to: { ...target, extra: true }, task: "x" }, "/to/extra"],
      [{ to: target, task: "" }, "/task"],
      [{ to: target, task: "x", timeoutMs: minTaskTimeoutMs - 1 }, "/timeoutMs"],
      [{ to: target, task: "x", timeoutMs: maxTaskTimeoutMs + 1 }, "/timeoutMs"],
      [{ to: target, task: "x", priority: "high" }, "/priority"],
    ];
    const before = requestsOf(fx.proxy, origin.name).length;
    for (const [input, path] of cases) {
      const { error } = await raised(() => origin.core.createTask(input));
      expectCode(error, "INVALID_REQUEST");
      expect(error.details.path).toBe(path);
      expect(error.retryable).toBe(false);
    }
    expect(origin.core.listTasks()).toEqual([]);
    expect(coreInternals(origin.core).store.stats().tasks).toBe(0);
    expect(origin.core.hasPendingWork()).toBe(false);
    expect(requestsOf(fx.proxy, origin.name).length).toBe(before);
  });

  test("an unregistered target is TARGET_NOT_REGISTERED and creates no task: one send (the ask for its proof), refused, nothing kept", async () => {
    const origin = await party();
    const before = requestsOf(fx.proxy, origin.name).length;
    const error = await failure(origin.core.createTask({ to: { relay: RELAY_ID, id: crypto.randomUUID() }, task: "nobody is there" }));
    expectCode(error, "TARGET_NOT_REGISTERED");
    expect(error.retryable).toBe(false);
    expect(error.details).toMatchObject({ created: false, delivery: "blocked" });
    expect(error.details.taskId).toBeUndefined();
    expect(origin.core.listTasks()).toEqual([]);
    // One round trip: the hello asking the target to prove its key meets the send's own target check
    // (no separate resolve); the task's content never left.
    const sends = () =>
      requestsOf(fx.proxy, origin.name, "send").map((request) => isHello((request.body as { envelope?: { payload?: unknown } }).envelope));
    expect(
      requestsOf(fx.proxy, origin.name)
        .slice(before)
        .map((request) => request.operation),
    ).toEqual(["send"]);
    expect(sends()).toEqual([true]);
    const { store } = coreInternals(origin.core);
    expect({ pending: store.pendingOutboxCount(), quarantined: store.listQuarantine().length, records: store.stats().records }).toEqual({
      pending: 0,
      quarantined: 0,
      records: 0,
    });
    // Never re-sent.
    await origin.core.refresh();
    expect(sends()).toEqual([true]);
  });

  test("a worker that leaves while the assignment is in flight: refused for good, no task is left behind", async () => {
    const { origin, worker } = await pair();
    fx.proxy.push({ operation: "send", kind: "hold", when: (request) => (request.body as any).callerSession === origin.name });
    const creating = failure(origin.core.createTask({ to: to(worker), task: "the worker leaves while this is in flight" }));
    await fx.proxy.waitFor((stats) => stats.held === 1);
    await coreInternals(worker.core).session.disconnect();
    fx.proxy.release();
    const error = await creating;
    expectCode(error, "TARGET_NOT_REGISTERED");
    expect(error.details).toMatchObject({ created: false, delivery: "blocked" });
    expect(origin.core.listTasks()).toEqual([]);
    await origin.core.refresh();
    expect(sentEnvelopes(fx.proxy, origin.name).filter((sent) => sent.kind === "assignment")).toHaveLength(1);
    expect(origin.core.hasPendingWork()).toBe(false);
  });

  test("sending a task to yourself is INVALID_TARGET and creates no task", async () => {
    const origin = await party();
    const error = await failure(origin.core.createTask({ to: to(origin), task: "talk to myself" }));
    expectCode(error, "INVALID_TARGET");
    expect(origin.core.listTasks()).toEqual([]);
    expect(sentEnvelopes(fx.proxy, origin.name)).toEqual([]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("lifecycle origin ↔ worker", () => {
  test("the worker inserts task.created once and wakes once; receipts give the origin its evidence", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "full lifecycle" });
    await settle();
    await settle();
    const created = eventsOf(origin.core.getTask(taskId), "task.created")[0]!;
    expect(worker.host.insertedIds().filter((id) => id === created.eventId)).toHaveLength(1);
    expect(worker.host.wakes).toHaveLength(1);
    expect(worker.host.wakes[0]!.map((item) => item.eventId)).toEqual([created.eventId]);
    const view = origin.core.getTask(taskId);
    expect(view.deliveryEvidence).toEqual({
      relayAcceptance: "accepted",
      receiverReceipt: "confirmed",
      piInsertion: "confirmed",
      wakeAcceptance: "confirmed",
      modelExecution: "not_evidenced",
    });
    // Received, inserted and woken in one pass: one receipt, of the highest stage.
    expect(receiptStages(view, created.eventId)).toEqual(["wake_accepted:confirmed"]);
    // Receipts are origin-local: recorded in the task log, never presented, archived or forwarded.
    expect(origin.host.inserted).toEqual([]);
    expect(origin.host.archived).toEqual([]);
    expect(worker.core.getTask(taskId).events.some((event) => event.type === "task.delivery_receipt")).toBe(false);
    expect(worker.core.hasPendingWork()).toBe(false);
    expect(origin.core.hasPendingWork()).toBe(false);
  });

  test("a busy worker records receiver_recorded, then inserts the assignment exactly once when idle", async () => {
    const { origin, worker, settle } = await pair();
    worker.host.busy = true;
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "arrives while busy" });
    await passes(worker, worker, origin);
    const created = eventsOf(origin.core.getTask(taskId), "task.created")[0]!;
    expect(worker.host.inserted).toEqual([]);
    expect(worker.core.getTask(taskId).status).toBe("active");
    let view = origin.core.getTask(taskId);
    expect(receiptStages(view, created.eventId)).toEqual(["receiver_recorded:confirmed"]);
    expect(view.deliveryEvidence.receiverReceipt).toBe("confirmed");
    expect(view.deliveryEvidence.piInsertion).toBe("not_confirmed");
    expect(view.deliveryEvidence.wakeAcceptance).toBe("not_confirmed");
    expect(worker.core.hasPendingWork()).toBe(true);

    worker.host.busy = false;
    await settle();
    await settle();
    expect(worker.host.insertedIds()).toEqual([created.eventId]);
    expect(wokenIds(worker)).toEqual([created.eventId]);
    view = origin.core.getTask(taskId);
    expect(receiptStages(view, created.eventId)).toEqual(["receiver_recorded:confirmed", "wake_accepted:confirmed"]);
    expect(view.deliveryEvidence.piInsertion).toBe("confirmed");
    expect(view.deliveryEvidence.wakeAcceptance).toBe("confirmed");
  });

  test("a refused insertion reaches the origin as piInsertion blocked", async () => {
    const { origin, worker } = await pair();
    worker.host.refuseInsert = true;
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "cannot be inserted" });
    await passes(worker, origin);
    const view = origin.core.getTask(taskId);
    const created = eventsOf(view, "task.created")[0]!;
    expect(worker.host.inserted).toEqual([]);
    expect(worker.host.wakes).toEqual([]);
    expect(receiptStages(view, created.eventId).sort()).toEqual(["pi_insertion:blocked", "receiver_recorded:confirmed"]);
    expect(view.deliveryEvidence.piInsertion).toBe("blocked");
    expect(view.deliveryEvidence.receiverReceipt).toBe("confirmed");
    expect(view.deliveryEvidence.wakeAcceptance).toBe("not_confirmed");
  });

  test("a refused wake withdraws the never-sent wake receipt, sends pi_inserted, and the next pass wakes", async () => {
    const { origin, worker, settle } = await pair();
    worker.host.refuseWake = true;
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "wake me later" });
    await passes(worker, origin);
    const created = eventsOf(origin.core.getTask(taskId), "task.created")[0]!;
    expect(worker.host.insertedIds()).toEqual([created.eventId]);
    expect(worker.host.wakes).toEqual([]);
    expect(
      coreInternals(worker.core).store.getOperation(taskId, OPERATION.receipt(created.eventId, "wake_accepted", "confirmed")),
    ).toBeUndefined();
    expect(sentEnvelopes(fx.proxy, worker.name).filter((sent) => sent.inner?.payload?.stage === "wake_accepted")).toEqual([]);
    let view = origin.core.getTask(taskId);
    expect(receiptStages(view, created.eventId)).toEqual(["pi_inserted:confirmed"]);
    expect(view.deliveryEvidence.piInsertion).toBe("confirmed");
    expect(view.deliveryEvidence.wakeAcceptance).toBe("not_confirmed");

    worker.host.refuseWake = false;
    await settle();
    await settle();
    expect(worker.host.insertedIds()).toEqual([created.eventId]);
    expect(wokenIds(worker)).toEqual([created.eventId]);
    view = origin.core.getTask(taskId);
    expect(receiptStages(view, created.eventId)).toEqual(["pi_inserted:confirmed", "wake_accepted:confirmed"]);
    expect(view.deliveryEvidence.wakeAcceptance).toBe("confirmed");
  });

  test("a throwing wake is reported, its receipt withdrawn, and the next pass wakes", async () => {
    const origin = await party();
    let throwing = true;
    const worker = await customParty((host) => ({
      wake(items: readonly PresentationItem[]) {
        if (throwing) throw new Error("pi went away mid-wake");
        return host.wake(items);
      },
    }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "wake throws" });
    const report = await worker.core.refresh();
    expect(report.failures.get("presentation")).toBeDefined();
    const created = eventsOf(worker.core.getTask(taskId), "task.created")[0]!;
    expect(
      coreInternals(worker.core).store.getOperation(taskId, OPERATION.receipt(created.eventId, "wake_accepted", "confirmed")),
    ).toBeUndefined();
    expect(
      coreInternals(worker.core).store.getOperation(taskId, OPERATION.receipt(created.eventId, "pi_inserted", "confirmed")),
    ).toBeDefined();
    throwing = false;
    await passes(worker, origin);
    expect(worker.host.insertedIds()).toEqual([created.eventId]);
    expect(wokenIds(worker)).toEqual([created.eventId]);
    expect(receiptStages(origin.core.getTask(taskId), created.eventId)).toEqual(["pi_inserted:confirmed", "wake_accepted:confirmed"]);
  });

  test("the wake receipt leaves ahead of anything the woken model sends", async () => {
    const origin = await party();
    let asked: Promise<unknown> | undefined;
    const worker = await customParty((host, core) => ({
      wake(items: readonly PresentationItem[]) {
        const woke = host.wake(items);
        // The woken model acts at once.
        asked = core().message({ taskId: items[0]!.taskId, type: "question", message: "woken: a question straight away" });
        return woke;
      },
    }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "wake and ask" });
    await worker.core.refresh();
    expect(asked).toBeDefined();
    await asked;
    await passes(origin);
    const view = origin.core.getTask(taskId);
    const created = eventsOf(view, "task.created")[0]!;
    const receipt = eventsOf(view, "task.delivery_receipt").find(
      (event) => (event.payload as { stage: string }).stage === "wake_accepted",
    )!;
    const question = eventsOf(view, "task.question")[0]!;
    expect((receipt.payload as { eventId: string }).eventId).toBe(created.eventId);
    expect(BigInt(receipt.sequence) < BigInt(question.sequence)).toBe(true);
    const order = sentEnvelopes(fx.proxy, worker.name).map((sent) =>
      sent.type === "task.delivery_receipt" ? `receipt:${sent.inner.payload.stage}` : sent.type,
    );
    expect(order).toEqual(["receipt:wake_accepted", "task.question"]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("message", () => {
  test("a worker question reaches the origin's model; the origin's answer reaches the worker's; no self-echoes", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "ask before you change the schema" });
    await settle();
    const asked = await worker.core.message({ taskId, type: "question", message: "which schema file?" });
    expect(asked.authority).toBe("receiver");
    expect(asked.intentId).toBeDefined();
    await passes(origin);
    const question = eventsOf(origin.core.getTask(taskId), "task.question")[0]!;
    expect((question.payload as { intentId: string }).intentId).toBe(asked.intentId!);
    // The origin's own view is a local presentation: visible, inserted and woken at the origin.
    const shown = origin.host.inserted.filter((item) => item.eventId === question.eventId);
    expect(shown.map((item) => [item.kind, item.visible])).toEqual([["local", true]]);
    expect(wokenIds(origin)).toContain(question.eventId);

    await passes(worker);
    // The worker's own question comes back as a canonical replica: archived, never inserted.
    expect(archivedIds(worker)).toContain(question.eventId);
    expect(worker.host.insertedIds()).not.toContain(question.eventId);

    const answered = await origin.core.message({ taskId, type: "answer", message: "src/protocol/schemas.ts", inReplyTo: question.eventId });
    expect(answered.authority).toBe("origin");
    await settle();
    expect(worker.host.insertedIds()).toContain(answered.eventId!);
    expect(wokenIds(worker)).toContain(answered.eventId!);
    const answer = worker.core.getTask(taskId).events.find((event) => event.eventId === answered.eventId)!;
    expect(answer.type).toBe("task.answer");
    expect((answer.payload as { inReplyTo: string }).inReplyTo).toBe(question.eventId);
    // Origin-authored messages never come back to the origin.
    expect(origin.host.insertedIds()).not.toContain(answered.eventId!);
    expect(archivedIds(origin)).not.toContain(answered.eventId!);
    expect(eventsOf(origin.core.getTask(taskId), "task.answer")).toHaveLength(1);
    expect(origin.host.inserted.filter((item) => item.kind === "relay")).toEqual([]);
  });

  test("an answer must name a question of this task (inReplyTo)", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "answers need questions" });
    const other = await origin.core.createTask({ to: to(worker), task: "another task" });
    await settle();
    await worker.core.message({ taskId: other.taskId, type: "question", message: "question of the other task" });
    await settle();
    const created = eventsOf(origin.core.getTask(taskId), "task.created")[0]!;
    const otherQuestion = eventsOf(origin.core.getTask(other.taskId), "task.question")[0]!;
    const sendsBefore = sentEnvelopes(fx.proxy, origin.name).length;
    const eventsBefore = origin.core.getTask(taskId).events.length;
    for (const [core, input] of [
      [origin.core, { taskId, type: "answer", message: "no question" }],
      [origin.core, { taskId, type: "answer", message: "not a question", inReplyTo: created.eventId }],
      [origin.core, { taskId, type: "answer", message: "other task", inReplyTo: otherQuestion.eventId }],
      [origin.core, { taskId, type: "answer", message: "unknown", inReplyTo: crypto.randomUUID() }],
      [worker.core, { taskId, type: "answer", message: "worker, no question" }],
      [worker.core, { taskId, type: "answer", message: "worker, not a question", inReplyTo: created.eventId }],
    ] as [TaskCore, Record<string, unknown>][]) {
      const error = await failure(core.message(input));
      expectCode(error, "INVALID_REQUEST");
      expect(error.details.path).toBe("/inReplyTo");
    }
    expect(origin.core.getTask(taskId).events).toHaveLength(eventsBefore);
    expect(sentEnvelopes(fx.proxy, origin.name)).toHaveLength(sendsBefore);
  });

  test("only participants may message: a third core does not have the task; a rebound lifetime is lost", async () => {
    const { origin, worker, settle } = await pair();
    const third = await party();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "private conversation" });
    await settle();
    // A third endpoint's lifetime has no such task: UNKNOWN_TASK (non-retryable), nothing sent.
    const unknown = await failure(third.core.message({ taskId, type: "information", message: "hello" }));
    expectCode(unknown, "UNKNOWN_TASK");
    expect(unknown.retryable).toBe(false);
    expect(sentEnvelopes(fx.proxy, third.name)).toEqual([]);
    // A lifetime whose session was rebound underneath it (a new endpoint) is lost as a whole: its
    // tasks belong to the old endpoint, so it refuses with RELAY_REBIND_REQUIRED (relay loss).
    await coreInternals(worker.core).session.rebind();
    const outsider = await failure(worker.core.message({ taskId, type: "information", message: "from a new endpoint" }));
    expectCode(outsider, "RELAY_REBIND_REQUIRED");
    expect(outsider.retryable).toBe(false);
  });
});

// -------------------------------------------------------------------------------------------------

describe("done", () => {
  test("a receiver completion becomes canonical at the origin; the worker's echo is archived; terminalDelivery pending → accepted", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "finish it" });
    await settle();
    const states: string[] = [];
    worker.core.onChange(() => {
      const state = worker.core.findTask(taskId)?.terminalDelivery.state;
      if (state !== undefined && states.at(-1) !== state) states.push(state);
    });
    expect(worker.core.getTask(taskId).terminalDelivery).toEqual({ state: "not_submitted" });
    const result = await worker.core.done({ taskId, status: "completed", summary: "done", result: { changedFiles: ["src/a.ts"] } });
    // Committed first as pending (before the send), then accepted.
    expect(states).toEqual(["pending", "accepted"]);
    expect(result.authority).toBe("receiver");
    expect(result.observedCanonicalStatus).toBe("active");
    expect(result.terminalDelivery.state).toBe("accepted");
    const delivery = result.terminalDelivery as { intentId: string; intentType: string; envelopeId: string; origin: unknown };
    expect(delivery.intentType).toBe("task.completed");
    expect(delivery.origin).toEqual(to(origin));

    await passes(origin);
    const originView = origin.core.getTask(taskId);
    expect(originView.status).toBe("completed");
    const completed = eventsOf(originView, "task.completed");
    expect(completed).toHaveLength(1);
    expect((completed[0]!.payload as { intentId: string; result: unknown }).intentId).toBe(delivery.intentId);
    expect((completed[0]!.payload as { result: unknown }).result).toEqual({ changedFiles: ["src/a.ts"] });
    const local = origin.host.inserted.filter((item) => item.eventId === completed[0]!.eventId);
    expect(local.map((item) => [item.kind, item.visible])).toEqual([["local", true]]);
    expect(wokenIds(origin)).toContain(completed[0]!.eventId);

    await settle();
    expect(worker.core.getTask(taskId).status).toBe("completed");
    expect(archivedIds(worker)).toContain(completed[0]!.eventId);
    expect(worker.host.insertedIds()).not.toContain(completed[0]!.eventId);
    // Local presentation records no relay delivery receipts.
    expect(sentEnvelopes(fx.proxy, origin.name).filter((sent) => sent.kind === "intent")).toEqual([]);
  });

  test("a retryable failure keeps the intent; the retry resends the identical envelope and completes once", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "the reply gets lost" });
    await settle();
    // The relay accepts the intent, but the reply is lost on the way back.
    fx.proxy.push({ operation: "send", kind: "drop-reply", when: (request) => (request.body as any).callerSession === worker.name });
    const lost = await failure(
      worker.core.done({
        taskId,
        status: "failed",
        summary: "could not finish",
        error: { code: "E_TESTS", message: "tests fail", retryable: false },
      }),
    );
    expect(lost.retryable).toBe(true);
    const pending = lost.details.terminalDelivery as { state: string; intentId: string; envelopeId: string };
    expect(pending.state).toBe("pending");
    expect(worker.core.getTask(taskId).terminalDelivery).toEqual(pending as never);
    const retry = await worker.core.done({ taskId, status: "failed", summary: "could not finish" });
    expect(retry.terminalDelivery).toMatchObject({ state: "accepted", intentId: pending.intentId, envelopeId: pending.envelopeId });
    expect(coreInternals(worker.core).store.getOutbox(pending.envelopeId)!.acceptance!.duplicate).toBe(true);
    const attempts = requestsOf(fx.proxy, worker.name, "send").filter(
      (request) => (request.body as any).envelope.envelopeId === pending.envelopeId,
    );
    expect(attempts).toHaveLength(2);
    expect(attempts[1]!.text).toBe(attempts[0]!.text);
    await settle();
    const view = origin.core.getTask(taskId);
    expect(view.status).toBe("failed");
    expect(eventsOf(view, "task.failed")).toHaveLength(1);
    expect(eventsOf(view, "task.failed")[0]!.payload).toMatchObject({ intentId: pending.intentId, error: { code: "E_TESTS" } });
  });

  test("a same-type retry reuses the intent and envelope; a different type is TERMINAL_INTENT_CONFLICT", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "retry safely" });
    await settle();
    const first = await worker.core.done({ taskId, status: "completed", summary: "first" });
    const again = await worker.core.done({ taskId, status: "completed", summary: "first, again" });
    expect(again.terminalDelivery).toEqual(first.terminalDelivery);
    const conflict = await failure(worker.core.done({ taskId, status: "failed", summary: "changed my mind" }));
    expectCode(conflict, "TERMINAL_INTENT_CONFLICT");
    expect(conflict.retryable).toBe(false);
    expect(conflict.details).toMatchObject({ taskId, existingType: "task.completed", requestedType: "task.failed" });
    await settle();
    await worker.core.done({ taskId, status: "completed", summary: "after settle" });
    await settle();
    const terminalSends = sentEnvelopes(fx.proxy, worker.name).filter(
      (sent) => sent.kind === "intent" && sent.type !== "task.delivery_receipt",
    );
    expect(new Set(terminalSends.map((sent) => sent.envelopeId)).size).toBe(1);
    expect(terminalSends.map((sent) => sent.type)).toEqual(["task.completed"]);
    const view = origin.core.getTask(taskId);
    expect(eventsOf(view, "task.completed")).toHaveLength(1);
    expect(eventsOf(view, "task.failed")).toHaveLength(0);
    expect(eventsOf(view, "task.late_terminal")).toHaveLength(0);
    expect(view.status).toBe("completed");
  });

  test("first terminal wins: a worker terminal after the origin's cancel becomes task.late_terminal, archived", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "race to the end" });
    await settle();
    await origin.core.cancel({ taskId });
    // The worker finishes before it has seen the cancellation.
    await worker.core.done({ taskId, status: "completed", summary: "finished anyway" });
    await passes(origin);
    const view = origin.core.getTask(taskId);
    expect(view.status).toBe("cancelled");
    expect(eventsOf(view, "task.completed")).toHaveLength(0);
    const late = eventsOf(view, "task.late_terminal");
    expect(late).toHaveLength(1);
    expect(late[0]!.payload).toMatchObject({ lateType: "task.completed", summary: "finished anyway" });
    expect(archivedIds(origin)).toContain(late[0]!.eventId);
    expect(origin.host.insertedIds()).not.toContain(late[0]!.eventId);
    await settle();
    expect(origin.core.getTask(taskId).status).toBe("cancelled");
    expect(worker.core.getTask(taskId).status).toBe("cancelled");
    expect(archivedIds(worker)).toContain(late[0]!.eventId);
    expect(worker.host.insertedIds()).not.toContain(late[0]!.eventId);
  });

  test("done to an origin that is gone is delivery_blocked with stable identities; the status never is", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "the parent will leave" });
    await settle();
    const originEndpoint = to(origin);
    await coreInternals(origin.core).session.disconnect();
    const before = Date.now();
    const result = await worker.core.done({ taskId, status: "completed", summary: "nobody to tell" });
    const blocked = result.terminalDelivery as Record<string, any>;
    expect(blocked.state).toBe("delivery_blocked");
    expect(blocked.intentType).toBe("task.completed");
    expect(typeof blocked.intentId).toBe("string");
    expect(typeof blocked.envelopeId).toBe("string");
    expect(blocked.origin).toEqual(originEndpoint);
    expect(blocked.blockedAt).toBeGreaterThanOrEqual(before);
    expect(blocked.error).toMatchObject({ code: "TARGET_NOT_REGISTERED", retryable: false });
    const view = worker.core.getTask(taskId);
    expect(view.status).toBe("active");
    expect(view.terminalDelivery).toEqual(result.terminalDelivery);
    // A retry reports the same blocked delivery and never re-sends it; neither does a pass.
    const retry = await worker.core.done({ taskId, status: "completed", summary: "nobody to tell" });
    expect(retry.terminalDelivery).toEqual(result.terminalDelivery);
    await worker.core.refresh();
    expect(sentEnvelopes(fx.proxy, worker.name).filter((sent) => sent.envelopeId === blocked.envelopeId)).toHaveLength(1);
    expect(worker.core.getTask(taskId).status).toBe("active");
  });
});

// -------------------------------------------------------------------------------------------------

describe("cancel", () => {
  test("origin only; canonical at once; once per task; the worker inserts the cancellation", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "to be cancelled" });
    await settle();
    const notOrigin = await failure(worker.core.cancel({ taskId }));
    expectCode(notOrigin, "NOT_ORIGIN");

    fx.proxy.push({ operation: "send", kind: "hold", when: (request) => (request.body as any).callerSession === origin.name });
    const cancelling = origin.core.cancel({ taskId, reason: "no longer needed" });
    await fx.proxy.waitFor((stats) => stats.held === 1);
    // Canonical before it leaves, and before any pass.
    expect(origin.core.getTask(taskId).status).toBe("cancelled");
    fx.proxy.release();
    const first = await cancelling;
    expect(first).toMatchObject({ taskId, status: "cancelled", delivery: "accepted", warnings: [] });
    const second = await origin.core.cancel({ taskId });
    expect(second.eventId).toBe(first.eventId);
    const cancelled = eventsOf(origin.core.getTask(taskId), "task.cancelled");
    expect(cancelled.map((event) => event.eventId)).toEqual([first.eventId]);
    expect(cancelled[0]!.payload).toMatchObject({ summary: "no longer needed" });
    expect(sentEnvelopes(fx.proxy, origin.name).filter((sent) => sent.type === "task.cancelled")).toHaveLength(1);

    await settle();
    expect(worker.core.getTask(taskId).status).toBe("cancelled");
    const shown = worker.host.inserted.filter((item) => item.eventId === first.eventId);
    expect(shown.map((item) => [item.kind, item.visible])).toEqual([["relay", true]]);
    expect(wokenIds(worker)).toContain(first.eventId);
    // Origin-authored: no echo at the origin.
    expect(origin.host.insertedIds()).not.toContain(first.eventId);
  });

  test("cancelling a completed task is TASK_TERMINAL", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "completes first" });
    await settle();
    await worker.core.done({ taskId, status: "completed", summary: "ok" });
    await passes(origin);
    const eventsBefore = origin.core.getTask(taskId).events.length;
    const error = await failure(origin.core.cancel({ taskId }));
    expectCode(error, "TASK_TERMINAL");
    expect(error.retryable).toBe(false);
    expect(origin.core.getTask(taskId).status).toBe("completed");
    expect(origin.core.getTask(taskId).events).toHaveLength(eventsBefore);
  });

  test("a cancel whose target is gone returns a blocked-delivery warning", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "the worker will leave" });
    await settle();
    const target = to(worker);
    await coreInternals(worker.core).session.disconnect();
    const result = await origin.core.cancel({ taskId });
    expect(result.status).toBe("cancelled");
    expect(result.delivery).toBe("blocked");
    expect(result.warnings).toHaveLength(1);
    expect(result.warnings[0]).toMatchObject({ code: "TARGET_NOT_REGISTERED", retryable: false, delivery: "blocked", target });
    expect(origin.core.getTask(taskId).status).toBe("cancelled");
  });
});

// -------------------------------------------------------------------------------------------------

describe("acknowledge", () => {
  test("origin only, terminal only without any state change", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "not finished yet" });
    await settle();
    expectCode(await failure(worker.core.acknowledge({ taskId: taskId })), "NOT_ORIGIN");
    let commits = 0;
    origin.core.onChange(() => (commits += 1));
    const before = origin.core.getTask(taskId);
    const error = await failure(origin.core.acknowledge({ taskId: taskId }));
    expectCode(error, "TASK_NOT_TERMINAL");
    expect(error.retryable).toBe(false);
    expect(commits).toBe(0);
    expect(origin.core.getTask(taskId).events).toEqual(before.events);
    expect(coreInternals(origin.core).store.getOperation(taskId, "parent_acknowledgment")).toBeUndefined();
    expect(sentEnvelopes(fx.proxy, origin.name).filter((sent) => sent.type === "task.parent_acknowledged")).toEqual([]);
  });

  test("exactly one task.parent_acknowledged for sequential and concurrent calls; archived at the worker", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "verify and acknowledge" });
    await settle();
    await worker.core.done({ taskId, status: "completed", summary: "ok" });
    await settle();
    const results = await Promise.all([
      origin.core.acknowledge({ taskId: taskId }),
      origin.core.acknowledge({ taskId: taskId }),
      origin.core.acknowledge({ taskId: taskId }),
    ]);
    const retry = await origin.core.acknowledge({ taskId: taskId });
    const ids = new Set([...results, retry].map((result) => result.eventId));
    expect(ids.size).toBe(1);
    const [eventId] = [...ids];
    const acks = eventsOf(origin.core.getTask(taskId), "task.parent_acknowledged");
    expect(acks.map((event) => event.eventId)).toEqual([eventId!]);
    const completed = eventsOf(origin.core.getTask(taskId), "task.completed")[0]!;
    expect(acks[0]!.payload).toMatchObject({ acknowledgedEventId: completed.eventId });
    const sent = sentEnvelopes(fx.proxy, origin.name).filter((item) => item.type === "task.parent_acknowledged");
    expect(new Set(sent.map((item) => item.envelopeId)).size).toBe(1);
    await settle();
    expect(archivedIds(worker)).toContain(eventId!);
    expect(worker.host.insertedIds()).not.toContain(eventId!);
    expect(eventsOf(worker.core.getTask(taskId), "task.parent_acknowledged")).toHaveLength(1);
    expect(origin.core.getTask(taskId).status).toBe("completed");
  });

  test("a parent ACK recorded before the completion was presented suppresses its wake", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "ack early" });
    await settle();
    origin.host.busy = true;
    await worker.core.done({ taskId, status: "completed", summary: "ok" });
    await passes(origin);
    // Canonical while the origin's model is busy; its presentation is held.
    expect(origin.core.getTask(taskId).status).toBe("completed");
    const completed = eventsOf(origin.core.getTask(taskId), "task.completed")[0]!;
    expect(origin.host.insertedIds()).not.toContain(completed.eventId);
    expect(origin.core.receive().map((item) => (item.kind === "local" ? item.event.eventId : item.delivery.envelopeId))).toContain(
      completed.eventId,
    );
    const wakesBefore = origin.host.wakes.length;
    await origin.core.acknowledge({ taskId: taskId });
    origin.host.busy = false;
    await settle();
    expect(origin.host.insertedIds()).toContain(completed.eventId);
    expect(wokenIds(origin)).not.toContain(completed.eventId);
    expect(origin.host.wakes).toHaveLength(wakesBefore);
    expect(origin.core.receive()).toEqual([]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("timeouts", () => {
  test("an expired task times out at the origin, is presented on both sides, and a later completion is late", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "too slow", timeoutMs: minTaskTimeoutMs });
    await settle();
    const { expiresAt, createdAt } = origin.core.getTask(taskId);
    expect(expiresAt - createdAt).toBe(minTaskTimeoutMs);
    await passes(origin);
    expect(origin.core.getTask(taskId).status).toBe("active");
    await Bun.sleep(Math.max(0, expiresAt - Date.now()) + 20);
    await passes(origin);
    const view = origin.core.getTask(taskId);
    expect(view.status).toBe("timed_out");
    const timedOut = eventsOf(view, "task.timed_out");
    expect(timedOut).toHaveLength(1);
    expect(origin.host.inserted.filter((item) => item.eventId === timedOut[0]!.eventId).map((item) => item.kind)).toEqual(["local"]);
    await passes(worker);
    expect(worker.core.getTask(taskId).status).toBe("timed_out");
    expect(worker.host.insertedIds()).toContain(timedOut[0]!.eventId);

    await worker.core.done({ taskId, status: "completed", summary: "finished late" });
    await settle();
    const after = origin.core.getTask(taskId);
    expect(after.status).toBe("timed_out");
    expect(eventsOf(after, "task.timed_out")).toHaveLength(1);
    expect(eventsOf(after, "task.late_terminal").map((event) => (event.payload as { lateType: string }).lateType)).toEqual([
      "task.completed",
    ]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("acknowledgements (ack-batch-v1, ack-carry-v1)", () => {
  test("a pass ACKs everything it took in with one request when the relay advertises ack-batch-v1", async () => {
    const { origin, worker } = await pair();
    const created = [];
    for (let index = 0; index < 3; index += 1) created.push(await origin.core.createTask({ to: to(worker), task: `batched ${index}` }));
    const before = requestsOf(fx.proxy, worker.name, "acknowledge").length;
    await worker.core.refresh();
    const acks = requestsOf(fx.proxy, worker.name, "acknowledge")
      .slice(before)
      .map((request) => request.body as { envelopeId?: string; envelopeIds?: string[] });
    expect(acks).toHaveLength(1);
    expect(acks[0]!.envelopeIds?.slice().sort()).toEqual(created.map((result) => result.envelopeId).sort());
    expect(worker.core.hasPendingWork()).toBe(false);
    expect(await relayBacklog(worker.core)).toBe(0);
  });

  test("with ack-carry-v1 a pass's receipts ride in its ACK request: no send of their own, and the origin records them", async () => {
    const { origin, worker, settle } = await pair();
    const created = [];
    for (let index = 0; index < 3; index += 1) created.push(await origin.core.createTask({ to: to(worker), task: `carried ${index}` }));
    const sendsBefore = requestsOf(fx.proxy, worker.name, "send").length;
    const acksBefore = requestsOf(fx.proxy, worker.name, "acknowledge").length;
    await worker.core.refresh();
    const acks = requestsOf(fx.proxy, worker.name, "acknowledge").slice(acksBefore);
    expect(acks).toHaveLength(1);
    const body = acks[0]!.body as { envelopeIds: string[] };
    expect(body.envelopeIds.slice().sort()).toEqual(created.map((result) => result.envelopeId).sort());
    // Every receipt of the pass left in that request (sealed to the origin), none on its own.
    const receipts = sentEnvelopes(fx.proxy, worker.name).filter((envelope) => envelope.type === "task.delivery_receipt");
    expect(receipts.length).toBeGreaterThanOrEqual(created.length);
    expect(requestEnvelopes(body).map((envelope) => envelope.envelopeId)).toEqual(receipts.map((receipt) => receipt.envelopeId));
    expect(requestsOf(fx.proxy, worker.name, "send").slice(sendsBefore)).toEqual([]);
    expect(worker.core.hasPendingWork()).toBe(false);
    expect(await relayBacklog(worker.core)).toBe(0);
    await settle();
    for (const { taskId } of created) {
      const view = origin.core.getTask(taskId)!;
      expect(receiptStages(view, view.events[0]!.eventId).length).toBeGreaterThan(0);
    }
  });

  test("a carried receipt the relay refuses withholds the ACK: the delivery stays until its receipt settled, then is ACKed", async () => {
    const { origin, worker } = await pair();
    await origin.core.createTask({ to: to(worker), task: "its origin leaves" });
    // The origin's registration ends: the receipt to it is refused (TARGET_NOT_REGISTERED, definitive).
    await coreInternals(origin.core).session.disconnect();
    await origin.core.close();
    const first = await worker.core.refresh();
    expect(first.failures.get("receipt")?.code).toBe("TARGET_NOT_REGISTERED");
    const carrying = requestsOf(fx.proxy, worker.name, "acknowledge").at(-1)!.body;
    expect(requestEnvelopes(carrying).length).toBeGreaterThan(0);
    expect(await relayBacklog(worker.core)).toBe(1);
    // The receipt is quarantined now (settled): the next pass ACKs on its own.
    await worker.core.refresh();
    expect(requestEnvelopes(requestsOf(fx.proxy, worker.name, "acknowledge").at(-1)!.body)).toEqual([]);
    expect(await relayBacklog(worker.core)).toBe(0);
  });

  test("a batch answer naming an id unknown: that delivery leaves the inbox too (reported), the rest are acknowledged", async () => {
    const { origin, worker } = await pair();
    await origin.core.createTask({ to: to(worker), task: "one" });
    await origin.core.createTask({ to: to(worker), task: "two" });
    // The relay answers the batch for the first id as unknown (as if acknowledged long ago).
    fx.proxy.push({
      operation: "acknowledge",
      kind: "rewrite",
      when: (request: { body: unknown }) => (request.body as { callerSession?: string }).callerSession === worker.name,
      rewrite: (reply: { value: { results: { outcome: string }[] } }) => ((reply.value.results[0]!.outcome = "unknown"), reply),
    } as never);
    const report = await worker.core.refresh();
    expect(report.failures.get("ack")?.code).toBe("INVALID_REQUEST");
    expect(worker.core.hasPendingWork()).toBe(false);
  });
});

describe("receive, hasPendingWork and onChange", () => {
  test("receive() merges relay items and local items by intake order; completeLocalPresentation removes one", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "origin → worker" });
    await settle();
    origin.host.busy = true;
    // 1: a worker question → a local item at the origin.
    await worker.core.message({ taskId, type: "question", message: "first" });
    await passes(origin);
    // 2: a task a third session assigns to the origin → a relay item at the origin. (The worker
    // could not: the origin is in its task's chain, DELEGATION_CYCLE.)
    const third = await party();
    await introduce(third.core, origin.core);
    const reverse = await third.core.createTask({ to: to(origin), task: "third → origin" });
    await passes(origin);
    // 3: another worker message → a second local item.
    await worker.core.message({ taskId, type: "information", message: "third" });
    await passes(origin);

    const items = origin.core.receive();
    const describe = items.map((item) => (item.kind === "local" ? `local:${item.event.type}` : `relay:${item.delivery.envelopeId}`));
    const assignment = requestsOf(fx.proxy, third.name, "send")
      .map((request) => (request.body as any).envelope)
      .find((envelope) => envelope.payload.kind === "assignment" && envelope.payload.taskId === reverse.taskId);
    expect(describe).toEqual(["local:task.question", `relay:${assignment.envelopeId}`, "local:task.information"]);
    const orders = items.map((item) => item.order);
    expect([...orders].sort((a, b) => a - b)).toEqual(orders);
    expect(new Set(orders).size).toBe(orders.length);
    expect(origin.host.inserted).toEqual([]);

    const question = items[0]!;
    if (question.kind !== "local") throw new Error("expected a local item");
    expect(origin.core.completeLocalPresentation(question.event.eventId)).toBe(true);
    expect(origin.core.completeLocalPresentation(question.event.eventId)).toBe(false);
    expect(origin.core.receive().map((item) => item.order)).toEqual(orders.slice(1));
    // The consumer took it: the pass does not present it again.
    origin.host.busy = false;
    await settle();
    expect(origin.host.insertedIds()).not.toContain(question.event.eventId);
    expect(origin.host.inserted.map((item) => item.event.type).sort()).toEqual(["task.created", "task.information"]);
    expect(origin.core.receive()).toEqual([]);
  });

  test("a held visible item holds later visible items, but later non-visible items are archived and ACKed", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "hold the line" });
    await settle();
    worker.host.busy = true;
    const first = await origin.core.message({ taskId, type: "information", message: "visible one" });
    const mine = await worker.core.message({ taskId, type: "information", message: "the worker's own note" });
    await passes(origin);
    const echo = eventsOf(origin.core.getTask(taskId), "task.information").find(
      (event) => (event.payload as { intentId?: string }).intentId === mine.intentId,
    )!;
    const second = await origin.core.message({ taskId, type: "information", message: "visible two" });
    const envelopeOf = (eventId: string) =>
      sentEnvelopes(fx.proxy, origin.name).find((sent) => sent.inner?.eventId === eventId)!.envelopeId;
    const acked = () =>
      requestsOf(fx.proxy, worker.name, "acknowledge").flatMap(
        (request) =>
          (request.body as { envelopeId?: string; envelopeIds?: string[] }).envelopeIds ?? [
            (request.body as { envelopeId: string }).envelopeId,
          ],
      );

    await passes(worker);
    expect(worker.host.inserted.map((item) => item.eventId)).toEqual([eventsOf(worker.core.getTask(taskId), "task.created")[0]!.eventId]);
    expect(archivedIds(worker)).toContain(echo.eventId);
    expect(acked()).toContain(envelopeOf(echo.eventId));
    expect(acked()).not.toContain(envelopeOf(first.eventId!));
    expect(acked()).not.toContain(envelopeOf(second.eventId!));
    expect(worker.core.receive().map((item) => (item.kind === "relay" ? item.delivery.envelopeId : item.event.eventId))).toEqual([
      envelopeOf(first.eventId!),
      envelopeOf(second.eventId!),
    ]);

    worker.host.busy = false;
    await settle();
    expect(worker.host.insertedIds().slice(1)).toEqual([first.eventId!, second.eventId!]);
    expect(worker.host.wakes.at(-1)!.map((item) => item.eventId)).toEqual([first.eventId!, second.eventId!]);
    expect(acked()).toContain(envelopeOf(first.eventId!));
    expect(acked()).toContain(envelopeOf(second.eventId!));
  });

  test("hasPendingWork is true while outbox, deliveries or local items are pending, and false after settle", async () => {
    const { origin, worker, settle } = await pair();
    expect(origin.core.hasPendingWork()).toBe(false);
    // Outbox: an envelope not yet accepted.
    fx.proxy.push({ operation: "send", kind: "hold", when: (request) => (request.body as any).callerSession === origin.name });
    const creating = origin.core.createTask({ to: to(worker), task: "pending work" });
    await fx.proxy.waitFor((stats) => stats.held === 1);
    expect(coreInternals(origin.core).store.pendingOutboxCount()).toBe(1);
    expect(origin.core.hasPendingWork()).toBe(true);
    fx.proxy.release();
    const { taskId } = await creating;
    expect(origin.core.hasPendingWork()).toBe(false);
    // Deliveries: held by a busy worker.
    worker.host.busy = true;
    await passes(worker);
    expect(coreInternals(worker.core).store.pendingDeliveryCount()).toBe(1);
    expect(worker.core.hasPendingWork()).toBe(true);
    worker.host.busy = false;
    await settle();
    expect(worker.core.hasPendingWork()).toBe(false);
    // Local items: a worker message held at a busy origin.
    origin.host.busy = true;
    await worker.core.message({ taskId, type: "information", message: "news" });
    await passes(origin);
    expect(coreInternals(origin.core).store.pendingOutboxCount()).toBe(0);
    expect(coreInternals(origin.core).store.pendingDeliveryCount()).toBe(0);
    expect(coreInternals(origin.core).store.stats().localPresentations).toBe(1);
    expect(origin.core.hasPendingWork()).toBe(true);
    origin.host.busy = false;
    await settle();
    expect(origin.core.hasPendingWork()).toBe(false);
    expect(worker.core.hasPendingWork()).toBe(false);
  });

  test("onChange fires after each commit with the committed state, not for rollbacks, and stops on unsubscribe", async () => {
    const { origin, worker } = await pair();
    const seen: number[] = [];
    const unsubscribe = origin.core.onChange(() => seen.push(coreInternals(origin.core).store.stats().tasks));
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "observe me" });
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((tasks) => tasks === 1)).toBe(true);
    const count = seen.length;
    expect(() =>
      coreInternals(origin.core).store.transaction(() => {
        coreInternals(origin.core).store.setStatus(taskId, "failed");
        throw new Error("roll back");
      }),
    ).toThrow("roll back");
    expect(seen).toHaveLength(count);
    expect(origin.core.getTask(taskId).status).toBe("active");
    unsubscribe();
    await origin.core.message({ taskId, type: "information", message: "unobserved" });
    expect(seen).toHaveLength(count);
  });
});

// -------------------------------------------------------------------------------------------------

describe("refresh", () => {
  test("single flight: calls made while a pass runs share exactly one trailing pass", async () => {
    const solo = await party();
    const receives = () => requestsOf(fx.proxy, solo.name, "receive").length;
    await solo.core.refresh();
    expect(receives()).toBe(1);

    fx.proxy.push({ operation: "receive", kind: "hold", when: (request) => (request.body as any).callerSession === solo.name });
    const first = solo.core.refresh();
    await fx.proxy.waitFor((stats) => stats.held === 1);
    const joined = [solo.core.refresh(), solo.core.refresh(), solo.core.refresh()];
    expect(joined[0]).not.toBe(first);
    expect(joined[1]).toBe(joined[0]);
    expect(joined[2]).toBe(joined[0]);
    expect(receives()).toBe(2);
    fx.proxy.release();
    const reports = await Promise.all([first, ...joined]);
    expect(reports[1]).toBe(reports[2]);
    // The held pass plus one trailing pass: no more.
    await Bun.sleep(30);
    expect(receives()).toBe(3);
    // Idle again: the next call runs a fresh pass of its own, with no trailing pass.
    await solo.core.refresh();
    await Bun.sleep(30);
    expect(receives()).toBe(4);
  });
});

// -------------------------------------------------------------------------------------------------

describe("close", () => {
  test("close fences new work with RELAY_CLOSED, thrown synchronously", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "before close" });
    await settle();
    await origin.core.close();
    expect(origin.core.closed()).toBe(true);
    const calls: [string, () => unknown][] = [
      ["connect", () => origin.core.connect()],
      ["createTask", () => origin.core.createTask({ to: to(worker), task: "after close" })],
      ["message", () => origin.core.message({ taskId, type: "information", message: "x" })],
      ["done", () => origin.core.done({ taskId, status: "completed", summary: "x" })],
      ["cancel", () => origin.core.cancel({ taskId })],
      ["acknowledge", () => origin.core.acknowledge({ taskId: taskId })],
      ["reassignTask", () => origin.core.reassignTask(taskId)],
      ["refresh", () => origin.core.refresh()],
    ];
    const before = requestsOf(fx.proxy, origin.name).length;
    for (const [name, call] of calls) {
      const { error, synchronous } = await raised(call);
      expectCode(error, "RELAY_CLOSED");
      expect([name, synchronous]).toEqual([name, true]);
    }
    expect(requestsOf(fx.proxy, origin.name)).toHaveLength(before);
    await origin.core.close();
  });

  test("close aborts in-flight requests, drains active calls, then clears the store", async () => {
    const { origin, worker, settle } = await pair();
    await origin.core.createTask({ to: to(worker), task: "existing" });
    await settle();
    fx.proxy.push({ operation: "send", kind: "hold", when: (request) => (request.body as any).callerSession === origin.name });
    let settledAt = 0;
    const creating = origin.core.createTask({ to: to(worker), task: "in flight at close" });
    const outcome = failure(creating.finally(() => (settledAt = performance.now())));
    await fx.proxy.waitFor((stats) => stats.held === 1);
    expect(coreInternals(origin.core).store.stats().tasks).toBe(2);
    let commitsAfterClose = 0;
    await origin.core.close();
    const closedAt = performance.now();
    origin.core.onChange(() => (commitsAfterClose += 1));
    // Settled by the close (before it returned), aborted, not waited out: the held request's
    // deadline would have made it RELAY_TIMEOUT.
    expect(settledAt).toBeGreaterThan(0);
    expect(settledAt).toBeLessThanOrEqual(closedAt);
    const error = await outcome;
    expectCode(error, "RELAY_CLOSED");
    expect(error.details.taskId).toBeDefined();
    expect(coreInternals(origin.core).store.stats()).toMatchObject({ tasks: 0, events: 0, pendingOutbox: 0, records: 0 });
    expect(origin.core.listTasks()).toEqual([]);
    // The held request reaching the relay later changes nothing here.
    fx.proxy.release();
    await Bun.sleep(50);
    expect(commitsAfterClose).toBe(0);
    expect(coreInternals(origin.core).store.stats().records).toBe(0);
  });

  // An operation whose own envelope waits behind older mail when the lifetime closes must not be
  // told to retry (its outbox is discarded): it fails RELAY_CLOSED like one whose send was in flight.
  test("operations caught by close() fail with RELAY_CLOSED, not a retryable deferral", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "closing under load" });
    await settle();
    fx.proxy.push({ operation: "send", kind: "hold", when: (request) => (request.body as any).callerSession === origin.name });
    const older = failure(origin.core.message({ taskId, type: "information", message: "in flight" }));
    await fx.proxy.waitFor((stats) => stats.held === 1);
    const younger = failure(origin.core.message({ taskId, type: "information", message: "waiting behind" }));
    await Bun.sleep(20);
    await origin.core.close();
    fx.proxy.release();
    expectCode(await older, "RELAY_CLOSED");
    const error = await younger;
    expectCode(error, "RELAY_CLOSED");
    expect(error.retryable).toBe(false);
  });

  test("a pass running during close cannot mutate state afterwards", async () => {
    const origin = await party();
    const host = createMemoryHost();
    const inserting = deferred<boolean>();
    const insertCalled = deferred<PresentationItem>();
    const slowHost = {
      ...host,
      canPresent: () => true,
      insert(item: PresentationItem) {
        insertCalled.resolve(item);
        return inserting.promise;
      },
    };
    const name = `slow-${crypto.randomUUID()}`;
    const worker = createTaskCore({
      store: createTaskStore(),
      session: createVolatileTaskSession({ url: fx.proxy.url, callerSession: name, requestTimeoutMs: 4_000 }),
      host: slowHost,
    });
    try {
      await worker.connect();
      await introduce(origin.core, worker);
      const { taskId } = await origin.core.createTask({ to: worker.endpoint()!, task: "presented while closing" });
      const pass = worker.refresh().catch((error: unknown) => error);
      const item = await insertCalled.promise;
      expect(item.taskId).toBe(taskId);
      expect(coreInternals(worker).store.stats().tasks).toBe(1);
      const sendsBefore = requestsOf(fx.proxy, name, "send").length;
      const acksBefore = requestsOf(fx.proxy, name, "acknowledge").length;
      let commits = 0;
      worker.onChange(() => (commits += 1));
      const closing = worker.close();
      // close() waits for the running pass to drain.
      expect(await settledYet(closing, 30)).toBe(false);
      inserting.resolve(true);
      await closing;
      await pass;
      const commitsAtClose = commits;
      await Bun.sleep(50);
      expect(commits).toBe(commitsAtClose);
      expect(coreInternals(worker).store.stats().records).toBe(0);
      expect(coreInternals(worker).store.getEvidence(item.eventId)).toBeUndefined();
      // Nothing the pass would have done after the insertion reached the relay.
      expect(requestsOf(fx.proxy, name, "send")).toHaveLength(sendsBefore);
      expect(requestsOf(fx.proxy, name, "acknowledge")).toHaveLength(acksBefore);
      expect(host.wakes).toEqual([]);
    } finally {
      inserting.resolve(false);
      await worker.close();
      coreInternals(worker).session.close();
    }
  });
});

// -------------------------------------------------------------------------------------------------

describe("caller cancellation", () => {
  test("a caller that aborted before the operation started gets ABORTED; nothing is committed or sent", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "cancellable callers" });
    await settle();
    const controller = new AbortController();
    controller.abort();
    const before = {
      events: origin.core.getTask(taskId).events.length,
      records: coreInternals(origin.core).store.stats().records,
      requests: requestsOf(fx.proxy, origin.name).length,
    };
    const calls: (() => Promise<unknown>)[] = [
      () => origin.core.createTask({ to: to(worker), task: "aborted" }, { signal: controller.signal }),
      () => origin.core.message({ taskId, type: "information", message: "aborted" }, { signal: controller.signal }),
      () => origin.core.cancel({ taskId }, { signal: controller.signal }),
      () => worker.core.done({ taskId, status: "completed", summary: "aborted" }, { signal: controller.signal }),
    ];
    for (const call of calls) {
      const error = await failure(call());
      expectCode(error, "ABORTED");
      expect(error.retryable).toBe(true);
    }
    expect(origin.core.getTask(taskId).events).toHaveLength(before.events);
    expect(origin.core.getTask(taskId).status).toBe("active");
    expect(coreInternals(origin.core).store.stats().records).toBe(before.records);
    expect(origin.core.hasPendingWork()).toBe(false);
    expect(worker.core.getTask(taskId).terminalDelivery).toEqual({ state: "not_submitted" });
    expect(requestsOf(fx.proxy, origin.name)).toHaveLength(before.requests);
  });

  // A foreground operation waiting behind an older in-flight send to the same target follows its
  // caller's abort at once (ABORTED), instead of waiting for the older request to end.
  test("a caller abort while waiting behind older in-flight mail settles promptly", async () => {
    const { origin, worker, settle } = await pair();
    const { taskId } = await origin.core.createTask({ to: to(worker), task: "older mail in flight" });
    await settle();
    fx.proxy.push({ operation: "send", kind: "hold", when: (request) => (request.body as any).callerSession === origin.name });
    const older = failure(origin.core.message({ taskId, type: "information", message: "older" })).catch(() => undefined);
    await fx.proxy.waitFor((stats) => stats.held === 1);
    const controller = new AbortController();
    const younger = failure(origin.core.message({ taskId, type: "information", message: "younger" }, { signal: controller.signal }));
    await Bun.sleep(20);
    controller.abort();
    try {
      expect(await settledYet(younger, 200)).toBe(true);
      expect(fx.proxy.stats().held).toBe(1);
      const error = await younger;
      expect(error.retryable).toBe(true);
      expect(error.details.reason).not.toBe("pass deadline");
    } finally {
      fx.proxy.release();
      await older;
      await younger.catch(() => undefined);
    }
  });
});
