/**
 * Outcomes under failure (issue 14), TaskCores against the real relay (its CLI) behind the fault
 * proxy: a lost worker is orphaned once within its bound; reassignment (by hand and automatic)
 * carries history under a new generation; mail of an older generation is refused
 * (`STALE_GENERATION`), counted and never presented; a completion after the timeout settles the
 * outcome and is shown once; corrections and withdrawals keep the original, superseded; and the
 * audit joins both sides' views with the gaps named.
 *
 * Time moves without sleeping: the cores share jump timers (probe cadence) and a jump clock
 * (`lostSince`, timeouts, event stamps). Passes run at the active cadence (`activePollIntervalMs`).
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { coreInternals, createTaskCore, rehomeCore } from "../../src/core/task-core.ts";
import {
  activePollIntervalMs,
  maxAuditEntries,
  orphanAfterMs,
  orphanProbeIntervalMs,
  minTaskTimeoutMs,
} from "../../src/protocol/limits.ts";
import { RELAY_PROFILE } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { failure } from "../../testkit/async.ts";
import { drain, relayBacklog, settle } from "../../testkit/drain.ts";
import type { ProxyRequest } from "../../testkit/fault-proxy.ts";
import { createJumpClock, createJumpTimers, type JumpClock, type JumpTimers } from "../../testkit/jump-timers.ts";
import { createMemoryHost } from "../../testkit/memory-host.ts";
import { closeParties, type Party } from "../../testkit/party.ts";
import { eventsOf, expectCode, sentEnvelopes } from "../helpers/core-kit.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(10_000);

const fx = useRelayFixture({ proxy: true });

// -------------------------------------------------------------------------------------------------
// Parties on shared jump time
// -------------------------------------------------------------------------------------------------

interface Time {
  readonly timers: JumpTimers;
  readonly clock: JumpClock;
  /** Moves both the delivery-budget timers and the record clock forward (between passes only). */
  advance(ms: number): void;
}

function jumpTime(): Time {
  const timers = createJumpTimers();
  const clock = createJumpClock();
  return {
    timers,
    clock,
    advance(ms) {
      timers.jump(ms);
      clock.jump(ms);
    },
  };
}

/** A TaskCore on the proxy with an in-memory host (createParty, plus `autoReassign`). */
async function party(time: Time, options: { autoReassign?: boolean } = {}): Promise<Party> {
  const name = `accountability-${crypto.randomUUID().slice(0, 8)}`;
  const host = createMemoryHost();
  const session = createVolatileTaskSession({ url: fx.proxy.url, callerSession: name, requestTimeoutMs: 4_000 });
  const core = createTaskCore({
    store: createTaskStore(),
    session,
    host,
    timers: time.timers,
    clock: time.clock,
    ...(options.autoReassign === true ? { autoReassign: true } : {}),
  });
  fx.defer(() => closeParties([{ core }]));
  await core.connect();
  return { name, core, host };
}

/** The worker's Pi dies: its lifetime ends and the relay drops its registration. */
async function kill(worker: Party): Promise<void> {
  await worker.core.close();
  await coreInternals(worker.core).session.disconnect();
}

/** The worker's session binds again (new endpoint, the old one's successor) with a fresh lifetime. */
async function respawn(worker: Party, time: Time): Promise<Party> {
  await worker.core.close();
  const session = coreInternals(worker.core).session;
  await session.rebind();
  const host = createMemoryHost();
  const core = createTaskCore({ store: createTaskStore(), session, host, timers: time.timers, clock: time.clock });
  fx.defer(() => core.close());
  return { name: worker.name, core, host };
}

/** Passes on every open party at the active cadence until `done()` holds; the passes used. */
async function passUntil(time: Time, parties: readonly Party[], done: () => boolean, limit = 40): Promise<number> {
  for (let passes = 1; passes <= limit; passes += 1) {
    time.advance(activePollIntervalMs);
    for (const side of parties) if (!side.core.closed()) await side.core.refresh();
    if (done()) return passes;
  }
  throw new Error(`passUntil: not reached within ${limit} passes`);
}

async function delegated(time: Time, options: { autoReassign?: boolean; timeoutMs?: number; task?: string } = {}) {
  const origin = await party(time, { autoReassign: options.autoReassign });
  const worker = await party(time);
  const created = await origin.core.createTask({
    to: worker.core.endpoint()!,
    task: options.task ?? "accountable work",
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  });
  await settle([origin, worker]);
  expect(worker.core.getTask(created.taskId).status).toBe("active");
  return { origin, worker, taskId: created.taskId, workerEndpoint: worker.core.endpoint()! };
}

