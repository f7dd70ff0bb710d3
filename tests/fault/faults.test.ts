/**
 * Fault tests: TaskCores against the REAL relay (its CLI) through the fault proxy.
 *
 * Every test ends with a drain (faults off) and checks what docs/architecture.md promises: nothing
 * lost, nothing inserted twice, retries byte-identical, the frontier below every pending delivery.
 * Request deadlines are short (`REQUEST_TIMEOUT_MS`) so timeouts are quick; capacity cooldowns are
 * skipped with jump timers except where the cooldown itself is under test. The last block (a full
 * local store) is a local fault, driven on the fake relay.
 */
import { encodedEnvelope } from "../../src/protocol/wire.ts";
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createConfiguredTaskCore } from "../../src/core/configured.ts";
import { createTaskCore, coreInternals } from "../../src/core/task-core.ts";
import { createVirtualTimers } from "../../testkit/virtual-timers.ts";
import {
  capacityCooldownMs,
  leaseRenewMarginMs,
  maxResponseBodyBytes,
  orphanProbeIntervalMs,
  minTaskTimeoutMs,
} from "../../src/protocol/limits.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import type { FaultProxy, ProxyRequest } from "../../testkit/fault-proxy.ts";
import { failure, settlesWithin, withUnhandledRejections } from "../../testkit/async.ts";
import { drain, relayBacklog, tryDrain } from "../../testkit/drain.ts";
import { introduce } from "../../testkit/introduce.ts";
import { createJumpTimers, type JumpTimers } from "../../testkit/jump-timers.ts";
import type { ObservedParty } from "../../testkit/observed-party.ts";
import { expectAllPresentedOnce, expectFrontierBelowPending, expectOneTerminalWinner, faultRig, faultSetup } from "../helpers/fault-kit.ts";
import { createFakeRelay } from "../helpers/fake-relay.ts";
import { requestEnvelopes } from "../../src/protocol/wire.ts";
import { createMemoryHost } from "../../testkit/memory-host.ts";
import { startRelayProcess } from "../../testkit/relay-process.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(30_000);

const REQUEST_TIMEOUT_MS = 500;

const fx = useRelayFixture({ proxy: false });

const rig = () => faultRig(fx, REQUEST_TIMEOUT_MS);

// -- request filters ------------------------------------------------------------------------------

type Body = {
  envelope?: { envelopeId?: string; target?: TaskEndpoint; payload?: { kind?: string; taskId?: string } };
  envelopeId?: string;
  envelopeIds?: string[];
  endpoint?: TaskEndpoint;
};

const body = (request: ProxyRequest): Body => (request.body ?? {}) as Body;
const isAssignment = (request: ProxyRequest) => body(request).envelope?.payload?.kind === "assignment";
const sendsOf = (proxy: FaultProxy, envelopeId: string) =>
  proxy.requests().filter((request) => request.operation === "send" && body(request).envelope?.envelopeId === envelopeId);
const acksOf = (proxy: FaultProxy, envelopeId: string) =>
  proxy
    .requests()
    .filter(
      (request) =>
        request.operation === "acknowledge" &&
        (body(request).envelopeId === envelopeId || (body(request).envelopeIds ?? []).includes(envelopeId)),
    );
const fromEndpoint = (endpoint: TaskEndpoint) => (request: ProxyRequest) => body(request).endpoint?.id === endpoint.id;
const toEndpoint = (endpoint: TaskEndpoint) => (request: ProxyRequest) => body(request).envelope?.target?.id === endpoint.id;

function repliesTo(party: ObservedParty, operation: string) {
  return party.replies.filter((entry) => entry.operation === operation);
}

/** Envelope ids the relay delivered to this party (every receive reply that reached it). */
function deliveredIds(party: ObservedParty): string[] {
  return repliesTo(party, "receive").flatMap((entry) => {
    const deliveries = (entry.reply?.value as { deliveries?: { envelope: { envelopeId: string } }[] } | undefined)?.deliveries ?? [];
    return deliveries.map((delivery) => delivery.envelope.envelopeId);
  });
}

async function finish(r: { origin: ObservedParty; worker: ObservedParty; timers: JumpTimers; proxy?: FaultProxy }): Promise<void> {
  r.proxy?.clear();
  await drain([r.origin, r.worker], { timers: r.timers });
  expectAllPresentedOnce(r.origin, r.worker);
  for (const side of [r.origin, r.worker]) {
    expectFrontierBelowPending(coreInternals(side.core).store);
    expectOneTerminalWinner(coreInternals(side.core).store);
    expect(coreInternals(side.core).store.pendingOutboxCount()).toBe(0);
    expect(coreInternals(side.core).store.pendingDeliveryCount()).toBe(0);
    expect(await relayBacklog(side.core)).toBe(0);
  }
}

