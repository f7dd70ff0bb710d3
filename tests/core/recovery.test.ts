/**
 * createRecoveringTaskCore against the real relay (started through its CLI): relay-loss recovery
 * after a real relay restart, and the failures that must never trigger it.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { type RecoveringTaskCore, createRecoveringTaskCore, type RecoveryInfo } from "../../src/core/recovering.ts";
import { type TaskCore, coreInternals } from "../../src/core/task-core.ts";
import type { TaskTimers } from "../../src/core/timers.ts";
import { createVirtualTimers } from "../../kit/virtual-timers.ts";
import { errorSpec } from "../../src/protocol/errors.ts";
import { configHoldMaxMs, RELAY_PROFILE } from "../../src/protocol/limits.ts";
import { settle } from "../../kit/drain.ts";
import { closeParties, createParty, type Party } from "../../kit/party.ts";
import { failure, raised } from "../../kit/async.ts";
import { expectCode, requestsOf } from "../helpers/core-kit.ts";
import { createFaultProxy } from "../../kit/fault-proxy.ts";
import { createMemoryHost, type MemoryHost } from "../../kit/memory-host.ts";
import { startRelayProcess } from "../../kit/relay-process.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(10_000);

const fx = useRelayFixture({ proxy: true });

interface Configured {
  readonly configured: RecoveringTaskCore;
  readonly host: MemoryHost;
  readonly name: string;
  readonly recovered: RecoveryInfo[];
  /** The current lifetime as a settle() party. */
  party(): Party;
}