const ofTask = (host: Party["host"], taskId: string, type: string) =>
  host.inserted.filter((item) => item.taskId === taskId && item.event.type === type);
const wokenOf = (host: Party["host"], taskId: string, type: string) =>
  host.wakes.flat().filter((item) => item.taskId === taskId && item.event.type === type);

/** The relay's answer to a resolve of an endpoint it does not hold. */
function notRegistered() {
  return {
    ok: false,
    profile: RELAY_PROFILE,
    epoch: fx.relay.epoch,
    error: { code: "TARGET_NOT_REGISTERED", message: "The target endpoint is not registered on the relay.", retryable: false },
  };
}

const resolvesOf = (caller: string, target: TaskEndpoint) => (request: ProxyRequest) => {
  const body = request.body as { callerSession?: unknown; target?: { id?: unknown } } | undefined;
  return body?.callerSession === caller && body.target?.id === target.id;
};

// -------------------------------------------------------------------------------------------------

describe("orphans", () => {
  test("a worker whose registration is gone is orphaned within orphanAfterMs + orphanProbeIntervalMs: one task.orphaned, inserted once, one wake; more passes do not repeat it", async () => {
    const time = jumpTime();
    const { origin, worker, taskId, workerEndpoint } = await delegated(time);
    // The registration goes right after the origin's last successful probe (settle ran a pass):
    // the worst case for the bound.
    await kill(worker);
    const passes = await passUntil(time, [origin], () => origin.core.getTask(taskId).attention === "orphaned");
    // Counted in passes at the active cadence (simulated time, free of real-time drift).
    expect(passes).toBeGreaterThanOrEqual(orphanAfterMs / activePollIntervalMs);
    expect(passes).toBeLessThanOrEqual((orphanAfterMs + orphanProbeIntervalMs) / activePollIntervalMs);
    const view = origin.core.getTask(taskId);
    expect(view).toMatchObject({ status: "active", outcome: "unknown", attention: "orphaned", target: workerEndpoint });
    const orphaned = eventsOf(view, "task.orphaned");
    expect(orphaned).toHaveLength(1);
    expect(orphaned[0]!.payload).toMatchObject({ target: workerEndpoint });
    expect(orphaned[0]!.occurredAt - (orphaned[0]!.payload.since as number)).toBeGreaterThanOrEqual(orphanAfterMs);

    // Shown once, with one wake; probing stops and nothing repeats, however many passes follow.
    for (let pass = 0; pass < 4; pass += 1) {
      time.advance(orphanProbeIntervalMs);
      await origin.core.refresh();
    }
    expect(ofTask(origin.host, taskId, "task.orphaned").map((item) => item.eventId)).toEqual([orphaned[0]!.eventId]);
    expect(wokenOf(origin.host, taskId, "task.orphaned")).toHaveLength(1);
    expect(eventsOf(origin.core.getTask(taskId), "task.orphaned")).toHaveLength(1);
    expect(origin.core.getTask(taskId).attention).toBe("orphaned");
    // Never forwarded: it is the origin's own record.
    expect(sentEnvelopes(fx.proxy, origin.name).filter((sent) => sent.inner?.type === "task.orphaned")).toEqual([]);
  });

  test("a registration seen again before orphanAfterMs clears the suspicion: the clock restarts at the next loss", async () => {
    const time = jumpTime();
    const { origin, taskId, workerEndpoint } = await delegated(time);
    const lie = (times: number) =>
      fx.proxy.push({
        operation: "resolve",
        kind: "reply",
        status: 404,
        body: notRegistered(),
        times,
        when: resolvesOf(origin.name, workerEndpoint),
      });
    // One probe sees the worker gone, the next sees it registered.
    const first = lie(1);
    time.advance(orphanProbeIntervalMs);
    await origin.core.refresh();
    expect(first.hits()).toBe(1);
    time.advance(orphanProbeIntervalMs);
    await origin.core.refresh();
    // Gone again from now on: orphanAfterMs after the FIRST loss it would be orphaned, had the
    // registration seen in between not cleared the suspicion.
    const again = lie(Infinity);
    time.advance(orphanProbeIntervalMs);
    await origin.core.refresh();
    expect(again.hits()).toBe(1);
    let view = origin.core.getTask(taskId);
    expect(view.attention).toBeUndefined();
    expect(eventsOf(view, "task.orphaned")).toEqual([]);
    // orphanAfterMs after the second loss it is.
    time.advance(orphanProbeIntervalMs);
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).attention).toBeUndefined();
    time.advance(orphanProbeIntervalMs);
    await origin.core.refresh();
    view = origin.core.getTask(taskId);
    expect(view.attention).toBe("orphaned");
    expect(eventsOf(view, "task.orphaned")).toHaveLength(1);
    expect(again.hits()).toBe(3);
  });
});