// -------------------------------------------------------------------------------------------------

describe("lost replies", () => {
  test("lost send reply: createTask fails retryable with details.taskId; the pass resends the identical envelope; the relay dedupes; one task at the worker", async () => {
    const r = await rig();
    r.proxy.push({ operation: "send", kind: "drop-reply", when: isAssignment });
    const error = await failure(r.origin.core.createTask({ to: r.worker.core.endpoint()!, task: "survive a lost reply" }));
    expect(error.retryable).toBe(true);
    expect(["RELAY_UNAVAILABLE", "RELAY_TIMEOUT"]).toContain(error.code);
    const taskId = error.details.taskId as string;
    const envelopeId = error.details.envelopeId as string;
    expect(typeof taskId).toBe("string");
    // Uncertain, not refused: the task exists and its envelope waits for a retry.
    expect(r.origin.core.getTask(taskId).status).toBe("active");
    expect(coreInternals(r.origin.core).store.getOutbox(envelopeId)?.state).toBe("pending");

    const report = await r.origin.core.refresh();
    expect(report.retried).toBe(1);
    const entry = coreInternals(r.origin.core).store.getOutbox(envelopeId)!;
    expect(entry.state).toBe("accepted");
    expect(entry.acceptance?.duplicate).toBe(true);
    const sends = sendsOf(r.proxy, envelopeId);
    expect(sends.length).toBe(2);
    expect(JSON.stringify(body(sends[1]!).envelope)).toBe(JSON.stringify(body(sends[0]!).envelope));
    const acceptance = repliesTo(r.origin, "send").find(
      (entry) => (entry.request as Body).envelope?.envelopeId === envelopeId && entry.reply !== undefined,
    );
    expect((acceptance?.reply?.value as { duplicate?: boolean }).duplicate).toBe(true);

    await finish(r);
    expect(r.worker.host.inserted.filter((item) => item.taskId === taskId && item.event.type === "task.created").length).toBe(1);
    expect(r.worker.core.listTasks().filter((task) => task.taskId === taskId).length).toBe(1);
    expect(deliveredIds(r.worker).filter((id) => id === envelopeId).length).toBe(1);
  });

  test("lost reply of the ACK that carries its receipt (ack-carry-v1): the receipt is re-sent byte-identical, the ACK repeated and answered duplicate; nothing is presented twice, the mailbox ends empty", async () => {
    const r = await rig();
    const created = await r.origin.core.createTask({ to: r.worker.core.endpoint()!, task: "ack me once" });
    const carrying = (request: ProxyRequest) => (body(request).envelopeIds ?? []).includes(created.envelopeId);
    r.proxy.push({ operation: "acknowledge", kind: "drop-reply", when: carrying });
    const first = await r.worker.core.refresh();
    expect(first.presented).toBe(1);
    expect(first.failures.get("ack")?.code).toBeDefined();
    expect(first.failures.get("ack")!.retryable).toBe(true);
    // The relay already removed it, but locally the delivery (and its receipt) is still owed.
    expect(coreInternals(r.worker.core).store.getDelivery(created.envelopeId)).toBeDefined();
    expectFrontierBelowPending(coreInternals(r.worker.core).store);
    const receiptId = requestEnvelopes(acksOf(r.proxy, created.envelopeId)[0]!.body)[0]!.envelopeId as string;

    await finish(r);
    expect(coreInternals(r.worker.core).store.getDelivery(created.envelopeId)).toBeUndefined();
    const receiptTexts = r.proxy
      .requests()
      .flatMap((request) => requestEnvelopes(request.body).filter((envelope) => envelope.envelopeId === receiptId))
      .map((envelope) => JSON.stringify(envelope));
    expect(receiptTexts.length).toBeGreaterThanOrEqual(2);
    expect(new Set(receiptTexts).size).toBe(1);
    // The repeated ACK (alone now: its receipt went on its own) is answered duplicate.
    const repaired = repliesTo(r.worker, "acknowledge").filter(
      (entry) => entry.reply !== undefined && (entry.request as Body).envelopeId === created.envelopeId,
    );
    expect(repaired.map((entry) => (entry.reply!.value as { duplicate: boolean }).duplicate)).toEqual([true]);
    expect(r.worker.host.inserted.filter((item) => item.taskId === created.taskId).length).toBe(1);
    expect(r.worker.host.wakes.flat().filter((item) => item.taskId === created.taskId).length).toBe(1);
  });
});

