/**
 * Delegation beyond one hop, in the core (src/core/lineage.ts, intake.ts, presentation.ts), on
 * the real relay in memory: lineage inherited by a coordinator's sub-task, the depth cap and the
 * cycle guard (refused before anything is created), a question raised up the chain and its answer
 * relayed back down, progress shown without a wake (newest only, rate-limited), and a cancel
 * handed to a busy worker with its outcome reported to the origin.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { PresentationHost, PresentationItem } from "../../src/core/host.ts";
import { coreInternals, createTaskCore } from "../../src/core/task-core.ts";
import { encodeEnvelope, makeEvent } from "../../src/core/envelopes.ts";
import { processLocalTrust } from "../../src/core/trust.ts";
import { maxDelegationDepth, maxProgressPresentationsPerPass, minProgressIntervalMs } from "../../src/protocol/limits.ts";
import type { CancelOutcome, TaskRecord } from "../../src/protocol/schemas.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { createInMemoryTaskRelay, type InMemoryTaskRelay } from "../../src/relay-server/in-memory.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { failure, raised } from "../../testkit/async.ts";
import { createJumpTimers } from "../../testkit/jump-timers.ts";
import { createMemoryHost } from "../../testkit/memory-host.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { introduce } from "../../testkit/introduce.ts";
import { sealedTo } from "../../testkit/sealed.ts";

const opened: { relays: InMemoryTaskRelay[]; parties: { core: Party["core"] }[] } = { relays: [], parties: [] };

afterEach(async () => {
  await closeParties(opened.parties.splice(0));
  for (const relay of opened.relays.splice(0)) await relay.stop();
});

async function relay(): Promise<InMemoryTaskRelay> {
  const created = await createInMemoryTaskRelay();
  opened.relays.push(created);
  return created;
}

/** `count` parties on the relay, each introduced to every other (its key proven to each). */
async function parties(on: InMemoryTaskRelay, count: number, options: { maxDepth?: number } = {}): Promise<Party[]> {
  const created: Party[] = [];
  for (let index = 0; index < count; index += 1) created.push(await createParty({ url: on.url, fetch: on.fetch, ...options }));
  opened.parties.push(...created);
  for (const from of created) for (const to of created) if (from !== to) await introduce(from.core, to.core);
  return created;
}

/** One pass on each party, in order, `rounds` times. */
async function passes(list: readonly Party[], rounds = 1): Promise<void> {
  for (let round = 0; round < rounds; round += 1) for (const party of list) await party.core.refresh();
}

