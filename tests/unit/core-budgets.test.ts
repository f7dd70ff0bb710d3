/**
 * Virtual-time unit tests of the pass budgets, slices, deadline and cooldowns, each at its edge.
 * The relay here is an in-memory fake (unit tests only); fault tests use the real relay.
 */
import { coreInternals } from "../../src/core/task-core.ts";
import { describe, expect, test } from "bun:test";
import { createTaskCore, type TaskCore } from "../../src/core/task-core.ts";
import type { VirtualTimers } from "../../testkit/virtual-timers.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import {
  capacityCooldownMs,
  maxAckAttemptsPerPass,
  maxFetchedUnacknowledgedDeliveries,
  maxOldWorkSendsPerPass,
  maxScopedSendsPerPass,
  passDeadlineMs,
  passSliceMs,
} from "../../src/protocol/limits.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { createMemoryHost } from "../../testkit/memory-host.ts";
import { introduce } from "../../testkit/introduce.ts";
import { settleVirtually, type VirtualPair, virtualPair } from "../helpers/virtual-pair.ts";

type Pair = VirtualPair;
const pair = virtualPair;

/** Runs a pass while advancing virtual time in steps until it settles. */
function pass(core: TaskCore, timers: VirtualTimers, stepMs = 50, maxMs = 10_000) {
  return settleVirtually(timers, core.refresh(), stepMs, maxMs);
}

async function assignTasks(p: Pair, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const created = await p.origin.createTask({ to: p.worker.endpoint()!, task: `task ${index}` });
    ids.push(created.taskId);
  }
  return ids;
}

describe("pass budgets", () => {
  test(`at most ${maxScopedSendsPerPass} scoped + ${maxOldWorkSendsPerPass} old-work sends per pass`, async () => {
    const p = await pair();
    // 70 assignments held by a busy worker: 70 receiver_recorded receipts to one origin.
    const total = 70;
    await assignTasks(p, total);
    p.workerHost.busy = true;
    const sendsBefore = p.relay.count("send");
    const report = await pass(p.worker, p.timers);
    expect(report.intake.fetched).toBe(total);
    expect(report.counts.scopedSends).toBe(maxScopedSendsPerPass);
    expect(report.counts.oldWorkSends).toBe(maxOldWorkSendsPerPass);
    expect(p.relay.count("send") - sendsBefore).toBe(maxScopedSendsPerPass + maxOldWorkSendsPerPass);
    expect(report.failures.get("deferral")?.code).toBe("TASK_DELIVERY_DEFERRED");
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(total - maxScopedSendsPerPass - maxOldWorkSendsPerPass);
    // The rest leaves in creation order in the next pass.
    await pass(p.worker, p.timers);
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(0);
  });

  test(`at most ${maxOldWorkSendsPerPass} old-work sends per pass, drained in later passes`, async () => {
    const p = await pair();
    await assignTasks(p, 20);
    p.workerHost.busy = true;
    let refuse = true;
    p.relay.hook("send", () => {
      if (refuse) throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "send" } });
    });
    await pass(p.worker, p.timers);
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(20);
    refuse = false;
    const second = await pass(p.worker, p.timers);
    expect(second.counts.scopedSends).toBe(0);
    expect(second.counts.oldWorkSends).toBe(maxOldWorkSendsPerPass);
    expect(second.retried).toBe(maxOldWorkSendsPerPass);
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(20 - maxOldWorkSendsPerPass);
  });

  test(`at most ${maxAckAttemptsPerPass} ACK attempts per pass; exhaustion stops the pass before retry`, async () => {
    const p = await pair();
    const ids = await assignTasks(p, 60);
    // 60 assignments and 60 cancellations: 120 deliveries, each ACKed after its receipt ships.
    for (const taskId of ids) await p.origin.cancel({ taskId });
    p.workerHost.busy = false;
    const first = await pass(p.worker, p.timers);
    expect(first.counts.ackAttempts).toBeLessThanOrEqual(maxAckAttemptsPerPass);
    expect(first.presented).toBeLessThanOrEqual(maxAckAttemptsPerPass);
    // Drain and check that no pass ever exceeded the ACK budget.
    const acks: number[] = [first.counts.ackAttempts];
    // Each presented cancel also reports its outcome (one more intent each): allow passes for those.
    for (let round = 0; round < 20 && coreInternals(p.worker).store.pendingDeliveryCount() > 0; round += 1) {
      acks.push((await pass(p.worker, p.timers)).counts.ackAttempts);
    }
    expect(Math.max(...acks)).toBe(maxAckAttemptsPerPass);
    expect(coreInternals(p.worker).store.pendingDeliveryCount()).toBe(0);
  });

  test("a pass that exhausts the ACK budget does not retry old work", async () => {
    const p = await pair();
    const other = createTaskCore({
      store: createTaskStore(),
      session: p.relay.session("other"),
      timers: p.timers,
      clock: p.clock,
      host: createMemoryHost(),
    });
    await other.connect();
    await introduce(other, p.worker, (core) => pass(core, p.timers));
    // Old work: the worker's question to another origin is refused once and stays pending.
    const otherTask = await other.createTask({ to: p.worker.endpoint()!, task: "other" });
    await pass(p.worker, p.timers);
    expect(coreInternals(p.worker).store.pendingDeliveryCount()).toBe(0);
    let refuse = true;
    p.relay.hook("send", () => {
      if (refuse) throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "send" } });
    });
    await p.worker.message({ taskId: otherTask.taskId, type: "question", message: "?" }).catch(() => undefined);
    refuse = false;
    // 50 cancellations from the first origin: presented, receipted, then ACKed up to the budget.
    const ids = await assignTasks(p, 50);
    for (const taskId of ids) await p.origin.cancel({ taskId });
    p.workerHost.busy = false;
    const report = await pass(p.worker, p.timers);
    expect(report.counts.ackAttempts).toBe(maxAckAttemptsPerPass);
    expect(report.truncated).toBe(true);
    expect(report.counts.oldWorkSends).toBe(0);
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBeGreaterThan(0);
  });
});