describe("capacity", () => {
  test("429 bursts on send, receive and acknowledge: no relay loss, nothing lost or presented twice, everything delivered once the burst ends", async () => {
    const r = await rig();
    const to = r.worker.core.endpoint()!;
    const BURST = 4;
    /** Runs passes (jumping over cooldowns) until the burst is spent. */
    async function through(burst: { remaining(): number }, parties: readonly ObservedParty[]): Promise<void> {
      for (let round = 0; round < 10 && burst.remaining() > 0; round += 1) {
        for (const party of parties) await party.core.refresh();
        r.timers.jump(capacityCooldownMs);
      }
      expect(burst.remaining()).toBe(0);
    }

    // 1. Sends: the assignments are refused, deferred behind each other, then retried.
    const sends = r.proxy.push({ operation: "send", kind: "status-429", times: BURST, when: fromEndpoint(r.origin.core.endpoint()!) });
    const taskIds: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const outcome = await r.origin.core.createTask({ to, task: `burst ${index}` }).then(
        (created) => created.taskId,
        (error) => error,
      );
      if (typeof outcome === "string") taskIds.push(outcome);
      else {
        // A refused or deferred send is retryable and names the task that exists anyway.
        expect(["RELAY_CAPACITY", "TASK_DELIVERY_DEFERRED"]).toContain(outcome.code);
        expect(outcome.retryable).toBe(true);
        taskIds.push(outcome.details.taskId);
      }
    }
    await through(sends, [r.origin]);
    // 2. Receives of the worker.
    const receives = r.proxy.push({ operation: "receive", kind: "status-429", times: BURST, when: fromEndpoint(to) });
    await through(receives, [r.worker]);
    // 3. ACKs of the worker: presented items stay owed, then are ACKed once.
    const acks = r.proxy.push({ operation: "acknowledge", kind: "status-429", times: BURST, when: fromEndpoint(to) });
    await through(acks, [r.worker, r.origin]);
    await drain([r.origin, r.worker], { timers: r.timers });
    expect(
      r.worker.core
        .listTasks()
        .map((task) => task.taskId)
        .sort(),
    ).toEqual([...taskIds].sort());

    // 4. A mixed burst while the worker finishes and the origin acknowledges.
    const mixed = r.proxy.push({ operation: ["send", "receive", "acknowledge"], kind: "status-429", times: 3 * BURST });
    for (const taskId of taskIds) {
      await r.worker.core.done({ taskId, status: "completed", summary: `done ${taskId}` }).catch((error) => {
        expect(error.retryable).toBe(true);
      });
    }
    await through(mixed, [r.origin, r.worker]);
    await drain([r.origin, r.worker], { timers: r.timers });
    for (const taskId of taskIds) {
      expect(r.origin.core.getTask(taskId).status).toBe("completed");
      expect(r.worker.core.getTask(taskId).status).toBe("completed");
    }
    expect(coreInternals(r.origin.core).session.status()).toBe("ready");
    expect(coreInternals(r.worker.core).session.status()).toBe("ready");
    await finish(r);
    expect(r.origin.host.inserted.filter((item) => item.event.type === "task.completed").length).toBe(taskIds.length);
  });

  test("capacity with retryAfterMs longer than capacityCooldownMs: the envelope is not re-sent before retryAfterMs, then delivered", async () => {
    // Real time on purpose: the cooldown itself is under test.
    const r = await rig();
    const retryAfterMs = capacityCooldownMs + 500;
    r.proxy.push({ operation: "send", kind: "capacity", retryAfterMs, when: isAssignment });
    const error = await failure(r.origin.core.createTask({ to: r.worker.core.endpoint()!, task: "wait your turn" }));
    expect(error.code).toBe("RELAY_CAPACITY");
    expect(error.retryable).toBe(true);
    expect(error.details.retryAfterMs).toBe(retryAfterMs);
    const envelopeId = error.details.envelopeId as string;
    let passes = 0;
    const started = Date.now();
    // Passes until it is delivered (a budget for a loaded machine past the cooldown, not a bound).
    while (coreInternals(r.origin.core).store.getOutbox(envelopeId)?.state !== "accepted" && Date.now() - started < retryAfterMs + 20_000) {
      await r.origin.core.refresh();
      passes += 1;
      await Bun.sleep(250);
    }
    const sends = sendsOf(r.proxy, envelopeId);
    expect(sends.length).toBe(2);
    // Not before the relay's hint (a lower bound: the wait honoured, which load cannot break).
    expect(sends[1]!.receivedAt - sends[0]!.receivedAt).toBeGreaterThanOrEqual(retryAfterMs);
    // Passes kept running during the cooldown without re-sending it (two sends in all).
    expect(passes).toBeGreaterThanOrEqual(2);
    expect(JSON.stringify(body(sends[1]!).envelope)).toBe(JSON.stringify(body(sends[0]!).envelope));
    await finish(r);
  });
});