async function configured(url = fx.proxy.url, timers?: TaskTimers): Promise<Configured> {
  const host = createMemoryHost();
  const recovered: RecoveryInfo[] = [];
  const name = `configured-${crypto.randomUUID()}`;
  const core = createRecoveringTaskCore({ url, callerSession: name, host, env: {}, requestTimeoutMs: 4_000, onRecovered: (info) => recovered.push(info), ...(timers === undefined ? {} : { timers }) });
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
  test("a relay restart mid-task: RELAY_RESET, every active task recorded lost once, a fresh empty lifetime on a new endpoint", async () => {
    const origin = await configured();
    const peer = await worker();
    const target = peer.core.endpoint()!;
    const active = await origin.configured.run((core) => core.createTask({ to: target, task: "active when the relay dies" }));
    const finished = await origin.configured.run((core) => core.createTask({ to: target, task: "finished before" }));
    const incoming = await peer.core.createTask({ to: origin.configured.current().endpoint()!, task: "assigned to the configured core" });
    await settle([origin.party(), peer]);
    await peer.core.done({ taskId: finished.taskId, status: "completed", summary: "ok" });
    await settle([origin.party(), peer]);
    const lost = origin.configured.current();
    expect(lost.getTask(finished.taskId).status).toBe("completed");
    expect(lost.getTask(incoming.taskId).role).toBe("target");
    const lostEndpoint = lost.endpoint()!;
    const lostEpoch = origin.configured.session.binding()!.epoch;
    // An operation of the old lifetime is in flight (held at the fx.proxy) when the relay dies.
    const other = await worker();
    fx.proxy.push({ operation: "send", kind: "hold", when: (request) => (request.body as any).callerSession === origin.name });
    const inFlight = failure(origin.configured.run((core) => core.createTask({ to: other.core.endpoint()!, task: "in flight at the restart" })));
    await fx.proxy.waitFor((stats) => stats.held === 1);
    const wakesBefore = origin.host.wakes.length;
    const insertedBefore = origin.host.inserted.length;

    await fx.relay.stop();
    fx.relay = await startRelayProcess({ port: fx.relay.port });
    expect(fx.relay.epoch).not.toBe(lostEpoch);

    // Two loss signals at once (a pass and a foreground call): one recovery.
    const [refreshError, messageError] = await Promise.all([
      failure(origin.configured.refresh()),
      failure(origin.configured.run((core) => core.message({ taskId: active.taskId, type: "information", message: "hello?" }))),
    ]);
    expectCode(refreshError, "RELAY_RESET");
    expect(["RELAY_RESET", "RELAY_REBIND_REQUIRED"]).toContain(messageError.code);
    expect(["RELAY_RESET", "RELAY_REBIND_REQUIRED"]).toContain((await inFlight).code);
    await origin.configured.settled();
    fx.proxy.release();

    // Every active task of the lost lifetime, once: failed locally, remote outcome unknown.
    const recordedIds = origin.host.losses.map((record) => record.task.taskId).sort();
    const lostTasks = recordedIds.length;
    expect(lostTasks).toBe(3);
    expect(recordedIds).toContain(active.taskId);
    expect(recordedIds).toContain(incoming.taskId);
    expect(recordedIds).not.toContain(finished.taskId);
    for (const record of origin.host.losses) {
      expect(record.task.status).toBe("failed");
      expect(record.error.code).toBe("RELAY_STATE_LOST");
      expect(record.error.details).toMatchObject({ taskId: record.task.taskId, remoteOutcome: "unknown" });
    }
    // The loss record does not wake or insert anything.
    expect(origin.host.wakes).toHaveLength(wakesBefore);
    expect(origin.host.inserted).toHaveLength(insertedBefore);

    expect(origin.recovered).toHaveLength(1);
    const info = origin.recovered[0]!;
    expect(info.failedTasks).toBe(lostTasks);
    expect(info.previousEndpoint).toEqual(lostEndpoint);
    expect(info.endpoint.id).not.toBe(lostEndpoint.id);
    expect(info.cause.code).toBe("RELAY_RESET");
    const binding = origin.configured.session.binding()!;
    expect(binding.epoch).toBe(fx.relay.epoch);
    expect(binding.endpoint).toEqual(info.endpoint);

    // A fresh, empty lifetime; the old one is fenced and discarded.
    const fresh = origin.configured.current();
    expect(fresh).not.toBe(lost);
    expect(lost.closed()).toBe(true);
    expect(coreInternals(lost).store.stats().records).toBe(0);
    expect(fresh.endpoint()).toEqual(info.endpoint);
    expect(fresh.listTasks()).toEqual([]);
    for (const taskId of [active.taskId, finished.taskId, incoming.taskId]) expectCode((await raised(() => fresh.getTask(taskId))).error, "UNKNOWN_TASK");

    // Old-lifetime handles cannot reach the new store.
    let freshCommits = 0;
    fresh.onChange(() => (freshCommits += 1));
    const stale = await raised(() => lost.createTask({ to: target, task: "from the old lifetime" }));
    expectCode(stale.error, "RELAY_CLOSED");
    expect(stale.synchronous).toBe(true);
    expectCode((await raised(() => lost.refresh())).error, "RELAY_CLOSED");
    await Bun.sleep(50);
    expect(freshCommits).toBe(0);
    expect(coreInternals(fresh).store.stats().records).toBe(0);

    // The new lifetime works, and nothing is recorded lost twice.
    await origin.configured.refresh();
    expect(origin.host.losses).toHaveLength(lostTasks);
    expect(origin.recovered).toHaveLength(1);
    const next = await worker();
    const created = await origin.configured.run((core) => core.createTask({ to: next.core.endpoint()!, task: "after recovery" }));
    expect(origin.configured.current().getTask(created.taskId).status).toBe("active");
  });

  test("a failed first rebind is retried by the next call and still reports the lost tasks once", async () => {
    const origin = await configured();
    const peer = await worker();
    const active = await origin.configured.run((core) => core.createTask({ to: peer.core.endpoint()!, task: "lost with the relay" }));
    const lostEndpoint = origin.configured.current().endpoint()!;
    await fx.relay.stop();
    fx.relay = await startRelayProcess({ port: fx.relay.port });
    // The relay is back but refuses the first fresh connect for capacity.
    fx.proxy.push({ operation: "connect", kind: "status-429", when: (request) => (request.body as any).callerSession === origin.name });
    expectCode(await failure(origin.configured.refresh()), "RELAY_RESET");
    await origin.configured.settled();
    expect(origin.recovered).toEqual([]);
    expect(origin.configured.recovering()).toBe(true);
    expect(origin.host.losses.map((record) => record.task.taskId)).toEqual([active.taskId]);

    // The next call completes the recovery.
    await origin.configured.refresh();
    expect(origin.configured.recovering()).toBe(false);
    expect(origin.recovered).toHaveLength(1);
    expect(origin.recovered[0]!.failedTasks).toBe(1);
    expect(origin.recovered[0]!.previousEndpoint).toEqual(lostEndpoint);
    expect(origin.recovered[0]!.endpoint.id).not.toBe(lostEndpoint.id);
    expect(origin.host.losses.map((record) => record.task.taskId)).toEqual([active.taskId]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("failures that never trigger recovery", () => {
  /** An origin with one active task to a peer (both on `url`), and a check that it never recovered. */
  async function steady(options: { url?: string; timers?: TaskTimers; task?: string } = {}) {
    const origin = await configured(options.url ?? fx.proxy.url, options.timers);
    const peer = await worker(options.url ?? fx.proxy.url);
    const task = await origin.configured.run((core) => core.createTask({ to: peer.core.endpoint()!, task: options.task ?? "survives transient failures" }));
    const core = origin.configured.current();
    const endpoint = core.endpoint()!;
    const expectUnchanged = async () => {
      await origin.configured.settled();
      expect(origin.configured.recovering()).toBe(false);
      expect(origin.recovered).toEqual([]);
      expect(origin.host.losses).toEqual([]);
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
      await timers.advance(configHoldMaxMs);
    };
    const when = onlyFor(origin.name);
    const cases: [string, () => void][] = [
      ["RELAY_CAPACITY", () => fx.proxy.push({ operation: "receive", kind: "status-429", when })],
      ["RELAY_AUTH_REQUIRED", () => fx.proxy.push({ operation: "receive", kind: "reply", status: 401, body: { error: "unauthorized" }, when })],
      ["RELAY_PROFILE_REQUIRED", () => fx.proxy.push({ operation: "receive", kind: "wrong-profile", when })],
      [
        "RELAY_PROFILE_REQUIRED",
        () =>
          fx.proxy.push({
            operation: "receive",
            kind: "reply",
            status: 409,
            body: { ok: false, profile: RELAY_PROFILE, epoch: fx.relay.epoch, error: { code: "RELAY_PROFILE_REQUIRED", message: "x", retryable: false } },
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

  test("an unreachable relay: RELAY_UNAVAILABLE", async () => {
    const door = createFaultProxy({ target: fx.relay.url });
    fx.defer(() => door.stop());
    const { origin, task, expectUnchanged } = await steady({ url: door.url, task: "the relay goes away" });

    await door.stop();
    const report = await origin.configured.refresh();
    expectCode(report.failures.get("intake"), "RELAY_UNAVAILABLE");
    const sendError = await failure(origin.configured.run((current) => current.message({ taskId: task.taskId, type: "information", message: "anyone?" })));
    expectCode(sendError, "RELAY_UNAVAILABLE");
    expect(sendError.retryable).toBe(true);

    await expectUnchanged();
    expect(requestsOf(fx.proxy, origin.name)).toEqual([]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("configuration", () => {
  test("without WOLFPACK_SESSION_NAME there is no relay identity: RELAY_SESSION_REQUIRED", async () => {
    for (const env of [{}, { WOLFPACK_SESSION_NAME: "" }, { WOLFPACK_SESSION_NAME: "   " }]) {
      const { error, synchronous } = await raised(() => createRecoveringTaskCore({ url: fx.relay.url, env }));
      expectCode(error, "RELAY_SESSION_REQUIRED");
      expect(synchronous).toBe(true);
      expect(error.retryable).toBe(false);
    }
    // With a name it binds on first use (the name is the caller session on the wire).
    const name = `named-${crypto.randomUUID()}`;
    const core = createRecoveringTaskCore({ url: fx.proxy.url, env: { WOLFPACK_SESSION_NAME: ` ${name} ` } });
    fx.defer(() => core.close());
    const endpoint = await core.run((current: TaskCore) => current.connect());
    expect(endpoint.id.length).toBeGreaterThan(0);
    expect(requestsOf(fx.proxy, name, "connect")).toHaveLength(1);
  });
});