describe("unreachable relay", () => {
  test("a pass that finds the relay unreachable does not retry old work (those requests could only fail)", async () => {
    const p = await pair();
    await assignTasks(p, 3);
    p.workerHost.busy = true;
    let down = true;
    p.relay.hook("send", () => {
      if (down) throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "send" } });
    });
    await pass(p.worker, p.timers);
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(3);
    p.relay.hook("receive", () => {
      if (down) throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "receive" } });
    });
    const sendsBefore = p.relay.count("send");
    const report = await pass(p.worker, p.timers);
    expect(report.failures.get("intake")?.code).toBe("RELAY_UNAVAILABLE");
    expect(report.counts.oldWorkSends).toBe(0);
    expect(p.relay.count("send")).toBe(sendsBefore);
    // A refusal that is not about reachability still lets old work run.
    down = false;
    const healthy = await pass(p.worker, p.timers);
    expect(healthy.retried).toBe(3);
  });
});

describe("intake bound", () => {
  test(`fetching pauses at ${maxFetchedUnacknowledgedDeliveries} fetched-unacknowledged deliveries and resumes as ACKs drain`, async () => {
    const p = await pair();
    const total = maxFetchedUnacknowledgedDeliveries + 10;
    await assignTasks(p, total);
    p.workerHost.busy = true;
    const first = await pass(p.worker, p.timers);
    expect(first.intake.fetched).toBe(maxFetchedUnacknowledgedDeliveries);
    expect(coreInternals(p.worker).store.pendingDeliveryCount()).toBe(maxFetchedUnacknowledgedDeliveries);
    const again = await pass(p.worker, p.timers);
    expect(again.intake.fetched).toBe(0);
    // Nothing was skipped: the relay still holds the rest.
    expect(p.relay.mailbox(p.worker.endpoint()!.id).length).toBe(total);
    p.workerHost.busy = false;
    let fetched = 0;
    for (let round = 0; round < 200 && p.relay.mailbox(p.worker.endpoint()!.id).length > 0; round += 1) {
      const report = await pass(p.worker, p.timers);
      fetched += report.intake.fetched;
      expect(coreInternals(p.worker).store.pendingDeliveryCount()).toBeLessThanOrEqual(maxFetchedUnacknowledgedDeliveries);
    }
    expect(fetched).toBe(total - maxFetchedUnacknowledgedDeliveries);
    expect(p.relay.mailbox(p.worker.endpoint()!.id).length).toBe(0);
    expect(p.workerHost.inserted.length).toBe(total);
    expect(new Set(p.workerHost.insertedIds()).size).toBe(total);
  });
});