describe("relay loss", () => {
  test("relay restart mid-task: both configured cores fail RELAY_RESET once, keep their tasks, find each other again; the task completes, nothing lost or shown twice", async () => {
    const first = await startRelayProcess();
    fx.defer(() => first.stop());
    const hosts = { origin: createMemoryHost(), worker: createMemoryHost() };
    const recovered: { origin: number; worker: number } = { origin: 0, worker: 0 };
    const timers = createJumpTimers();
    const make = (side: "origin" | "worker") =>
      createConfiguredTaskCore({
        // Direct, not through the proxy: while the relay is down the connection is refused.
        url: first.url,
        callerSession: `restart-${side}-${crypto.randomUUID().slice(0, 8)}`,
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        host: hosts[side],
        timers,
        onRecovered: () => {
          recovered[side] += 1;
        },
      });
    const origin = make("origin");
    const worker = make("worker");
    fx.defer(() => Promise.allSettled([origin.close(), worker.close()]));
    const before = { origin: await origin.run((core) => core.connect()), worker: await worker.run((core) => core.connect()) };
    await introduce(origin.current(), worker.current());
    const created = await origin.run((core) => core.createTask({ to: before.worker, task: "survives the relay" }));
    await worker.refresh();
    await origin.refresh();
    expect(hosts.worker.inserted.map((item) => item.taskId)).toEqual([created.taskId]);

    await first.stop();
    // While the relay is down: a transient failure, never a recovery.
    const down = await origin.refresh();
    expect(down.failures.get("intake")?.code).toBe("RELAY_UNAVAILABLE");
    expect(origin.recovering()).toBe(false);
    // The worker finishes while the relay is down: its result waits in its outbox.
    expect(
      (await failure(worker.run((core) => core.done({ taskId: created.taskId, status: "completed", summary: "done during the outage" }))))
        .code,
    ).toBe("RELAY_UNAVAILABLE");

    const second = await startRelayProcess({ port: first.port });
    fx.defer(() => second.stop());
    const originError = await failure(settlesWithin(origin.refresh(), "origin refresh"));
    const workerError = await failure(settlesWithin(worker.refresh(), "worker refresh"));
    expect(originError.code).toBe("RELAY_RESET");
    expect(workerError.code).toBe("RELAY_RESET");
    await settlesWithin(Promise.all([origin.settled(), worker.settled()]), "recovery");
    expect(recovered).toEqual({ origin: 1, worker: 1 });
    const after = { origin: origin.current().endpoint()!, worker: worker.current().endpoint()! };
    expect(after.origin.id).not.toBe(before.origin.id);
    expect(after.worker.id).not.toBe(before.worker.id);
    // Nothing was failed or forgotten: the task waits for its peer.
    expect(origin.current().getTask(created.taskId)).toMatchObject({ status: "active", attention: "indeterminate" });
    // The worker's result is an intent the origin has not seen yet.
    expect(worker.current().hasPendingWork()).toBe(true);

    // Passes find the peers by name; the result crosses the new relay once.
    const parties = [
      { core: () => origin.current(), refresh: () => origin.refresh() },
      { core: () => worker.current(), refresh: () => worker.refresh() },
    ];
    expect(await tryDrain(parties, { timers, cooldownMs: orphanProbeIntervalMs })).toBeDefined();
    expect(recovered).toEqual({ origin: 1, worker: 1 });
    expect(origin.current().getTask(created.taskId)).toMatchObject({ status: "completed", outcome: "succeeded", target: after.worker });
    const results = hosts.origin.wakes.flat().filter((item) => item.taskId === created.taskId && item.event.type === "task.completed");
    expect(results).toHaveLength(1);
    for (const host of Object.values(hosts)) {
      const ids = host.insertedIds();
      expect(new Set(ids).size).toBe(ids.length);
    }
  });
});

