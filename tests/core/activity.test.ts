/**
 * Worker activity and liveness (src/core/activity.ts) between two cores on the real relay: a
 * worker's report reaches the origin's view as the task's state (never as an event in its log); a
 * worker that reported and then fell silent is orphaned after `heartbeatSilenceMs`, a report ends
 * the orphan; a worker known gone (its process exited) is orphaned at once; reports go only where
 * they may. Then, on the relay fake in virtual time: a worker known gone orphans only its own tasks,
 * and an unchanged heartbeat keeps a live worker alive.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { ActivityReport } from "../../src/core/activity.ts";
import { encodeEnvelope, makeIntent } from "../../src/core/envelopes.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { heartbeatIntervalMs, heartbeatSilenceMs, orphanProbeIntervalMs } from "../../src/protocol/limits.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { settle } from "../../testkit/drain.ts";
import { createJumpTimers } from "../../testkit/jump-timers.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { coreInternals } from "../../src/core/task-core.ts";
import { eventsOf } from "../helpers/core-kit.ts";
import { OTHER, taskRecord, WORKER } from "../helpers/fixtures.ts";
import { settleVirtually, virtualPair } from "../helpers/virtual-pair.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(15_000);

const fx = useRelayFixture({ proxy: false });
const opened: Party[] = [];
afterEach(() => closeParties(opened.splice(0)));

/** A wall clock the test moves (the origin judges silence by it). */
function movableClock(): { now: () => number; advance: (ms: number) => void } {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms) => void (offset += ms) };
}

async function pair(
  originClock?: () => number,
  workerClock?: () => number,
): Promise<{ origin: Party; worker: Party; taskId: string; round: () => Promise<number> }> {
  const origin = await createParty({ url: fx.relay.url, ...(originClock === undefined ? {} : { clock: originClock }) });
  const worker = await createParty({ url: fx.relay.url, ...(workerClock === undefined ? {} : { clock: workerClock }) });
  opened.push(origin, worker);
  await introduce(origin.core, worker.core);
  const created = await origin.core.createTask({ to: worker.core.endpoint()!, task: "count the files" });
  await settle([origin, worker]);
  return { origin, worker, taskId: created.taskId, round: () => settle([origin, worker]) };
}

const running: ActivityReport = {
  state: "running",
  tool: "bash",
  summary: "ls -la",
  since: Date.now(),
  usage: { turns: 2, tokens: 1_234, cost: 0.01 },
};

describe("worker activity", () => {
  test("a report reaches the origin's view as the task's state, and adds nothing to its log", async () => {
    const { origin, worker, taskId, round } = await pair();
    expect(await worker.core.reportActivity(taskId, running)).toBe(true);
    await round();
    const view = origin.core.getTask(taskId);
    expect(view.activity).toMatchObject({
      state: "running",
      tool: "bash",
      summary: "ls -la",
      usage: { turns: 2, tokens: 1_234, cost: 0.01 },
    });
    expect(view.activity!.heardAt).toBeGreaterThan(0);
    // Never an event in the log (only receipts and the assignment's own events are there).
    expect(view.events.map((event) => event.type).filter((type) => type !== "task.delivery_receipt")).toEqual(["task.created"]);
    // A newer report replaces it; an older one changes nothing.
    await worker.core.reportActivity(taskId, {
      ...running,
      state: "idle",
      tool: undefined,
      summary: undefined,
      since: running.since + 5,
    } as never);
    await round();
    expect(origin.core.getTask(taskId).activity?.state).toBe("idle");
    await worker.core.reportActivity(taskId, { ...running, since: running.since - 1 });
    await round();
    expect(origin.core.getTask(taskId).activity?.state).toBe("idle");
  });

  test("a report with the chain's total below the task reaches the origin with it", async () => {
    const { origin, worker, taskId, round } = await pair();
    const chain = { turns: 9, tokens: 5_000, cost: 0.4, workers: 3 };
    expect(await worker.core.reportActivity(taskId, { ...running, usage: { ...running.usage, chain } })).toBe(true);
    await round();
    expect(origin.core.getTask(taskId).activity?.usage).toEqual({ ...running.usage, chain });
  });

  test("reports go only from the worker of an active task: the origin, and a worker whose task ended, send nothing", async () => {
    const { origin, worker, taskId, round } = await pair();
    expect(await origin.core.reportActivity(taskId, running)).toBe("not_working");
    await worker.core.done({ taskId, status: "completed", summary: "done" });
    await round();
    expect(await worker.core.reportActivity(taskId, running)).toBe("not_working");
    expect(origin.core.getTask(taskId).activity).toBeUndefined();
  });

  test("an invalid report is refused by the origin and records nothing", async () => {
    const { origin, worker, taskId, round } = await pair();
    await worker.core.reportActivity(taskId, { ...running, tool: "x".repeat(65) });
    await round();
    expect(origin.core.getTask(taskId).activity).toBeUndefined();
    expect(origin.core.rejections().INVALID_INTENT).toBe(1);
  });
});

