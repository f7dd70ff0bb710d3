/**
 * createConfiguredTaskCore against the real relay (started through its CLI): recovery after a real
 * relay restart (the tasks stay and find their peers again), and the failures that must never
 * trigger it.
 */
import { coreInternals } from "../../src/core/task-core.ts";
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { type ConfiguredTaskCore, createConfiguredTaskCore, type RecoveryInfo } from "../../src/core/configured.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import type { TaskTimers } from "../../src/core/timers.ts";
import { createVirtualTimers } from "../../testkit/virtual-timers.ts";
import { sameEndpoint } from "../../src/protocol/endpoint.ts";
import { errorSpec } from "../../src/protocol/errors.ts";
import { maxConfigHoldMs, orphanProbeIntervalMs, reconnectTimeoutMs, outageWaitMs } from "../../src/protocol/limits.ts";
import { RELAY_PROFILE } from "../../src/protocol/names.ts";
import { settle, tryDrain } from "../../testkit/drain.ts";
import { createJumpClock, createJumpTimers } from "../../testkit/jump-timers.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { introduce } from "../../testkit/introduce.ts";
import { isHello } from "../../testkit/sealed.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { eventually, failure, raised } from "../../testkit/async.ts";
import { expectCode, requestsOf } from "../helpers/core-kit.ts";
import { createFaultProxy } from "../../testkit/fault-proxy.ts";
import { createMemoryHost, type MemoryHost } from "../../testkit/memory-host.ts";
import { startRelayProcess } from "../../testkit/relay-process.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(10_000);

const fx = useRelayFixture({ proxy: true });

interface Configured {
  readonly configured: ConfiguredTaskCore;
  readonly host: MemoryHost;
  readonly name: string;
  readonly recovered: RecoveryInfo[];
  /** The current lifetime as a settle() party. */
  party(): Party;
}

async function configured(url = fx.proxy.url, timers?: TaskTimers, clock?: () => number): Promise<Configured> {
  const host = createMemoryHost();
  const recovered: RecoveryInfo[] = [];
  const name = `configured-${crypto.randomUUID()}`;
  const core = createConfiguredTaskCore({
    url,
    callerSession: name,
    host,
    env: {},
    requestTimeoutMs: 4_000,
    onRecovered: (info) => recovered.push(info),
    ...(timers === undefined ? {} : { timers }),
    ...(clock === undefined ? {} : { clock }),
  });
  fx.defer(() => core.close());
  await core.run((current) => current.connect());
  return { configured: core, host, name, recovered, party: () => ({ name, core: core.current(), host }) };
}

async function worker(url = fx.proxy.url): Promise<Party> {
  const created = await createParty({ url, requestTimeoutMs: 4_000 });
  fx.defer(() => closeParties([created]));
  return created;
}

// -------------------------------------------------------------------------------------------------