describe("isolation of one undeliverable envelope", () => {
  test("an envelope held by capacity never blocks mail to other targets, receive, timeouts or lease renewal", async () => {
    const { proxy, timers, clock, party } = faultSetup(fx, REQUEST_TIMEOUT_MS);
    // A lease whose renewal falls due RENEW_DUE_MS after each connect (renewal starts when less
    // than requestTimeoutMs + leaseRenewMarginMs remains).
    const RENEW_DUE_MS = 300;
    const a = await party({ leaseMs: REQUEST_TIMEOUT_MS + leaseRenewMarginMs + RENEW_DUE_MS });
    const b = await party();
    const c = await party();
    const toB = await a.core.createTask({ to: b.core.endpoint()!, task: "work for b" });
    const toC = await a.core.createTask({ to: c.core.endpoint()!, task: "work for c" });
    const timed = await a.core.createTask({ to: b.core.endpoint()!, task: "will time out", timeoutMs: minTaskTimeoutMs });
    await drain([a, b, c], { timers });

    // From now on every send to C is refused for capacity.
    proxy.push({ operation: "send", kind: "capacity", times: Number.POSITIVE_INFINITY, when: toEndpoint(c.core.endpoint()!) });
    const stuck = await failure(a.core.message({ taskId: toC.taskId, type: "information", message: "held first" }));
    expect(stuck.code).toBe("RELAY_CAPACITY");
    expect(stuck.retryable).toBe(true);
    const stuckId = stuck.details.envelopeId as string;
    const younger = await failure(a.core.message({ taskId: toC.taskId, type: "information", message: "held second" }));
    expect(younger.code).toBe("TASK_DELIVERY_DEFERRED");
    expect(younger.details.blockedBy).toBe(stuckId);

    // Mail to B leaves at once and reports only its own outcome.
    const question = await a.core.message({ taskId: toB.taskId, type: "question", message: "which file?" });
    await b.core.refresh();
    expect(b.host.insertedIds()).toContain(question.eventId!);
    await b.core.message({ taskId: toB.taskId, type: "answer", message: "src/x.ts", inReplyTo: question.eventId! });
    await b.core.done({ taskId: toB.taskId, status: "completed", summary: "done" });

    // One pass of A: receive, timeout canonicalization and lease renewal all happen while C's
    // envelope is still refused (its cooldown is over, so the pass tries it again).
    clock.jump(minTaskTimeoutMs);
    timers.jump(capacityCooldownMs);
    await Bun.sleep(RENEW_DUE_MS);
    const endpointBefore = a.core.endpoint();
    const connectsOfA = () =>
      proxy
        .requests()
        .filter((request) => request.operation === "connect" && (request.body as { callerSession?: string }).callerSession === a.name)
        .length;
    const connectsBefore = connectsOfA();
    const report = await a.core.refresh();
    // The lease was renewed in this pass, keeping the endpoint id.
    expect(connectsOfA()).toBe(connectsBefore + 1);
    expect(a.core.endpoint()).toEqual(endpointBefore);
    expect(report.intake.fetched).toBeGreaterThanOrEqual(2);
    expect(report.intake.timedOut).toBe(1);
    expect(a.core.getTask(toB.taskId).status).toBe("completed");
    expect(a.core.getTask(timed.taskId).status).toBe("timed_out");
    expect(report.failures.get("retry")?.code).toBe("RELAY_CAPACITY");
    expect(coreInternals(a.core).store.getOutbox(stuckId)?.state).toBe("pending");
    expect(sendsOf(proxy, stuckId).length).toBe(2);
    const presentedAtA = a.host.inserted.map((item) => item.event.type);
    expect(presentedAtA).toEqual(expect.arrayContaining(["task.answer", "task.completed", "task.timed_out"]));

    // Once C takes mail again, its two messages arrive in creation order.
    proxy.clear();
    await drain([a, b, c], { timers });
    const atC = c.host.inserted
      .filter((item) => item.event.type === "task.information")
      .map((item) => (item.event.payload as { message: string }).message);
    expect(atC).toEqual(["held first", "held second"]);
    expectAllPresentedOnce(a, b);
    expectAllPresentedOnce(a, c);
    expect(b.core.getTask(timed.taskId).status).toBe("timed_out");
  });
});