describe("pass time", () => {
  test(`the ${passDeadlineMs} ms deadline stops admitting and aborts requests that outlive it`, async () => {
    const p = await pair();
    await assignTasks(p, 30);
    p.workerHost.busy = true;
    const delayMs = 300;
    let aborted = 0;
    p.relay.hook("send", async ({ signal }) => {
      try {
        await p.timers.timeout(delayMs, signal);
      } catch (error) {
        aborted += 1;
        throw error;
      }
    });
    const started = p.timers.now();
    const report = await pass(p.worker, p.timers, 10);
    const elapsed = p.timers.now() - started;
    // Sends to one target are sequential: ceil(2000 / 300) = 7 admitted, the 7th aborted at 2000 ms.
    expect(report.counts.scopedSends).toBe(Math.ceil(passDeadlineMs / delayMs));
    expect(aborted).toBe(1);
    expect(report.truncated).toBe(true);
    expect(elapsed).toBeLessThan(passDeadlineMs + 100);
  });

  test(`retry admission stops after a ${passSliceMs} ms slice (an admitted request still finishes)`, async () => {
    const p = await pair();
    await assignTasks(p, 20);
    p.workerHost.busy = true;
    let refuse = true;
    p.relay.hook("send", async ({ signal }) => {
      if (refuse) throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "send" } });
      await p.timers.timeout(100, signal);
    });
    await pass(p.worker, p.timers);
    refuse = false;
    const report = await pass(p.worker, p.timers, 10);
    // Admitted at 0, 100 and 200 ms; at 300 ms the slice (250 ms) is over.
    expect(report.counts.oldWorkSends).toBe(Math.ceil(passSliceMs / 100));
    expect(report.retried).toBe(Math.ceil(passSliceMs / 100));
  });
});

describe("capacity cooldown", () => {
  async function refusedOnce(retryAfterMs?: number) {
    const p = await pair();
    await assignTasks(p, 1);
    p.workerHost.busy = true;
    let refusedAt: number | undefined;
    p.relay.hook("send", () => {
      if (refusedAt === undefined) {
        refusedAt = p.timers.now();
        throw new TaskError("RELAY_CAPACITY", { details: { operation: "send", ...(retryAfterMs === undefined ? {} : { retryAfterMs }) } });
      }
    });
    await pass(p.worker, p.timers, 1);
    return { p, refusedAt: refusedAt! };
  }

  /** Moves to `at` (absolute virtual time), runs one pass there and counts its sends. */
  async function sendsAt(p: Pair, at: number): Promise<number> {
    await p.timers.advance(at - p.timers.now());
    const before = p.relay.count("send");
    const running = p.worker.refresh();
    await p.timers.advance(0);
    await running;
    return p.relay.count("send") - before;
  }

  test(`a capacity refusal defers the envelope ${capacityCooldownMs} ms, with no timer of its own`, async () => {
    const { p, refusedAt } = await refusedOnce();
    expect(p.timers.pending()).toBe(0);
    expect(await sendsAt(p, refusedAt + capacityCooldownMs - 1)).toBe(0);
    expect(await sendsAt(p, refusedAt + capacityCooldownMs)).toBe(1);
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(0);
  });

  test("a longer retryAfterMs wins; a shorter one does not shorten the cooldown", async () => {
    const longer = await refusedOnce(capacityCooldownMs * 2);
    expect(await sendsAt(longer.p, longer.refusedAt + capacityCooldownMs * 2 - 1)).toBe(0);
    expect(await sendsAt(longer.p, longer.refusedAt + capacityCooldownMs * 2)).toBe(1);
    const shorter = await refusedOnce(1);
    expect(await sendsAt(shorter.p, shorter.refusedAt + capacityCooldownMs - 1)).toBe(0);
    expect(await sendsAt(shorter.p, shorter.refusedAt + capacityCooldownMs)).toBe(1);
  });
});

describe("identity and failure reporting", () => {
  test("one identity is never attempted twice in a pass; the first failure of each kind is kept", async () => {
    const p = await pair();
    await assignTasks(p, 3);
    p.workerHost.busy = true;
    const attempts = new Map<string, number>();
    let calls = 0;
    p.relay.hook("send", ({ body }) => {
      const id = (body.envelope as { envelopeId: string }).envelopeId;
      attempts.set(id, (attempts.get(id) ?? 0) + 1);
      calls += 1;
      throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "send", call: calls } });
    });
    const report = await pass(p.worker, p.timers);
    expect(Math.max(...attempts.values())).toBe(1);
    expect(report.failures.get("receipt")?.details.call).toBe(1);
  });
});