describe("liveness", () => {
  test("a worker that reported and then fell silent is orphaned after heartbeatSilenceMs; its next report ends the orphan", async () => {
    // Time passes for both sides.
    const clock = movableClock();
    const { origin, worker, taskId, round } = await pair(clock.now, clock.now);
    await worker.core.reportActivity(taskId, running);
    await round();
    clock.advance(heartbeatSilenceMs - 1_000);
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).attention).toBeUndefined();
    clock.advance(1_000);
    await origin.core.refresh();
    const orphaned = origin.core.getTask(taskId);
    expect(orphaned.attention).toBe("orphaned");
    expect(eventsOf(orphaned, "task.orphaned")).toHaveLength(1);
    // Alive after all (e.g. its network came back): the orphan ends.
    await worker.core.reportActivity(taskId, { ...running, since: running.since + 1 });
    await round();
    expect(origin.core.getTask(taskId).attention).toBeUndefined();
  });

  test("a worker that never reported is not judged by silence", async () => {
    const clock = movableClock();
    const { origin, taskId } = await pair(clock.now);
    clock.advance(heartbeatSilenceMs * 2);
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).attention).toBeUndefined();
  });

  test("a worker known gone (the process this Pi spawned exited) orphans its active tasks at once", async () => {
    const { origin, worker, taskId } = await pair();
    expect(origin.core.workerGone(worker.core.endpoint()!)).toBe(1);
    expect(origin.core.getTask(taskId).attention).toBe("orphaned");
    // Once is enough.
    expect(origin.core.workerGone(worker.core.endpoint()!)).toBe(0);
  });
});

/** A client of the relay that is no party to the task: it sends the origin mail its gate rejects. */
async function junkSender(): Promise<(to: TaskEndpoint) => Promise<void>> {
  const session = createVolatileTaskSession({ url: fx.relay.url, callerSession: `junk-${crypto.randomUUID().slice(0, 8)}` });
  const source = (await session.lease()).endpoint;
  const stranger = { identity: generateIdentity().identity, peerName: () => undefined };
  closers.push(() => session.close());
  return async (to) => {
    const intent = makeIntent("no-such-task", "task.activity", { ...running }, 1);
    await session.send(encodeEnvelope(source, to, "no-such-task", "intent", intent, Date.now(), stranger));
  };
}

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

describe("liveness from signed facts (one report per loss)", () => {
  test("a silent worker whose registration lives on is orphaned once: later probes neither undo nor repeat it", async () => {
    const clock = movableClock();
    const timers = createJumpTimers();
    const origin = await createParty({ url: fx.relay.url, clock: clock.now, timers });
    const worker = await createParty({ url: fx.relay.url, clock: clock.now });
    opened.push(origin, worker);
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "count the files" });
    await settle([origin, worker]);
    await worker.core.reportActivity(taskId, running);
    await settle([origin, worker]);
    // Many passes, each probing the (still registered) worker endpoint: its pace allows one each time.
    for (let pass = 0; pass < 4; pass += 1) {
      clock.advance(heartbeatSilenceMs);
      timers.jump(orphanProbeIntervalMs);
      await origin.core.refresh();
    }
    const view = origin.core.getTask(taskId);
    expect(view.attention).toBe("orphaned");
    expect(eventsOf(view, "task.orphaned")).toHaveLength(1);
    expect(origin.host.insertedIds().filter((id) => id === eventsOf(view, "task.orphaned")[0]!.eventId)).toHaveLength(1);
  });

  test("mail the origin rejects (anyone's junk, every pass) does not keep a silent worker alive", async () => {
    const clock = movableClock();
    const { origin, worker, taskId, round } = await pair(clock.now, clock.now);
    const junk = await junkSender();
    await worker.core.reportActivity(taskId, running);
    await round();
    clock.advance(heartbeatSilenceMs);
    await junk(origin.core.endpoint()!);
    await origin.core.refresh();
    expect(origin.core.rejections()).not.toEqual({});
    expect(origin.core.getTask(taskId).attention).toBe("orphaned");
  });

  test("a report signed long before it arrives (withheld by the relay, released later) renews nothing", async () => {
    const originClock = movableClock();
    const workerClock = movableClock();
    const { origin, worker, taskId, round } = await pair(originClock.now, workerClock.now);
    await worker.core.reportActivity(taskId, running);
    await round();
    // The worker signs a report now; the relay holds it back until after the silence window.
    workerClock.advance(-heartbeatSilenceMs);
    originClock.advance(heartbeatSilenceMs);
    await worker.core.reportActivity(taskId, { ...running, since: running.since + 1 });
    await round();
    const view = origin.core.getTask(taskId);
    expect(view.attention).toBe("orphaned");
    expect(eventsOf(view, "task.orphaned")).toHaveLength(1);
    // A report the worker signs after the orphan (it is back; the clocks agree again) ends it.
    originClock.advance(1_000);
    workerClock.advance(2 * heartbeatSilenceMs + 1_000);
    await worker.core.reportActivity(taskId, { ...running, since: running.since + 2 });
    await round();
    expect(origin.core.getTask(taskId).attention).toBeUndefined();
  });

  test("a reassigned task starts with nothing of its lost worker: not orphaned again for the old worker's silence", async () => {
    const clock = movableClock();
    const { origin, worker, taskId, round } = await pair(clock.now, clock.now);
    const next = await createParty({ url: fx.relay.url, clock: clock.now });
    opened.push(next);
    await introduce(origin.core, next.core);
    await worker.core.reportActivity(taskId, running);
    await round();
    clock.advance(heartbeatSilenceMs);
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).attention).toBe("orphaned");
    // Right after the orphan is shown, with the dead worker's registration still alive: reassign works.
    await origin.core.reassignTask(taskId, { to: next.core.endpoint()! });
    await settle([origin, next]);
    const view = origin.core.getTask(taskId);
    expect(view.attention).toBeUndefined();
    expect(view.activity).toBeUndefined();
    expect(eventsOf(view, "task.orphaned")).toHaveLength(1);
  });

  test("reassigning to the lost worker's successor when its registration still lives says why it cannot", async () => {
    const clock = movableClock();
    const { origin, worker, taskId, round } = await pair(clock.now, clock.now);
    await worker.core.reportActivity(taskId, running);
    await round();
    clock.advance(heartbeatSilenceMs);
    await origin.core.refresh();
    const refused = await origin.core.reassignTask(taskId).catch((error: unknown) => error as TaskError);
    expect(refused).toBeInstanceOf(TaskError);
    expect((refused as TaskError).code).toBe("REASSIGNMENT_REFUSED");
    expect((refused as TaskError).message).toContain("name the worker to take it over");
  });
});