describe("slow and broken replies", () => {
  test("slow relay past the deadline: RELAY_TIMEOUT, later delivered, no duplicates", async () => {
    const r = await rig();
    const slowMs = REQUEST_TIMEOUT_MS + 200;
    r.proxy.push({ operation: "send", kind: "delay", ms: slowMs, when: isAssignment });
    const error = await failure(r.origin.core.createTask({ to: r.worker.core.endpoint()!, task: "slowly" }));
    expect(error.code).toBe("RELAY_TIMEOUT");
    expect(error.retryable).toBe(true);
    expect(error.details.mayHaveBeenDelivered).toBe(true);
    const { taskId, envelopeId } = error.details as { taskId: string; envelopeId: string };
    // A slow receive at the worker times out too, and records nothing.
    r.proxy.push({ operation: "receive", kind: "delay", ms: slowMs, when: fromEndpoint(r.worker.core.endpoint()!) });
    const slow = await r.worker.core.refresh();
    expect(slow.failures.get("intake")?.code).toBe("RELAY_TIMEOUT");
    expect(r.worker.core.listTasks()).toEqual([]);
    // The slow send has reached the relay by now (it was forwarded after slowMs).
    await r.proxy.waitFor((stats) => (stats.operations.send?.forwarded ?? 0) >= 1);
    await Bun.sleep(50);

    await r.origin.core.refresh();
    expect(coreInternals(r.origin.core).store.getOutbox(envelopeId)?.acceptance?.duplicate).toBe(true);
    await finish(r);
    expect(r.worker.host.inserted.filter((item) => item.taskId === taskId).length).toBe(1);
    expect(sendsOf(r.proxy, envelopeId).length).toBe(2);
  });

  test("malformed page / oversized reply on receive: INVALID_RESPONSE or INVALID_INBOX, checkpoint not moved, delivered once the fault clears", async () => {
    const r = await rig();
    const to = r.worker.core.endpoint()!;
    await r.origin.core.createTask({ to, task: "one" });
    await r.origin.core.createTask({ to, task: "two" });
    type Reply = { value: { deliveries: unknown[]; nextCursor: string } };
    const cases: { name: string; rule: Parameters<FaultProxy["push"]>[0]; code: string }[] = [
      { name: "not JSON", rule: { operation: "receive", kind: "malformed-json" }, code: "INVALID_RESPONSE" },
      { name: "oversized with Content-Length", rule: { operation: "receive", kind: "oversized" }, code: "INVALID_RESPONSE" },
      { name: "oversized chunked", rule: { operation: "receive", kind: "oversized", chunked: true }, code: "INVALID_RESPONSE" },
      {
        name: "just over the cap",
        rule: { operation: "receive", kind: "oversized", bytes: maxResponseBodyBytes + 1 },
        code: "INVALID_RESPONSE",
      },
      {
        name: "an item repeated in one page",
        rule: {
          operation: "receive",
          kind: "rewrite",
          rewrite: (reply: Reply) => (reply.value.deliveries.push(reply.value.deliveries[0]), reply),
        },
        code: "INVALID_INBOX",
      },
      {
        name: "descending cursors",
        rule: { operation: "receive", kind: "rewrite", rewrite: (reply: Reply) => (reply.value.deliveries.reverse(), reply) },
        code: "INVALID_INBOX",
      },
      {
        name: "a wrong nextCursor",
        rule: { operation: "receive", kind: "rewrite", rewrite: (reply: Reply) => ((reply.value.nextCursor = "999"), reply) },
        code: "INVALID_INBOX",
      },
    ];
    const before = coreInternals(r.worker.core).store.checkpoint();
    for (const { name, rule, code } of cases) {
      r.proxy.push({ ...rule, when: fromEndpoint(to) } as Parameters<FaultProxy["push"]>[0]);
      const report = await r.worker.core.refresh();
      expect({ name, code: report.failures.get("intake")?.code }).toEqual({ name, code });
      expect(coreInternals(r.worker.core).store.checkpoint()).toEqual(before);
      expect(coreInternals(r.worker.core).store.pendingDeliveryCount()).toBe(0);
      expect(r.worker.host.inserted.length).toBe(0);
      expect(coreInternals(r.worker.core).session.status()).toBe("ready");
    }
    await finish(r);
    expect(r.worker.host.inserted.map((item) => (item.event.payload as { task: string }).task)).toEqual(["one", "two"]);
  });

  test("duplicate delivery: an item repeated under a higher cursor, or an acknowledged envelope re-served, is presented at most once", async () => {
    const r = await rig();
    const worker = r.worker.core.endpoint()!;
    const first = await r.origin.core.createTask({ to: worker, task: "first" });
    await r.worker.core.refresh();
    expect(r.worker.host.insertedIds().length).toBe(1);
    // The first task ends before its assignment is re-served.
    await r.origin.core.cancel({ taskId: first.taskId });
    await r.worker.core.refresh();
    expect(r.worker.core.getTask(first.taskId).status).toBe("cancelled");
    const firstEnvelope = repliesTo(r.worker, "receive")
      .flatMap((entry) => (entry.reply?.value as { deliveries: { envelope: { envelopeId: string } }[] }).deliveries)
      .find((delivery) => delivery.envelope.envelopeId === first.envelopeId)!.envelope;

    /** A cursor the relay assigned but the worker's core never fetched: a gap to re-serve into. */
    async function gapCursor(): Promise<string> {
      const self = r.origin.core.endpoint()!;
      const envelope = {
        envelopeId: crypto.randomUUID(),
        protocolVersion: 2,
        source: self,
        target: worker,
        payload: { taskId: first.taskId, kind: "canonical_event", payload: {} },
        createdAt: new Date().toISOString(),
      };
      await coreInternals(r.origin.core).session.send(encodedEnvelope(envelope));
      const page = await coreInternals(r.worker.core).session.receive(coreInternals(r.worker.core).store.checkpoint().highWater);
      const cursor = page.deliveries.find((delivery) => delivery.envelopeId === envelope.envelopeId)!.cursor;
      await coreInternals(r.worker.core).session.acknowledge(envelope.envelopeId);
      return cursor;
    }
    const reserve = (envelope: unknown, cursor: string) => (reply: { value: { deliveries: unknown[] } }) => {
      reply.value.deliveries.unshift({ cursor, envelope });
      return reply;
    };

    // 1. The acknowledged assignment of the (now cancelled) first task is re-served.
    const gap = await gapCursor();
    const second = await r.origin.core.createTask({ to: worker, task: "second" });
    r.proxy.push({ operation: "receive", kind: "rewrite", when: fromEndpoint(worker), rewrite: reserve(firstEnvelope, gap) });
    await r.worker.core.refresh();
    expect(r.worker.host.inserted.filter((item) => item.taskId === first.taskId && item.event.type === "task.created").length).toBe(1);
    expect(r.worker.host.inserted.filter((item) => item.taskId === second.taskId).length).toBe(1);
    // A re-served assignment is no news: the cancelled task stays cancelled.
    expect(r.worker.core.getTask(first.taskId).status).toBe("cancelled");

    // 2. A delivery still pending (held by a busy host) is repeated under a higher cursor.
    r.worker.host.busy = true;
    const third = await r.origin.core.createTask({ to: worker, task: "third" });
    await r.worker.core.refresh();
    const held = coreInternals(r.worker.core).store.getDelivery(third.envelopeId)!;
    expect(held).toBeDefined();
    const gap2 = await gapCursor();
    const fourth = await r.origin.core.createTask({ to: worker, task: "fourth" });
    r.proxy.push({
      operation: "receive",
      kind: "rewrite",
      when: fromEndpoint(worker),
      rewrite: reserve(coreInternals(r.worker.core).store.deliveryEnvelope(third.envelopeId), gap2),
    });
    await r.worker.core.refresh();
    expect(coreInternals(r.worker.core).store.getDelivery(third.envelopeId)?.cursor).toBe(held.cursor);
    expectFrontierBelowPending(coreInternals(r.worker.core).store);
    r.worker.host.busy = false;
    await finish(r);
    for (const task of [first, second, third, fourth]) {
      expect(r.worker.host.inserted.filter((item) => item.taskId === task.taskId && item.event.type === "task.created").length).toBe(1);
    }
  });
});