describe("lineage", () => {
  test("a coordinator's sub-task inherits the chain; the cap refuses the session past it and a cycle is refused, creating nothing", async () => {
    const on = await relay();
    const [a, b, c, d] = await parties(on, 4);
    const root = await a!.core.createTask({ to: b!.core.endpoint()!, task: "root" });
    await passes([b!]);
    const child = await b!.core.createTask({ to: c!.core.endpoint()!, task: "child" });
    const record = b!.core.getTask(child.taskId).lineage!;
    expect(record).toEqual({
      rootTaskId: root.taskId,
      parentTaskId: root.taskId,
      depth: 3,
      owner: { endpoint: a!.core.endpoint()!, key: processLocalTrust().identity.publicKey },
      chain: [a!.core.endpoint()!, b!.core.endpoint()!, c!.core.endpoint()!],
    });
    expect(maxDelegationDepth).toBe(3);
    await passes([c!]);
    expect(c!.core.getTask(child.taskId).lineage).toEqual(record);

    const tasksBefore = [c!.core.listTasks().length, d!.core.listTasks().length];
    const deep = await failure(c!.core.createTask({ to: d!.core.endpoint()!, task: "too deep" }));
    expect(deep.code).toBe("DELEGATION_DEPTH_EXCEEDED");
    expect(deep.details).toMatchObject({ depth: 4, maxDepth: 3, rootTaskId: root.taskId });
    const cycle = await failure(b!.core.createTask({ to: a!.core.endpoint()!, task: "back to the owner" }));
    expect(cycle.code).toBe("DELEGATION_CYCLE");
    await passes([a!, d!]);
    expect([c!.core.listTasks().length, d!.core.listTasks().length]).toEqual(tasksBefore);
    expect(a!.core.listTasks().map((task) => task.taskId)).toEqual([root.taskId]);
    // A library caller may ask for a new root task, which is not a cycle (the model cannot: the
    // tool takes exactly {to, task, timeoutMs?}).
    const independent = await b!.core.createTask({ to: a!.core.endpoint()!, task: "unrelated" }, { lineage: "root" });
    expect(b!.core.getTask(independent.taskId).lineage).toMatchObject({ rootTaskId: independent.taskId, depth: 2 });
  });

  test("a session working on several tasks cannot delegate (no parent to infer); a library caller may name one", async () => {
    const on = await relay();
    const [a, b, c] = await parties(on, 3);
    const first = await a!.core.createTask({ to: b!.core.endpoint()!, task: "one" });
    const second = await a!.core.createTask({ to: b!.core.endpoint()!, task: "two" });
    await passes([b!]);
    const before = c!.core.listTasks().length;
    const ambiguous = await failure(b!.core.createTask({ to: c!.core.endpoint()!, task: "which?" }));
    expect(ambiguous).toMatchObject({
      code: "DELEGATION_AMBIGUOUS",
      details: { working: expect.arrayContaining([first.taskId, second.taskId]) },
    });
    expect(ambiguous.message).toContain("finish or hand back all but one");
    await passes([c!]);
    expect(c!.core.listTasks().length).toBe(before);
    const named = await b!.core.createTask({ to: c!.core.endpoint()!, task: "this one" }, { lineage: { parentTaskId: second.taskId } });
    expect(b!.core.getTask(named.taskId).lineage?.parentTaskId).toBe(second.taskId);
  });

  test("the model's send is exactly {to, task, timeoutMs?}: naming a parent or asking for a root is refused by the schema", async () => {
    const on = await relay();
    const [a, b, c] = await parties(on, 3);
    await a!.core.createTask({ to: b!.core.endpoint()!, task: "root" });
    await passes([b!]);
    for (const extra of [{ independent: true }, { parentTaskId: crypto.randomUUID() }]) {
      const refused = await failure(b!.core.createTask({ to: c!.core.endpoint()!, task: "around the cap", ...extra }));
      expect({ extra, code: refused.code }).toEqual({ extra, code: "INVALID_REQUEST" });
    }
  });

  test("a configured depth cap lowers the chain (2: no onward delegation, on both sides) and can never raise it", async () => {
    const on = await relay();
    const [a, b, c] = await parties(on, 3, { maxDepth: 2 });
    await a!.core.createTask({ to: b!.core.endpoint()!, task: "root" });
    await passes([b!]);
    const deep = await failure(b!.core.createTask({ to: c!.core.endpoint()!, task: "one more" }));
    expect(deep).toMatchObject({ code: "DELEGATION_DEPTH_EXCEEDED", details: { depth: 3, maxDepth: 2 } });
    for (const maxDepth of [4, 1, 2.5])
      expect(() => createTaskCore({ store: createTaskStore(), session: coreInternals(a!.core).session, maxDepth })).toThrow(
        /may only be lowered/,
      );
  });

  test("the receiver refuses a forged lineage (a cycle, or a depth past the cap)", async () => {
    const on = await relay();
    const [a, b] = await parties(on, 2);
    const self = a!.core.endpoint()!;
    const target = b!.core.endpoint()!;
    const owner = { endpoint: self, key: processLocalTrust().identity.publicKey };
    const forge = async (lineage: TaskRecord["lineage"]) => {
      const now = Date.now();
      const task: TaskRecord = {
        taskId: crypto.randomUUID(),
        protocolVersion: "pi-tasks/v2",
        origin: self,
        target,
        task: "forged",
        createdAt: now,
        expiresAt: now + 60_000,
        status: "active",
        ...(lineage === undefined ? {} : { lineage }),
      };
      const event = makeEvent(task, "task.created", "1", now, { task: task.task });
      await coreInternals(a!.core).session.send(
        encodeEnvelope(self, target, task.taskId, "assignment", { task, event }, now, processLocalTrust(), undefined, sealedTo()),
      );
    };
    await forge({
      rootTaskId: "r",
      parentTaskId: "p",
      depth: 3,
      owner: { endpoint: target, key: owner.key },
      chain: [target, self, target],
    });
    await forge({ rootTaskId: "r", depth: 3, owner, chain: [self, { relay: self.relay, id: crypto.randomUUID() }, target] });
    // Consistent in every other respect (depth = chain length, the chain ends origin → target,
    // starts at its owner, no repeats, a parent named): only its depth is past the cap.
    const elsewhere = () => ({ relay: self.relay, id: crypto.randomUUID() });
    const owner4 = { endpoint: elsewhere(), key: owner.key };
    await forge({
      rootTaskId: "r4",
      parentTaskId: "p4",
      depth: maxDelegationDepth + 1,
      owner: owner4,
      chain: [owner4.endpoint, elsewhere(), self, target],
    });
    await passes([b!]);
    expect(b!.core.listTasks()).toEqual([]);
    expect(b!.core.rejections()).toEqual({ DELEGATION_CYCLE: 1, INVALID_ASSIGNMENT: 1, DELEGATION_DEPTH_EXCEEDED: 1 });
  });
});