// -------------------------------------------------------------------------------------------------

describe("reassignment after an orphan", () => {
  test("reassigned by hand to a new worker: it records the assignment with history under generation 2, completes, and the origin's outcome settles", async () => {
    const time = jumpTime();
    const { origin, worker, taskId, workerEndpoint } = await delegated(time, { task: "carry my history" });
    const note = await origin.core.message({ taskId, type: "information", message: "context before the loss" });
    await settle([origin, worker]);
    expect(origin.core.getTask(taskId).generation ?? 1).toBe(1);
    await kill(worker);
    await passUntil(time, [origin], () => origin.core.getTask(taskId).attention === "orphaned");

    const fresh = await party(time);
    const moved = await origin.core.reassignTask(taskId, { to: fresh.core.endpoint()! });
    expect(moved).toMatchObject({ taskId, previousTarget: workerEndpoint, target: fresh.core.endpoint()!, historyTruncated: false });
    let view = origin.core.getTask(taskId);
    expect(view).toMatchObject({ status: "active", generation: 2, target: fresh.core.endpoint()! });
    expect(view.attention).toBeUndefined();
    // One loss allows one move.
    expectCode(await failure(origin.core.reassignTask(taskId, { to: fresh.core.endpoint()! })), "REASSIGNMENT_REFUSED");

    await settle([origin, fresh]);
    const held = fresh.core.getTask(taskId);
    expect(held).toMatchObject({ role: "worker", status: "active", generation: 2, target: fresh.core.endpoint()! });
    const created = eventsOf(origin.core.getTask(taskId), "task.created")[0]!;
    // The history (the origin's log without its own local records) and then the reassignment.
    expect(held.events.map((event) => event.eventId)).toEqual([created.eventId, note.eventId!, moved.eventId]);
    expect(eventsOf(held, "task.orphaned")).toEqual([]);
    expect(fresh.host.insertedIds()).toEqual([moved.eventId]);

    await fresh.core.done({ taskId, status: "completed", summary: "finished by the new worker" });
    await settle([origin, fresh]);
    view = origin.core.getTask(taskId);
    expect(view).toMatchObject({ status: "completed", outcome: "succeeded" });
    expect(view.attention).toBeUndefined();
    expect(ofTask(origin.host, taskId, "task.completed").map((item) => item.event.payload.summary)).toEqual(["finished by the new worker"]);
  });

  test("autoReassign: the orphaned task moves by itself to the respawned worker of the same session, which completes it", async () => {
    const time = jumpTime();
    const { origin, worker, taskId, workerEndpoint } = await delegated(time, { autoReassign: true });
    const successor = await respawn(worker, time);
    const successorEndpoint = successor.core.endpoint() ?? (await successor.core.connect());
    expect(successorEndpoint.id).not.toBe(workerEndpoint.id);
    await passUntil(time, [origin, successor], () => successor.core.findTask(taskId) !== undefined);

    const view = origin.core.getTask(taskId);
    expect(view).toMatchObject({ status: "active", generation: 2, target: successorEndpoint });
    expect(view.attention).toBeUndefined();
    expect(eventsOf(view, "task.orphaned")).toHaveLength(1);
    const reassigned = eventsOf(view, "task.reassigned");
    expect(reassigned).toHaveLength(1);
    expect(reassigned[0]!.payload).toMatchObject({ previousTarget: workerEndpoint });
    await settle([origin, successor]);
    expect(successor.core.getTask(taskId)).toMatchObject({ generation: 2, status: "active" });
    expect(successor.host.insertedIds()).toEqual([reassigned[0]!.eventId]);

    await successor.core.done({ taskId, status: "completed", summary: "done by the successor" });
    await settle([origin, successor]);
    expect(origin.core.getTask(taskId)).toMatchObject({ status: "completed", outcome: "succeeded" });
    // No second move once it settled.
    for (let pass = 0; pass < 3; pass += 1) {
      time.advance(orphanProbeIntervalMs);
      await origin.core.refresh();
    }
    expect(eventsOf(origin.core.getTask(taskId), "task.reassigned")).toHaveLength(1);
  });

  test("without autoReassign an orphaned task stays with its lost worker, although a successor is live", async () => {
    const time = jumpTime();
    const { origin, worker, taskId, workerEndpoint } = await delegated(time);
    const successor = await respawn(worker, time);
    await successor.core.connect();
    await passUntil(time, [origin, successor], () => origin.core.getTask(taskId).attention === "orphaned");
    for (let pass = 0; pass < 3; pass += 1) {
      time.advance(orphanProbeIntervalMs);
      await origin.core.refresh();
    }
    expect(origin.core.getTask(taskId)).toMatchObject({ attention: "orphaned", target: workerEndpoint });
    expect(eventsOf(origin.core.getTask(taskId), "task.reassigned")).toEqual([]);
    expect(successor.core.findTask(taskId)).toBeUndefined();
  });
});