describe("shutdown", () => {
  test("shutdown mid-pass: close() while a receive or a send is held resolves; late replies change nothing; no unhandled rejection", async () => {
    const unhandled = await withUnhandledRejections(async () => {
      const r = await rig();
      const worker = r.worker.core.endpoint()!;
      await r.origin.core.createTask({ to: worker, task: "never seen" });

      // A receive held at the proxy while the worker closes.
      r.proxy.push({ operation: "receive", kind: "hold", when: fromEndpoint(worker) });
      const pass = r.worker.core.refresh().then(
        () => "resolved",
        (error) => error.code,
      );
      await r.proxy.waitFor((stats) => stats.held === 1);
      await settlesWithin(r.worker.core.close(), "close with a held receive");
      expect(["resolved", "RELAY_CLOSED", "ABORTED"]).toContain(await settlesWithin(pass, "the closed pass"));
      r.proxy.release();
      expect(coreInternals(r.worker.core).store.stats().records).toBe(0);

      // A send delayed at the proxy: it reaches the relay after the origin closed.
      const origin = r.origin.core.endpoint()!;
      r.proxy.push({ operation: "send", kind: "delay", ms: REQUEST_TIMEOUT_MS / 2, when: fromEndpoint(origin) });
      const sending = failure(r.origin.core.createTask({ to: worker, task: "late" }));
      await r.proxy.waitFor((stats) => (stats.operations.send?.faulted ?? 0) >= 1);
      await settlesWithin(r.origin.core.close(), "close with a delayed send");
      const late = await sending;
      expect(late.retryable || late.code === "RELAY_CLOSED").toBe(true);
      await r.proxy.waitFor((stats) => (stats.operations.send?.forwarded ?? 0) >= 2);
      await Bun.sleep(50);
      expect(coreInternals(r.origin.core).store.stats().records).toBe(0);
      expect(coreInternals(r.worker.core).store.stats().records).toBe(0);
      // New work is fenced.
      expect(() => r.origin.core.refresh()).toThrow();
      expect((await failure(Promise.resolve().then(() => r.origin.core.createTask({ to: worker, task: "x" })))).code).toBe("RELAY_CLOSED");
    }, 100);
    expect(unhandled).toEqual([]);
  });
});