describe("questions up the chain", () => {
  test("C asks; B raises it on A's task; A's answer reaches C bound to C's question, once, without B's model resending it", async () => {
    const on = await relay();
    const [a, b, c] = await parties(on, 3);
    const root = await a!.core.createTask({ to: b!.core.endpoint()!, task: "root" });
    await passes([b!]);
    const child = await b!.core.createTask({ to: c!.core.endpoint()!, task: "child" });
    await passes([c!]);
    await c!.core.message({ taskId: child.taskId, type: "question", message: "Which colour?" });
    await passes([b!]);
    const asked = b!.core.getTask(child.taskId).events.find((event) => event.type === "task.question")!;
    expect(b!.core.getTask(child.taskId).attention).toBe("needs_input");

    await b!.core.message({ taskId: root.taskId, type: "question", message: "C asks: which colour?", raisesQuestion: asked.eventId });
    await passes([a!]);
    const raised = a!.core.getTask(root.taskId).events.find((event) => event.type === "task.question")!;
    expect(raised.payload.raises).toEqual({ taskId: child.taskId, eventId: asked.eventId });
    expect(a!.core.getTask(root.taskId).attention).toBe("needs_input");

    await a!.core.message({ taskId: root.taskId, type: "answer", message: "Blue.", inReplyTo: raised.eventId });
    await passes([b!, c!], 2);
    const answers = c!.core.getTask(child.taskId).events.filter((event) => event.type === "task.answer");
    expect(answers.map((event) => event.payload)).toEqual([
      { message: "Blue.", inReplyTo: asked.eventId, relayedFrom: { taskId: root.taskId, eventId: expect.any(String) } },
    ]);
    expect(c!.host.inserted.filter((item) => item.event.type === "task.answer")).toHaveLength(1);
    expect(b!.core.getTask(child.taskId).attention).toBeUndefined();
    expect(a!.core.getTask(root.taskId).attention).toBeUndefined();
  });

  test("raising is refused for a question that is not an open question of a sub-task of this task", async () => {
    const on = await relay();
    const [a, b, c] = await parties(on, 3);
    const root = await a!.core.createTask({ to: b!.core.endpoint()!, task: "root" });
    await passes([b!]);
    const independent = await b!.core.createTask({ to: c!.core.endpoint()!, task: "unrelated" }, { lineage: "root" });
    await passes([c!]);
    await c!.core.message({ taskId: independent.taskId, type: "question", message: "?" });
    await passes([b!]);
    const question = b!.core.getTask(independent.taskId).events.find((event) => event.type === "task.question")!;
    const refused = await failure(
      b!.core.message({ taskId: root.taskId, type: "question", message: "?", raisesQuestion: question.eventId }),
    );
    expect(refused).toMatchObject({ code: "INVALID_REQUEST", details: { path: "/raisesQuestion" } });
    // The origin side never raises or reports progress.
    expect((await failure(a!.core.message({ taskId: root.taskId, type: "progress", message: "50%" }))).details.path).toBe("/type");
  });
});