// -------------------------------------------------------------------------------------------------

describe("generations", () => {
  test("a zombie worker's done after the reassignment is refused STALE_GENERATION, counted, never presented; the result comes from the new worker", async () => {
    const time = jumpTime();
    const { origin, worker: zombie, taskId } = await delegated(time);
    // The worker drops off the relay (its registration is gone) but its Pi keeps the task in RAM.
    const zombieSession = coreInternals(zombie.core).session;
    await zombieSession.disconnect();
    await passUntil(time, [origin], () => origin.core.getTask(taskId).attention === "orphaned");
    const fresh = await party(time);
    await origin.core.reassignTask(taskId, { to: fresh.core.endpoint()! });
    await settle([origin]);
    const insertedBefore = origin.host.insertedIds();
    const eventsBefore = origin.core.getTask(taskId).events.map((event) => event.eventId);
    expect(origin.core.rejections().STALE_GENERATION).toBeUndefined();

    // The zombie comes back (a new endpoint on the same relay state, the same lifetime and task)
    // and finishes the task it still holds, before the new worker said anything.
    const back = await zombieSession.rebind();
    rehomeCore(zombie.core, back.endpoint, false);
    expect(zombie.core.getTask(taskId).generation ?? 1).toBe(1);
    const stale = await zombie.core.done({ taskId, status: "completed", summary: "zombie result" });
    expect(stale.terminalDelivery.state).toBe("accepted");
    await settle([origin, zombie]);

    expect(origin.core.rejections().STALE_GENERATION).toBe(1);
    expect(origin.host.rejections.map((rejection) => rejection.code)).toEqual(["STALE_GENERATION"]);
    expect(origin.host.insertedIds()).toEqual(insertedBefore);
    let view = origin.core.getTask(taskId);
    expect(view).toMatchObject({ status: "active", outcome: "unknown", target: fresh.core.endpoint()! });
    expect(view.events.map((event) => event.eventId)).toEqual(eventsBefore);
    // The refused mail was ACKed: it does not sit at the relay.
    expect(await relayBacklog(origin.core)).toBe(0);

    // The new generation's worker is heard.
    await settle([origin, fresh]);
    await fresh.core.message({ taskId, type: "information", message: "new worker here" });
    await fresh.core.done({ taskId, status: "completed", summary: "the real result" });
    await settle([origin, fresh, zombie]);
    view = origin.core.getTask(taskId);
    expect(view).toMatchObject({ status: "completed", outcome: "succeeded" });
    expect(eventsOf(view, "task.completed").map((event) => event.payload.summary)).toEqual(["the real result"]);
    expect(eventsOf(view, "task.late_terminal")).toEqual([]);
    expect(origin.host.inserted.filter((item) => item.event.payload.summary === "zombie result")).toEqual([]);
    expect(origin.core.rejections().STALE_GENERATION).toBe(1);

    // More stale mail after the new worker's: refused and counted too.
    await zombie.core.message({ taskId, type: "information", message: "still here" });
    await settle([origin, zombie]);
    expect(origin.core.rejections().STALE_GENERATION).toBe(2);
    expect(eventsOf(origin.core.getTask(taskId), "task.information").map((event) => event.payload.message)).toEqual(["new worker here"]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("the same worker comes back", () => {
  test("a reassignment to the same worker re-homed on a new endpoint: its done queued before it heard of the move still completes the task", async () => {
    const time = jumpTime();
    const { origin, worker, taskId } = await delegated(time);
    const session = coreInternals(worker.core).session;
    await session.disconnect();
    await passUntil(time, [origin], () => origin.core.getTask(taskId).attention === "orphaned");
    // Its Pi rebinds (a new endpoint, the same lifetime) and the origin moves the task there.
    const back = await session.rebind();
    rehomeCore(worker.core, back.endpoint, false);
    const moved = await origin.core.reassignTask(taskId);
    expect(moved.target).toEqual(back.endpoint);
    // The worker finishes before it received the reassignment (its intent says generation 1).
    await worker.core.done({ taskId, status: "completed", summary: "crossed the reassignment" });
    await drain([origin, worker], { timers: time.timers });
    expect(origin.core.getTask(taskId)).toMatchObject({ status: "completed", outcome: "succeeded" });
    expect(origin.core.rejections().STALE_GENERATION).toBeUndefined();
  });

  test("a worker back on its renewed endpoint ends the orphan by its mail; a probe that sees the registration alone does not (a dead Pi's registration outlives it)", async () => {
    for (const via of ["mail", "probe"] as const) {
      const time = jumpTime();
      const { origin, worker, taskId, workerEndpoint } = await delegated(time, { autoReassign: true });
      const session = coreInternals(worker.core).session;
      await session.disconnect();
      await passUntil(time, [origin], () => origin.core.getTask(taskId).attention === "orphaned");
      const back = await session.connect();
      expect({ via, same: back.endpoint.id === workerEndpoint.id }).toEqual({ via, same: true });
      if (via === "mail") {
        await worker.core.message({ taskId, type: "information", message: "still here" });
        await origin.core.refresh();
      } else {
        time.advance(orphanProbeIntervalMs);
        await origin.core.refresh();
      }
      const expected = via === "mail" ? undefined : "orphaned";
      expect({ via, attention: origin.core.getTask(taskId).attention }).toEqual({ via, attention: expected });
      expect({ via, reported: eventsOf(origin.core.getTask(taskId), "task.orphaned").length }).toEqual({ via, reported: 1 });
      // Nothing moves a task whose worker is back: its successor is itself.
      time.advance(orphanProbeIntervalMs);
      await origin.core.refresh();
      expect({ via, moved: eventsOf(origin.core.getTask(taskId), "task.reassigned").length }).toEqual({ via, moved: 0 });
    }
  });
});

describe("late outcomes", () => {
  for (const [status, outcome] of [
    ["completed", "succeeded"],
    ["failed", "failed"],
  ] as const) {
    test(`a ${status} report after the timeout: status stays timed_out, outcome ${outcome}, shown once, attention cleared`, async () => {
      const time = jumpTime();
      const { origin, worker, taskId } = await delegated(time, { timeoutMs: minTaskTimeoutMs });
      time.advance(minTaskTimeoutMs);
      await origin.core.refresh();
      let view = origin.core.getTask(taskId);
      expect(view).toMatchObject({ status: "timed_out", outcome: "unknown", attention: "indeterminate" });
      expect(ofTask(origin.host, taskId, "task.timed_out")).toHaveLength(1);

      // The worker had not heard of the timeout when it finished.
      expect(worker.core.getTask(taskId).status).toBe("active");
      await worker.core.done({ taskId, status, summary: `late ${status}`, result: { value: 42 } });
      await settle([origin, worker]);
      for (let pass = 0; pass < 3; pass += 1) await origin.core.refresh();

      view = origin.core.getTask(taskId);
      expect(view).toMatchObject({ status: "timed_out", outcome });
      expect(view.attention).toBeUndefined();
      expect(eventsOf(view, `task.${status}`)).toEqual([]);
      const late = eventsOf(view, "task.late_terminal");
      expect(late).toHaveLength(1);
      expect(late[0]!.payload).toMatchObject({ lateType: `task.${status}`, summary: `late ${status}`, result: { value: 42 } });
      // Shown to the origin's model exactly once, with a wake.
      expect(ofTask(origin.host, taskId, "task.late_terminal").map((item) => item.eventId)).toEqual([late[0]!.eventId]);
      expect(wokenOf(origin.host, taskId, "task.late_terminal")).toHaveLength(1);
      expect(worker.core.getTask(taskId).status).toBe("timed_out");
      // The late result is a result: its author may correct it.
      await worker.core.message({
        taskId,
        type: "correction",
        supersedes: late[0]!.eventId,
        message: "the real value is 43",
        result: { value: 43 },
      });
      await settle([origin, worker]);
      const corrections = eventsOf(origin.core.getTask(taskId), "task.correction");
      expect(corrections.map((event) => event.payload.supersedes)).toEqual([late[0]!.eventId]);
    });
  }

  test("a timed-out task with no late report stays indeterminate", async () => {
    const time = jumpTime();
    const { origin, worker, taskId } = await delegated(time, { timeoutMs: minTaskTimeoutMs });
    time.advance(minTaskTimeoutMs);
    await settle([origin, worker]);
    expect(origin.core.getTask(taskId)).toMatchObject({ status: "timed_out", outcome: "unknown", attention: "indeterminate" });
    expect(ofTask(origin.host, taskId, "task.late_terminal")).toEqual([]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("corrections and withdrawals", () => {
  test("the worker corrects its result: the origin shows the correction once, keeps the original marked superseded, status unchanged, finality kept", async () => {
    const time = jumpTime();
    const { origin, worker, taskId } = await delegated(time);
    await worker.core.done({ taskId, status: "completed", summary: "the answer is 41", result: { value: 41 } });
    await settle([origin, worker]);
    const completed = eventsOf(origin.core.getTask(taskId), "task.completed")[0]!;
    // The worker knows the canonical event from its echo.
    expect(worker.core.getTask(taskId).events.map((event) => event.eventId)).toContain(completed.eventId);

    const sent = await worker.core.message({
      taskId,
      type: "correction",
      supersedes: completed.eventId,
      message: "off by one: it is 42",
      result: { value: 42 },
      finality: "final",
    });
    await settle([origin, worker]);
    const view = origin.core.getTask(taskId);
    const corrections = eventsOf(view, "task.correction");
    expect(corrections).toHaveLength(1);
    expect(corrections[0]!.payload).toMatchObject({
      intentId: sent.intentId,
      supersedes: completed.eventId,
      message: "off by one: it is 42",
      result: { value: 42 },
      finality: "final",
    });
    expect(view.superseded).toEqual({ [completed.eventId]: corrections[0]!.eventId });
    // The original stays, and so does first-terminal-wins.
    expect(eventsOf(view, "task.completed")).toEqual([completed]);
    expect(view).toMatchObject({ status: "completed", outcome: "succeeded" });
    expect(ofTask(origin.host, taskId, "task.correction").map((item) => item.eventId)).toEqual([corrections[0]!.eventId]);
    expect(worker.core.getTask(taskId).superseded).toEqual({ [completed.eventId]: corrections[0]!.eventId });
  });

  test("the origin corrects its answer: the worker receives the correction, the answer stays superseded; a withdrawal is kept as one", async () => {
    const time = jumpTime();
    const { origin, worker, taskId } = await delegated(time);
    await worker.core.message({ taskId, type: "question", message: "which branch?" });
    await settle([origin, worker]);
    const question = eventsOf(origin.core.getTask(taskId), "task.question")[0]!;
    const answer = await origin.core.message({ taskId, type: "answer", inReplyTo: question.eventId, message: "main", finality: "interim" });
    await settle([origin, worker]);
    const correction = await origin.core.message({
      taskId,
      type: "correction",
      supersedes: answer.eventId!,
      message: "release, not main",
      finality: "final",
    });
    await settle([origin, worker]);

    const held = worker.core.getTask(taskId);
    expect(eventsOf(held, "task.answer").map((event) => [event.eventId, event.payload.finality])).toEqual([[answer.eventId, "interim"]]);
    expect(eventsOf(held, "task.correction").map((event) => [event.eventId, event.payload.finality, event.payload.supersedes])).toEqual([
      [correction.eventId, "final", answer.eventId],
    ]);
    expect(held.superseded).toEqual({ [answer.eventId!]: correction.eventId! });
    expect(ofTask(worker.host, taskId, "task.correction").map((item) => item.eventId)).toEqual([correction.eventId!]);
    expect(origin.core.getTask(taskId).superseded).toEqual({ [answer.eventId!]: correction.eventId! });

    // Withdrawing the correction itself (a correction may be superseded too).
    const withdrawal = await origin.core.message({
      taskId,
      type: "correction",
      supersedes: correction.eventId!,
      message: "ignore that, ask again later",
      withdraw: true,
    });
    await settle([origin, worker]);
    const after = worker.core.getTask(taskId);
    expect(eventsOf(after, "task.correction").find((event) => event.eventId === withdrawal.eventId)?.payload).toMatchObject({
      withdrawn: true,
      supersedes: correction.eventId,
    });
    expect(after.superseded).toEqual({ [answer.eventId!]: correction.eventId!, [correction.eventId!]: withdrawal.eventId! });
  });

  test("only the author corrects: the worker cannot correct the origin's answer, the origin cannot correct the worker's result (INVALID_REQUEST, nothing changes)", async () => {
    const time = jumpTime();
    const { origin, worker, taskId } = await delegated(time);
    await worker.core.message({ taskId, type: "question", message: "which branch?" });
    await settle([origin, worker]);
    const question = eventsOf(origin.core.getTask(taskId), "task.question")[0]!;
    const answer = await origin.core.message({ taskId, type: "answer", inReplyTo: question.eventId, message: "main" });
    await worker.core.done({ taskId, status: "completed", summary: "done", result: { value: 1 } });
    await drain([origin, worker]);
    const completed = eventsOf(origin.core.getTask(taskId), "task.completed")[0]!;
    const originBefore = origin.core.getTask(taskId).events;
    const workerBefore = worker.core.getTask(taskId).events;
    const sendsBefore = [sentEnvelopes(fx.proxy, origin.name).length, sentEnvelopes(fx.proxy, worker.name).length];

    const byWorker = await failure(
      worker.core.message({ taskId, type: "correction", supersedes: answer.eventId!, message: "it was release" }),
    );
    expectCode(byWorker, "INVALID_REQUEST");
    expect(byWorker.details.path).toBe("/supersedes");
    const byOrigin = await failure(
      origin.core.message({ taskId, type: "correction", supersedes: completed.eventId, message: "the value is 2", result: { value: 2 } }),
    );
    expectCode(byOrigin, "INVALID_REQUEST");
    expect(byOrigin.details.path).toBe("/supersedes");
    // Corrections name what they correct, and only corrections take correction fields.
    expectCode(await failure(origin.core.message({ taskId, type: "correction", message: "of what?" })), "INVALID_REQUEST");
    expectCode(
      await failure(origin.core.message({ taskId, type: "information", message: "x", supersedes: answer.eventId! })),
      "INVALID_REQUEST",
    );
    expectCode(
      await failure(origin.core.message({ taskId, type: "correction", supersedes: question.eventId, message: "not an answer or result" })),
      "INVALID_REQUEST",
    );

    await drain([origin, worker]);
    expect(origin.core.getTask(taskId).events).toEqual(originBefore);
    expect(worker.core.getTask(taskId).events).toEqual(workerBefore);
    expect(origin.core.getTask(taskId).superseded).toEqual({});
    expect([sentEnvelopes(fx.proxy, origin.name).length, sentEnvelopes(fx.proxy, worker.name).length]).toEqual(sendsBefore);
  });
});

// -------------------------------------------------------------------------------------------------

describe("audit", () => {
  test("before the worker's view: a no-view gap; once it came, one timeline held by both sides and no missing event", async () => {
    const time = jumpTime();
    const { origin, worker, taskId } = await delegated(time);
    await origin.core.message({ taskId, type: "information", message: "one" });
    await worker.core.message({ taskId, type: "information", message: "two" });
    await settle([origin, worker]);

    const unasked = origin.core.audit(taskId);
    expect(unasked.gaps.map((gap) => [gap.kind, gap.side])).toEqual([["no-view", "worker"]]);
    expect(unasked.gaps[0]!.text).toContain("not asked yet");
    const requestId = origin.core.requestAudit(taskId);
    const asked = origin.core.audit(taskId);
    expect(asked.gaps.map((gap) => [gap.kind, gap.side])).toEqual([["no-view", "worker"]]);
    expect(asked.gaps[0]!.text).toContain("asked, not answered yet");
    expect(asked.timeline.every((line) => line.heldBy.join() === "origin")).toBe(true);

    await settle([origin, worker]);
    await origin.core.refresh();
    const report = origin.core.audit(taskId);
    expect(report.sides).toEqual(["origin", "worker"]);
    expect(report.gaps).toEqual([]);
    const travelling = origin.core
      .getTask(taskId)
      .events.filter((event) => !["task.delivery_receipt", "task.audit_requested", "task.audit_view"].includes(event.type));
    const byId = new Map(report.timeline.map((line) => [line.eventId, line.heldBy]));
    for (const event of travelling)
      expect({ type: event.type, heldBy: byId.get(event.eventId) }).toEqual({ type: event.type, heldBy: ["origin", "worker"] });
    // The audit's own request is about the audit, not the task: no line of the timeline it reports.
    expect(byId.has(requestId)).toBe(false);
    expect(report.timeline.map((line) => line.type).filter((type) => type.startsWith("task.audit"))).toEqual([]);
    // The view is kept at the origin, never shown to either model, never forwarded.
    expect(eventsOf(origin.core.getTask(taskId), "task.audit_view")).toHaveLength(1);
    expect(origin.host.inserted.filter((item) => item.event.type.startsWith("task.audit"))).toEqual([]);
    expect(worker.host.inserted.filter((item) => item.event.type.startsWith("task.audit"))).toEqual([]);
    expect(eventsOf(worker.core.getTask(taskId), "task.audit_view")).toEqual([]);
    // Only the origin audits.
    expectCode(await failure(Promise.resolve().then(() => worker.core.requestAudit(taskId))), "NOT_ORIGIN");
  });

  test("a worker that never received an event: the audit names it as missing at the worker", async () => {
    const time = jumpTime();
    const { origin, worker, taskId, workerEndpoint } = await delegated(time);
    // The relay accepts the origin's message, but the worker never sees it (cut from its pages).
    let dropped = "";
    const cut = fx.proxy.push({
      operation: "receive",
      kind: "rewrite",
      times: Infinity,
      when: (request) => (request.body as { endpoint?: { id?: string } }).endpoint?.id === workerEndpoint.id,
      rewrite: (reply: { value: { deliveries: { envelope: { envelopeId: string } }[] } }) => {
        reply.value.deliveries = reply.value.deliveries.filter((delivery) => delivery.envelope.envelopeId !== dropped);
        return reply;
      },
    });
    const lost = await origin.core.message({ taskId, type: "information", message: "this one is lost" });
    dropped = lost.envelopeId;
    const kept = await origin.core.message({ taskId, type: "information", message: "this one arrives" });
    origin.core.requestAudit(taskId);
    await settle([origin, worker]);
    await origin.core.refresh();
    expect(cut.hits()).toBeGreaterThan(0);
    expect(worker.core.getTask(taskId).events.map((event) => event.eventId)).not.toContain(lost.eventId);

    const report = origin.core.audit(taskId);
    const missing = report.gaps.filter((gap) => gap.kind === "missing");
    expect(missing.map((gap) => [gap.side, gap.kind === "missing" ? gap.eventId : ""])).toEqual([["worker", lost.eventId!]]);
    expect(missing[0]!.text).toContain("task.information");
    const byId = new Map(report.timeline.map((line) => [line.eventId, line.heldBy]));
    expect(byId.get(lost.eventId!)).toEqual(["origin"]);
    expect(byId.get(kept.eventId!)).toEqual(["origin", "worker"]);
  });

  test("a worker holding more than maxAuditEntries events shows the newest and counts the rest: an omitted gap, no missing one", async () => {
    const time = jumpTime();
    const { origin, worker, taskId } = await delegated(time);
    const extra = maxAuditEntries + 4;
    for (let index = 0; index < extra; index += 1) {
      await origin.core.message({ taskId, type: "information", message: `note ${index}` });
      // The relay bounds one mailbox: the worker takes them in as they come.
      if (index % 40 === 39) await drain([origin, worker], { timers: time.timers });
    }
    await drain([origin, worker], { timers: time.timers });
    const held = worker.core.getTask(taskId).events.length;
    expect(held).toBeGreaterThan(maxAuditEntries);
    origin.core.requestAudit(taskId);
    await drain([origin, worker], { timers: time.timers });
    const report = origin.core.audit(taskId);
    // The worker's view holds the task's events, not the audit's request: all but the newest maxAuditEntries left out.
    expect(report.gaps.map((gap) => (gap.kind === "omitted" ? [gap.kind, gap.side, gap.count] : [gap.kind, gap.side]))).toEqual([
      ["omitted", "worker", held - maxAuditEntries],
    ]);
    expect(report.timeline.filter((line) => line.heldBy.includes("worker"))).toHaveLength(maxAuditEntries);
  });
});