describe("relay-loss recovery", () => {
  test("a relay restart mid-task: RELAY_RESET, one recovery to a new endpoint, every task kept; both sides find each other again and the tasks complete", async () => {
    const timers = createJumpTimers();
    const origin = await configured(fx.proxy.url, timers);
    const peer = await configured(fx.proxy.url, timers);
    const parties = () => [origin.party(), peer.party()];
    const workerEndpoint = peer.configured.current().endpoint()!;
    const active = await origin.configured.run((core) => core.createTask({ to: workerEndpoint, task: "active when the relay dies" }));
    const finished = await origin.configured.run((core) => core.createTask({ to: workerEndpoint, task: "finished before" }));
    const incoming = await peer.configured.run((core) =>
      core.createTask({ to: origin.configured.current().endpoint()!, task: "assigned to the origin" }),
    );
    await settle(parties());
    await peer.configured.run((core) => core.done({ taskId: finished.taskId, status: "completed", summary: "ok" }));
    await settle(parties());
    const core = origin.configured.current();
    expect(core.getTask(finished.taskId).status).toBe("completed");
    expect(core.getTask(incoming.taskId).role).toBe("worker");
    const lostEndpoint = core.endpoint()!;
    const lostEpoch = origin.configured.session.binding()!.epoch;
    // An operation of the old lifetime is in flight (held at the proxy) when the relay dies.
    fx.proxy.push({ operation: "send", kind: "hold", when: (request) => (request.body as any).callerSession === origin.name });
    const inFlight = failure(
      origin.configured.run((current) =>
        current.message({ taskId: active.taskId, type: "information", message: "in flight at the restart" }),
      ),
    );
    await fx.proxy.waitFor((stats) => stats.held === 1);
    const wakesBefore = origin.host.wakes.length;

    await fx.relay.stop();
    fx.relay = await startRelayProcess({ port: fx.relay.port });
    expect(fx.relay.epoch).not.toBe(lostEpoch);

    // Two loss signals at once (a pass and a foreground call): one recovery.
    const [refreshError, messageError] = await Promise.all([
      failure(origin.configured.refresh()),
      failure(origin.configured.run((current) => current.message({ taskId: active.taskId, type: "information", message: "hello?" }))),
    ]);
    expectCode(refreshError, "RELAY_RESET");
    // A message queued while the session rebinds waits for the worker to be found again.
    expect(["RELAY_RESET", "RELAY_REBIND_REQUIRED", "TASK_DELIVERY_DEFERRED"]).toContain(messageError.code);
    expect(["RELAY_RESET", "RELAY_REBIND_REQUIRED"]).toContain((await inFlight).code);
    await origin.configured.settled();
    fx.proxy.release();

    // One recovery; the same lifetime, re-homed: nothing failed, nothing woke.
    expect(origin.recovered).toHaveLength(1);
    const info = origin.recovered[0]!;
    expect(info.cause.code).toBe("RELAY_RESET");
    expect(info.previousEndpoint).toEqual(lostEndpoint);
    expect(info.endpoint.id).not.toBe(lostEndpoint.id);
    // The active task and the incoming one look for their peer; the finished one has nothing left.
    expect(info.reconnecting).toBe(2);
    expect(origin.configured.session.binding()!.epoch).toBe(fx.relay.epoch);
    expect(origin.configured.current()).toBe(core);
    expect(core.closed()).toBe(false);
    expect(core.endpoint()).toEqual(info.endpoint);
    expect(core.getTask(active.taskId)).toMatchObject({
      status: "active",
      role: "origin",
      attention: "indeterminate",
      origin: info.endpoint,
    });
    expect(core.getTask(incoming.taskId)).toMatchObject({ status: "active", role: "worker", target: info.endpoint });
    expect(core.getTask(finished.taskId)).toMatchObject({ status: "completed", outcome: "succeeded" });
    expect(origin.host.wakes).toHaveLength(wakesBefore);

    // Both sides recover and find each other by session name; the messages sent into the dead
    // relay travel again, once.
    const rounds = await tryDrain(
      parties().map((party) => ({
        core: () => party.core,
        refresh: () => (party.name === origin.name ? origin.configured : peer.configured).refresh(),
      })),
      { timers, cooldownMs: orphanProbeIntervalMs },
    );
    expect(rounds).toBeDefined();
    expect(peer.recovered).toHaveLength(1);
    expect(origin.recovered).toHaveLength(1);
    const worker = peer.configured.current();
    expect(core.getTask(active.taskId).target).toEqual(worker.endpoint()!);
    expect(worker.getTask(active.taskId).origin).toEqual(core.endpoint()!);
    expect(core.getTask(active.taskId).attention).toBeUndefined();
    const heard = worker
      .getTask(active.taskId)
      .events.filter((event) => event.type === "task.information")
      .map((event) => event.payload.message);
    // The message that was on the wire when the relay died is delivered after all.
    expect(heard).toContain("in flight at the restart");
    if (messageError.code === "TASK_DELIVERY_DEFERRED") expect(heard).toContain("hello?");
    expect(new Set(heard).size).toBe(heard.length);

    // The tasks complete across the new relay, each presented once.
    await peer.configured.run((current) => current.done({ taskId: active.taskId, status: "completed", summary: "done after the restart" }));
    await origin.configured.run((current) => current.done({ taskId: incoming.taskId, status: "completed", summary: "also done" }));
    await settle(parties());
    expect(core.getTask(active.taskId)).toMatchObject({ status: "completed", outcome: "succeeded" });
    expect(worker.getTask(incoming.taskId)).toMatchObject({ status: "completed", outcome: "succeeded" });
    const ids = origin.host.insertedIds();
    expect(new Set(ids).size).toBe(ids.length);
    expect(origin.recovered).toHaveLength(1);
    // What was sent again (assignments included, their lineage re-addressed) was never refused.
    expect([...origin.host.rejections, ...peer.host.rejections]).toEqual([]);
  });

  test("a stranger that takes the worker's name after a restart gets no task content and does not lock the worker out: it binds under a derived name, the origin follows its hello", async () => {
    const timers = createJumpTimers();
    const origin = await configured(fx.proxy.url, timers);
    const peer = await configured(fx.proxy.url, timers);
    const parties = () => [origin.party(), peer.party()];
    const task = await origin.configured.run((core) =>
      core.createTask({ to: peer.configured.current().endpoint()!, task: "secret plans for the worker only" }),
    );
    await settle(parties());
    expect(peer.configured.current().getTask(task.taskId).status).toBe("active");

    await fx.relay.stop();
    fx.relay = await startRelayProcess({ port: fx.relay.port });
    // A stranger (a key nobody paired) registers the worker's name first, and holds it.
    const stranger = await createParty({
      url: fx.proxy.url,
      name: peer.name,
      timers,
      trust: { identity: generateIdentity().identity, peerName: () => undefined },
    });
    fx.defer(() => closeParties([stranger]));
    const strangerEndpoint = stranger.core.endpoint()!;

    expectCode(await failure(origin.configured.refresh()), "RELAY_RESET");
    expectCode(await failure(peer.configured.refresh()), "RELAY_RESET");
    await Promise.all([origin.configured.settled(), peer.configured.settled()]);
    // The worker was not locked out: it bound under a name derived from its own.
    const workerBinding = peer.configured.session.binding()!;
    expect(workerBinding.callerSession.startsWith(`${peer.name}~`)).toBe(true);
    expect(workerBinding.endpoint.id).not.toBe(strangerEndpoint.id);

    // Everyone runs passes (the stranger answers hellos, as any Pi would) until nothing is pending.
    const drainable = [
      ...parties().map((party) => ({
        core: () => party.core,
        refresh: () => (party.name === origin.name ? origin.configured : peer.configured).refresh(),
      })),
      { core: () => stranger.core, refresh: () => stranger.core.refresh() },
    ];
    expect(await tryDrain(drainable, { timers, cooldownMs: orphanProbeIntervalMs })).toBeDefined();
    // The origin follows the worker's hello (its bound key, claiming its session name) to the new endpoint.
    expect(origin.configured.current().getTask(task.taskId).target).toEqual(workerBinding.endpoint);
    await peer.configured.run((core) => core.done({ taskId: task.taskId, status: "completed", summary: "done under a derived name" }));
    expect(await tryDrain(drainable, { timers, cooldownMs: orphanProbeIntervalMs })).toBeDefined();
    expect(origin.configured.current().getTask(task.taskId)).toMatchObject({ status: "completed", outcome: "succeeded" });
    // Nothing but hellos ever went to the stranger: no task content, not even sealed.
    const toStranger = fx.proxy
      .requests()
      .filter((request) => request.operation === "send" && (request.body as any).envelope?.target?.id === strangerEndpoint.id);
    expect(toStranger.length).toBeGreaterThan(0);
    expect(toStranger.every((request) => isHello((request.body as any).envelope))).toBe(true);
    expect(stranger.core.listTasks()).toEqual([]);
    expect(stranger.host.inserted).toEqual([]);
  });

  test("a failed first rebind is retried by the next call; the tasks stay", async () => {
    const origin = await configured();
    const peer = await worker();
    // The worker proved its key: after the restart the task looks for it (an unproven one has no one to look for).
    await introduce(origin.configured.current(), peer.core);
    const active = await origin.configured.run((core) => core.createTask({ to: peer.core.endpoint()!, task: "kept across the restart" }));
    const lostEndpoint = origin.configured.current().endpoint()!;
    await fx.relay.stop();
    fx.relay = await startRelayProcess({ port: fx.relay.port });
    // The relay is back but refuses the first fresh connect for capacity.
    fx.proxy.push({ operation: "connect", kind: "status-429", when: (request) => (request.body as any).callerSession === origin.name });
    expectCode(await failure(origin.configured.refresh()), "RELAY_RESET");
    await origin.configured.settled();
    expect(origin.recovered).toEqual([]);
    expect(origin.configured.recovering()).toBe(true);
    expect(origin.configured.current().getTask(active.taskId).status).toBe("active");

    // The next call completes the recovery.
    await origin.configured.refresh();
    expect(origin.configured.recovering()).toBe(false);
    expect(origin.recovered).toHaveLength(1);
    expect(origin.recovered[0]!.reconnecting).toBe(1);
    expect(origin.recovered[0]!.previousEndpoint).toEqual(lostEndpoint);
    expect(origin.recovered[0]!.endpoint.id).not.toBe(lostEndpoint.id);
    expect(origin.configured.current().getTask(active.taskId)).toMatchObject({ status: "active", attention: "indeterminate" });
  });

  test("an origin that cannot find its worker within reconnectTimeoutMs declares the task orphaned, once", async () => {
    const clock = createJumpClock();
    const host = createMemoryHost();
    const name = `configured-${crypto.randomUUID()}`;
    const recovered: RecoveryInfo[] = [];
    const origin = createConfiguredTaskCore({
      url: fx.proxy.url,
      callerSession: name,
      host,
      env: {},
      clock,
      onRecovered: (info) => recovered.push(info),
    });
    fx.defer(() => origin.close());
    await origin.run((current) => current.connect());
    const peer = await worker();
    const task = await origin.run((current) => current.createTask({ to: peer.core.endpoint()!, task: "the worker never comes back" }));
    await settle([{ core: origin.current() }, peer]);
    await closeParties([peer]);
    await fx.relay.stop();
    fx.relay = await startRelayProcess({ port: fx.relay.port });
    expectCode(await failure(origin.refresh()), "RELAY_RESET");
    await origin.settled();
    await origin.refresh();
    expect(origin.current().getTask(task.taskId).attention).toBe("indeterminate");
    clock.jump(reconnectTimeoutMs);
    await origin.refresh();
    await origin.refresh();
    const view = origin.current().getTask(task.taskId);
    expect(view).toMatchObject({ status: "active", attention: "orphaned" });
    expect(view.events.filter((event) => event.type === "task.orphaned")).toHaveLength(1);
    expect(host.wakes.flat().filter((item) => item.event.type === "task.orphaned")).toHaveLength(1);
  });

  // Found by the simulator (seed 5000809 of its first version, docs/simulator.md): an origin sent a
  // task to a worker that had already rebound on a restarted relay, then learned of the restart
  // itself; the task waited to find a peer that never proved its key (no name to look up, no key
  // to match) and was orphaned reconnectTimeoutMs later, its worker alive where it was sent.
  test("a task whose worker never proved its key is not lost to a relay restart: its proof is asked where it was sent, and it is delivered", async () => {
    const clock = createJumpClock();
    const originCore = (await configured(fx.proxy.url, undefined, clock)).configured;
    const workerCore = (await configured(fx.proxy.url, undefined, clock)).configured;
    await fx.relay.stop();
    fx.relay = await startRelayProcess({ port: fx.relay.port });
    // The worker learns of the restart first and binds anew; the origin sends to where it is now.
    expectCode(await failure(workerCore.refresh()), "RELAY_RESET");
    await workerCore.settled();
    // The send inside createTask meets the restart: the task is made, its delivery pending.
    const sent = expectCode(
      await failure(
        originCore.run((current) => current.createTask({ to: workerCore.current().endpoint()!, task: "sent across the restart" })),
      ),
      "RELAY_RESET",
    );
    const task = { taskId: String(sent.details.taskId) };
    await originCore.settled();
    expect(originCore.current().getTask(task.taskId).attention).toBeUndefined();
    // Passes on both sides until the worker holds the task (the origin's proof request, its answer, the task).
    const delivered = await eventually(async () => {
      await originCore.refresh().catch(() => undefined);
      await workerCore.refresh().catch(() => undefined);
      return workerCore.current().findTask(task.taskId) !== undefined;
    }, 20_000);
    expect(delivered).toBe(true);
    expect(workerCore.current().getTask(task.taskId).status).toBe("active");
    clock.jump(reconnectTimeoutMs);
    await originCore.refresh();
    await originCore.refresh();
    expect(originCore.current().getTask(task.taskId)).toMatchObject({ status: "active" });
    expect(originCore.current().getTask(task.taskId).attention).toBeUndefined();
  });

  // Found by the simulator (seeds 129 and 130 of its first version): after a reassignment, a relay
  // restart made the origin re-send every envelope of the task to the worker it found again —
  // the first assignment too, which was the former worker's — and the new worker was shown the
  // task as created anew, after the events of its own assignment.
  test("a reassigned task found again after a relay restart: its worker gets the mail of its own assignment, never the former worker's", async () => {
    const origin = await configured();
    const former = await worker();
    const next = await configured();
    await introduce(origin.configured.current(), former.core);
    await introduce(origin.configured.current(), next.configured.current());
    const task = await origin.configured.run((core) => core.createTask({ to: former.core.endpoint()!, task: "moves to another worker" }));
    await settle([origin.party(), former]);
    expect(former.core.getTask(task.taskId).status).toBe("active");
    await closeParties([former]);
    expect(origin.configured.current().workerGone(former.core.endpoint()!)).toBe(1);
    await origin.configured.run((core) => core.reassignTask(task.taskId, { to: next.configured.current().endpoint()! }));
    await settle([origin.party(), next.party()]);
    expect(next.configured.current().getTask(task.taskId)).toMatchObject({ status: "active", generation: 2 });
    await fx.relay.stop();
    fx.relay = await startRelayProcess({ port: fx.relay.port });
    const both = [origin, next];
    for (const party of both) {
      expectCode(await failure(party.configured.refresh()), "RELAY_RESET");
      await party.configured.settled();
    }
    const found = await eventually(async () => {
      for (const party of both) await party.configured.refresh().catch(() => undefined);
      const atOrigin = origin.configured.current().getTask(task.taskId);
      return sameEndpoint(atOrigin.target, next.configured.current().endpoint()!) && !origin.configured.current().hasPendingWork();
    }, 20_000);
    expect(found).toBe(true);
    const shown = next.host.inserted.filter((item) => item.taskId === task.taskId);
    expect(shown.map((item) => item.event.type)).not.toContain("task.created");
    const sequences = shown.map((item) => BigInt(item.event.sequence));
    expect(sequences).toEqual([...sequences].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    expect(new Set(sequences).size).toBe(sequences.length);
  });
});

// -------------------------------------------------------------------------------------------------

describe("failures that never trigger recovery", () => {
  /** An origin with one active task to a peer (both on `url`), and a check that it never recovered. */
  async function steady(options: { url?: string; timers?: TaskTimers; task?: string } = {}) {
    const origin = await configured(options.url ?? fx.proxy.url, options.timers);
    const peer = await worker(options.url ?? fx.proxy.url);
    await introduce(origin.configured.current(), peer.core);
    const task = await origin.configured.run((core) =>
      core.createTask({ to: peer.core.endpoint()!, task: options.task ?? "survives transient failures" }),
    );
    const core = origin.configured.current();
    const endpoint = core.endpoint()!;
    const expectUnchanged = async () => {
      await origin.configured.settled();
      expect(origin.configured.recovering()).toBe(false);
      expect(origin.recovered).toEqual([]);
      expect(origin.configured.current()).toBe(core);
      expect(core.closed()).toBe(false);
      expect(core.endpoint()).toEqual(endpoint);
      expect(core.getTask(task.taskId).status).toBe("active");
    };
    return { origin, peer, task, core, expectUnchanged };
  }

  const onlyFor = (name: string) => (request: { body: unknown }) => (request.body as any)?.callerSession === name;

  test("capacity (429), authentication (401) and profile failures; configuration refusals hold relay work, then it resumes", async () => {
    const timers = createVirtualTimers();
    const { origin, expectUnchanged } = await steady({ timers });
    /** A configuration refusal holds: the next pass makes no relay request; after the hold, work resumes. */
    const expectHeldThenResume = async (code: string) => {
      if (!errorSpec(code).holdsSending) return;
      const before = requestsOf(fx.proxy, origin.name).length;
      const held = await origin.configured.refresh();
      expect([code, held.failures.get("lease")?.code]).toEqual([code, code]);
      expect(requestsOf(fx.proxy, origin.name).length).toBe(before);
      await timers.advance(maxConfigHoldMs);
    };
    const when = onlyFor(origin.name);
    const cases: [string, () => void][] = [
      ["RELAY_CAPACITY", () => fx.proxy.push({ operation: "receive", kind: "status-429", when })],
      [
        "RELAY_AUTH_REQUIRED",
        () => fx.proxy.push({ operation: "receive", kind: "reply", status: 401, body: { error: "unauthorized" }, when }),
      ],
      ["RELAY_PROFILE_REQUIRED", () => fx.proxy.push({ operation: "receive", kind: "wrong-profile", when })],
      [
        "RELAY_PROFILE_REQUIRED",
        () =>
          fx.proxy.push({
            operation: "receive",
            kind: "reply",
            status: 409,
            body: {
              ok: false,
              profile: RELAY_PROFILE,
              epoch: fx.relay.epoch,
              error: { code: "RELAY_PROFILE_REQUIRED", message: "x", retryable: false },
            },
            when,
          }),
      ],
    ];
    for (const [code, arm] of cases) {
      arm();
      const report = await origin.configured.refresh();
      expect([code, report.failures.get("intake")?.code]).toEqual([code, code]);
      await expectHeldThenResume(code);
      await expectUnchanged();
    }
    // The same failures in a foreground operation are reported to the caller, nothing more.
    for (const [code, fault] of [
      ["RELAY_CAPACITY", { kind: "status-429" }],
      ["RELAY_AUTH_REQUIRED", { kind: "reply", status: 401, body: { error: "unauthorized" } }],
      ["RELAY_PROFILE_REQUIRED", { kind: "wrong-profile" }],
    ] as const) {
      // A fresh target each time: a capacity cooldown rightly defers younger mail to its target.
      const peer = await worker();
      await introduce(origin.configured.current(), peer.core);
      fx.proxy.push({ operation: "send", when, ...(fault as any) });
      const error = await failure(origin.configured.run((core) => core.createTask({ to: peer.core.endpoint()!, task: code })));
      expectCode(error, code);
      expect(error.details.taskId).toBeDefined();
      await expectHeldThenResume(code);
      await expectUnchanged();
    }
    // And afterwards everything still works on the same endpoint.
    const report = await origin.configured.refresh();
    expect(report.failures.size).toBe(0);
    await expectUnchanged();
  });

  test("the outage wait: after a pass found the relay unreachable, sends wait without a request for outageWaitMs; a pass that reaches the relay sends them", async () => {
    const timers = createJumpTimers();
    const { origin, peer, task, expectUnchanged } = await steady({ timers });
    fx.proxy.push({ operation: "receive", kind: "drop-reply", when: onlyFor(origin.name) });
    expectCode((await origin.configured.refresh()).failures.get("intake"), "RELAY_UNAVAILABLE");
    const before = requestsOf(fx.proxy, origin.name).length;
    const held = await failure(
      origin.configured.run((core) => core.message({ taskId: task.taskId, type: "information", message: "held" })),
    );
    expectCode(held, "TASK_DELIVERY_DEFERRED");
    expect(requestsOf(fx.proxy, origin.name).length).toBe(before);
    // Past the hold a send tries the network again.
    timers.jump(outageWaitMs);
    const tried = await origin.configured.run((core) => core.message({ taskId: task.taskId, type: "information", message: "tried" }));
    expect(coreInternals(origin.configured.current()).store.getOutbox(tried.envelopeId)?.state).toBe("accepted");
    // The next pass reaches the relay and sends what waited, in order.
    await origin.configured.refresh();
    await peer.core.refresh();
    const heard = peer.core
      .getTask(task.taskId)
      .events.filter((event) => event.type === "task.information")
      .map((event) => event.payload.message);
    expect(heard).toEqual(["held", "tried"]);
    await expectUnchanged();
  });

  test("an unreachable relay: RELAY_UNAVAILABLE, then sends are held", async () => {
    const door = createFaultProxy({ target: fx.relay.url });
    fx.defer(() => door.stop());
    const { origin, task, expectUnchanged } = await steady({ url: door.url, task: "the relay goes away" });

    await door.stop();
    const report = await origin.configured.refresh();
    expectCode(report.failures.get("intake"), "RELAY_UNAVAILABLE");
    // The pass just found the relay unreachable: the message is queued without trying the network
    // (the outage wait, src/core/relay-health.ts); the passes send it once the relay answers again.
    const sendError = await failure(
      origin.configured.run((current) => current.message({ taskId: task.taskId, type: "information", message: "anyone?" })),
    );
    expectCode(sendError, "TASK_DELIVERY_DEFERRED");
    expect(sendError.retryable).toBe(true);
    expect(String(sendError.details.reason)).toContain("unreachable");

    await expectUnchanged();
    expect(requestsOf(fx.proxy, origin.name)).toEqual([]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("configuration", () => {
  test("without WOLFPACK_SESSION_NAME there is no relay identity: RELAY_SESSION_REQUIRED", async () => {
    for (const env of [{}, { WOLFPACK_SESSION_NAME: "" }, { WOLFPACK_SESSION_NAME: "   " }]) {
      const { error, synchronous } = await raised(() => createConfiguredTaskCore({ url: fx.relay.url, env }));
      expectCode(error, "RELAY_SESSION_REQUIRED");
      expect(synchronous).toBe(true);
      expect(error.retryable).toBe(false);
    }
    // With a name it binds on first use (the name is the caller session on the wire).
    const name = `named-${crypto.randomUUID()}`;
    const core = createConfiguredTaskCore({ url: fx.proxy.url, env: { WOLFPACK_SESSION_NAME: ` ${name} ` } });
    fx.defer(() => core.close());
    const endpoint = await core.run((current: TaskCore) => current.connect());
    expect(endpoint.id.length).toBeGreaterThan(0);
    expect(requestsOf(fx.proxy, name, "connect")).toHaveLength(1);
  });
});