describe("progress", () => {
  test(`50 reports: none wakes the origin; at most ${maxProgressPresentationsPerPass} shown per pass and one per ${minProgressIntervalMs} ms; the newest is what the view shows`, async () => {
    const on = await relay();
    const timers = createJumpTimers();
    const [origin, worker] = [
      await createParty({ url: on.url, fetch: on.fetch, timers }),
      await createParty({ url: on.url, fetch: on.fetch, timers }),
    ];
    opened.parties.push(origin, worker);
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "long job" });
    await passes([worker, origin]);
    const wakesBefore = origin.host.wakes.length;
    for (let index = 1; index <= 50; index += 1)
      await worker.core.message({ taskId, type: "progress", message: `step ${index} of 50`, percent: index * 2 });
    await passes([origin]);
    const shown = () => origin.host.inserted.filter((item) => item.event.type === "task.progress");
    expect(shown().map((item) => item.event.payload.message)).toEqual(["step 50 of 50"]);
    expect(origin.core.getTask(taskId).progress).toMatchObject({ message: "step 50 of 50", percent: 100 });
    const archived = () => origin.host.archived.filter((item) => item.event.type === "task.progress").length;
    expect(archived()).toBe(49);
    // Within the interval a newer report waits (queued, never holding other events) …
    await worker.core.message({ taskId, type: "progress", message: "late 1" });
    await passes([origin]);
    expect(shown()).toHaveLength(1);
    expect(origin.core.hasPendingWork()).toBe(true);
    // … a newer one supersedes it (archived) …
    await worker.core.message({ taskId, type: "progress", message: "late 2" });
    await passes([origin]);
    expect(archived()).toBe(50);
    // … and once the interval passed, the newest is shown.
    timers.jump(minProgressIntervalMs);
    await passes([origin]);
    expect(shown().map((item) => item.event.payload.message)).toEqual(["step 50 of 50", "late 2"]);
    expect(origin.host.wakes.length).toBe(wakesBefore);
    // Never forwarded back to the worker.
    expect(worker.core.getTask(taskId).events.some((event) => event.type === "task.progress")).toBe(false);
  });
});

describe("cancel", () => {
  /** A worker whose host is busy and hands cancels over through `interrupt`, reporting `outcome`. */
  async function busyWorker(on: InMemoryTaskRelay, outcome: CancelOutcome) {
    const memory = createMemoryHost();
    const interrupted: PresentationItem[] = [];
    const host: PresentationHost = {
      ...memory,
      canPresent: () => false,
      interrupt(item, report) {
        interrupted.push(item);
        queueMicrotask(() => report(outcome));
        return true;
      },
    };
    const session = createVolatileTaskSession({ url: on.url, fetch: on.fetch, callerSession: `busy-${crypto.randomUUID()}` });
    const core = createTaskCore({ store: createTaskStore(), session, host });
    await core.connect();
    opened.parties.push({ core });
    return { core, interrupted };
  }

  test("a cancel reaches a busy worker at once (interrupt) and the origin learns its outcome, without a wake", async () => {
    const on = await relay();
    const [origin] = await parties(on, 1);
    const worker = await busyWorker(on, "aborted");
    const { taskId } = await origin!.core.createTask({ to: worker.core.endpoint()!, task: "sleep 60" });
    await worker.core.refresh();
    await origin!.core.refresh();
    await origin!.core.cancel({ taskId });
    await worker.core.refresh();
    expect(worker.interrupted.map((item) => item.event.type)).toEqual(["task.cancelled"]);
    // The outcome is reported once the host calls back (a later pass ships it).
    await worker.core.refresh();
    const wakesBefore = origin!.host.wakes.length;
    await origin!.core.refresh();
    const task = origin!.core.getTask(taskId);
    expect(task.cancelOutcome).toBe("aborted");
    expect(origin!.host.inserted.filter((item) => item.event.type === "task.cancel_outcome")).toHaveLength(1);
    expect(origin!.host.wakes.length).toBe(wakesBefore);
  });

  test("a cancel presented to an idle worker reports `idle`", async () => {
    const on = await relay();
    const [origin, worker] = await parties(on, 2);
    const { taskId } = await origin!.core.createTask({ to: worker!.core.endpoint()!, task: "quick" });
    await passes([worker!, origin!]);
    await origin!.core.cancel({ taskId });
    await passes([worker!, origin!]);
    expect(origin!.core.getTask(taskId).cancelOutcome).toBe("idle");
  });
});