describe("local store capacity", () => {
  // A full store is a local fault, not a relay one: these run on the fake relay, which lets every
  // record bound in a window be hit exactly (at intake, at receipts, at presentation evidence).
  const BOUNDS = Array.from({ length: 24 }, (_, index) => 16 + index);

  async function fillUp(maxRecords: number) {
    const timers = createVirtualTimers(0);
    const fake = createFakeRelay(timers);
    const origin = createTaskCore({ store: createTaskStore(), session: fake.session("origin"), timers, host: createMemoryHost() });
    const host = createMemoryHost();
    const worker = createTaskCore({ store: createTaskStore({ maxRecords }), session: fake.session("worker"), timers, host });
    await origin.connect();
    await worker.connect();
    await introduce(origin, worker);
    const taskIds: string[] = [];
    const thrown: string[] = [];
    let reported = 0;
    for (let index = 0; index < 8; index += 1) {
      taskIds.push((await origin.createTask({ to: worker.endpoint()!, task: `fill ${index}` })).taskId);
      const report = await worker.refresh().catch((error) => {
        thrown.push(error.code);
        return undefined;
      });
      for (const failure of report?.failures.values() ?? []) if (failure.code === "TASK_CAPACITY") reported += 1;
    }
    const atRelay = new Set(fake.mailbox(worker.endpoint()!.id).map((item) => (item.envelope.payload as { taskId: string }).taskId));
    const lost = taskIds.filter((taskId) => worker.findTask(taskId) === undefined && !atRelay.has(taskId));
    const ids = host.insertedIds();
    return { lost, thrown, insertedTwice: ids.length - new Set(ids).size, full: reported > 0 || thrown.includes("TASK_CAPACITY") };
  }

  test("a full store never drops valid mail: a delivery it cannot record stays unACKed at the relay", async () => {
    for (const maxRecords of BOUNDS) {
      const outcome = await fillUp(maxRecords);
      expect({ maxRecords, full: outcome.full, lost: outcome.lost }).toEqual({ maxRecords, full: true, lost: [] });
    }
  });

  // KNOWN BUG (open): when the store is full, recording an insertion's evidence (or a receipt)
  // throws TASK_CAPACITY out of the pass after Pi already got the event, so every later pass
  // inserts the same event again, and refresh() rejects instead of reporting the failure.
  // Flip to `test` once presentation records what it is about to do before doing it.
  test("a full store never inserts an event twice, and a pass reports TASK_CAPACITY instead of throwing", async () => {
    for (const maxRecords of BOUNDS) {
      const outcome = await fillUp(maxRecords);
      expect({ maxRecords, insertedTwice: outcome.insertedTwice, thrown: outcome.thrown }).toEqual({
        maxRecords,
        insertedTwice: 0,
        thrown: [],
      });
    }
  });
});