// -- liveness checks on the relay fake, in virtual time ---------------------------------------------

describe("liveness: which worker is gone, and what keeps one alive (relay fake)", () => {
  test("a worker known gone orphans only its own tasks: another worker's stay active", async () => {
    // Guards src/core/liveness.ts orphanWorkerTasks() (via TaskCore.workerGone, the spawn watch's call):
    // `sameEndpoint(stored.record.target, endpoint)`.
    const p = await virtualPair();
    const store = coreInternals(p.origin).store;
    const self = p.origin.endpoint()!;
    const [first, second, other] = [WORKER, WORKER, OTHER].map((target) => {
      const record = taskRecord({ origin: self, target, createdAt: p.clock(), expiresAt: p.clock() + 3_600_000 });
      store.putTask(record, "origin");
      return record.taskId;
    }) as [string, string, string];
    expect(p.origin.workerGone(WORKER)).toBe(2);
    expect(p.origin.getTask(first).attention).toBe("orphaned");
    expect(p.origin.getTask(second).attention).toBe("orphaned");
    expect(p.origin.getTask(other).attention).toBeUndefined();
    expect(store.getTaskMeta(other)?.orphanedAt).toBeUndefined();
    expect(p.origin.getTask(other).status).toBe("active");
  });

  test("a heartbeat with an unchanged state (the same since) keeps a live worker alive; silence after the last one orphans it", async () => {
    // Guards src/core/intake.ts canonicalizeIntent() → src/core/liveness.ts heardFromWorker(): every
    // genuine report renews liveness by its signing time, and orphanSilentWorkers() judges by that
    // (aliveAt), never by the report's `since`; src/core/activity.ts recordActivity() keeps an equal-since report.
    const p = await virtualPair();
    const { taskId } = await settleVirtually(p.timers, p.origin.createTask({ to: p.worker.endpoint()!, task: "count the files" }));
    await settleVirtually(p.timers, p.worker.refresh());
    const report: ActivityReport = { ...running, since: p.clock() };
    // Well past heartbeatSilenceMs after `since`, one unchanged report every heartbeatIntervalMs.
    const beats = Math.ceil((2 * heartbeatSilenceMs) / heartbeatIntervalMs);
    let heardAt = 0;
    for (let beat = 0; beat < beats; beat += 1) {
      expect(await settleVirtually(p.timers, p.worker.reportActivity(taskId, report))).toBe(true);
      await settleVirtually(p.timers, p.origin.refresh());
      const view = p.origin.getTask(taskId);
      expect(view.attention).toBeUndefined();
      expect(view.activity?.since).toBe(report.since);
      expect(view.activity!.heardAt).toBeGreaterThan(heardAt);
      heardAt = view.activity!.heardAt;
      p.advanceWall(heartbeatIntervalMs);
    }
    expect(eventsOf(p.origin.getTask(taskId), "task.orphaned")).toEqual([]);
    // The heartbeats stop: silence is judged from the last one.
    p.advanceWall(heartbeatSilenceMs - heartbeatIntervalMs);
    await settleVirtually(p.timers, p.origin.refresh());
    expect(p.origin.getTask(taskId).attention).toBe("orphaned");
  });
});