describe("steer", () => {
  // Issue 39: mail to a busy worker waited until its turn ended; only a cancel cut in.
  test("the origin's steer reaches a busy worker at once (steer), never waits for its turn to end; the origin sees it inserted", async () => {
    const on = await relay();
    const [origin] = await parties(on, 1);
    const memory = createMemoryHost();
    const steered: PresentationItem[] = [];
    const host: PresentationHost = {
      ...memory,
      canPresent: () => false,
      steer(item) {
        steered.push(item);
        return true;
      },
    };
    const session = createVolatileTaskSession({ url: on.url, fetch: on.fetch, callerSession: `busy-${crypto.randomUUID()}` });
    const worker = createTaskCore({ store: createTaskStore(), session, host });
    await worker.connect();
    opened.parties.push({ core: worker });
    const { taskId } = await origin!.core.createTask({ to: worker.endpoint()!, task: "paint the banner" });
    await worker.refresh();
    await origin!.core.refresh();
    const sent = await origin!.core.message({ taskId, type: "steer", message: "make it teal" });
    await worker.refresh();
    expect(steered.map((item) => [item.event.type, item.event.payload.message, item.event.payload.steer])).toEqual([
      ["task.information", "make it teal", true],
    ]);
    // A plain information for a busy worker still waits for its turn to end.
    await origin!.core.message({ taskId, type: "information", message: "no rush" });
    await worker.refresh();
    expect(steered).toHaveLength(1);
    await origin!.core.refresh();
    expect(origin!.core.getTask(taskId).events.find((event) => event.eventId === sent.eventId)?.payload.steer).toBe(true);
    const receipts = origin!.core
      .getTask(taskId)
      .events.filter((event) => event.type === "task.delivery_receipt" && event.payload.eventId === sent.eventId)
      .map((event) => event.payload.stage);
    expect(receipts).toContain("pi_inserted");
    // Only the origin steers.
    const { error } = await raised(() => worker.message({ taskId, type: "steer", message: "no" }));
    expect(error.code).toBe("INVALID_REQUEST");
  });
});

describe("a workflow's step (quietResult)", () => {
  test("its outcome is shown to the origin's model without a wake; a plain task's wakes", async () => {
    const on = await relay();
    const [origin, worker] = await parties(on, 2);
    const quiet = await origin!.core.createTask({ to: worker!.core.endpoint()!, task: "step one" }, { quietResult: true });
    const plain = await origin!.core.createTask({ to: worker!.core.endpoint()!, task: "plain" });
    await passes([worker!, origin!]);
    await worker!.core.done({ taskId: quiet.taskId, status: "completed", summary: "one done" });
    await worker!.core.done({ taskId: plain.taskId, status: "completed", summary: "plain done" });
    await passes([worker!, origin!]);
    const completedOf = (items: readonly PresentationItem[]) =>
      items.filter((item) => item.event.type === "task.completed").map((item) => item.taskId);
    expect(completedOf(origin!.host.inserted).sort()).toEqual([quiet.taskId, plain.taskId].sort());
    expect(completedOf(origin!.host.wakes.flat())).toEqual([plain.taskId]);
  });
});
