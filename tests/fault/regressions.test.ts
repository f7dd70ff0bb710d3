/**
 * Named regression tests: one per failure mode of the reference implementation's history
 * (docs/failure-history.md, items 1–24), each at the level where it lives in this project —
 * the TaskCore, its store, the relay client or the relay. Items whose full story is in the Pi
 * extension (tool surface, hooks, a real Pi) test the core part here; a comment says what the
 * extension tests will add.
 *
 * Fast cases run on the in-memory fake relay with virtual timers; cases about HTTP, leases,
 * replies and resets run on the real relay (its CLI) through the fault proxy.
 */
import { encodedEnvelope } from "../../src/protocol/wire.ts";
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { createConfiguredTaskCore } from "../../src/core/configured.ts";
import { encodeEnvelope, makeEvent, makeIntent } from "../../src/core/envelopes.ts";
import { processLocalTrust } from "../../src/core/trust.ts";
import type { PresentationHost } from "../../src/core/host.ts";
import { createTaskCore, type TaskCore, coreInternals } from "../../src/core/task-core.ts";
import { introduce } from "../../testkit/introduce.ts";
import { clearPayload, sealedTo } from "../../testkit/sealed.ts";
import { createVirtualTimers, type VirtualTimers } from "../../testkit/virtual-timers.ts";
import { errorSpec, TaskError } from "../../src/protocol/errors.ts";
import {
  capacityCooldownMs,
  maxConfigHoldMs,
  maxEnvelopeFutureSkewMs,
  leaseRenewMarginMs,
  maxInFlightRequests,
  reservedRequestSlots,
  minTaskTimeoutMs,
} from "../../src/protocol/limits.ts";
import { RELAY_ID, RELAY_PROFILE } from "../../src/protocol/names.ts";
import type { TaskEndpoint, TaskEvent, TaskRecord } from "../../src/protocol/schemas.ts";
import type { VolatileTaskSession } from "../../src/relay-client/session.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { createFakeRelay, type FakeRelay } from "../helpers/fake-relay.ts";
import { createFaultProxy, type FaultProxy, type ProxyRequest } from "../../testkit/fault-proxy.ts";
import { deferred, failure, settlesWithin } from "../../testkit/async.ts";
import { drain } from "../../testkit/drain.ts";
import { createJumpTimers } from "../../testkit/jump-timers.ts";
import { expectAllPresentedOnce, expectFrontierBelowPending, faultRig, faultSetup } from "../helpers/fault-kit.ts";
import { createMemoryHost, type MemoryHost } from "../../testkit/memory-host.ts";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

/**
 * A wire envelope object, as a rogue sender would build it — signed with this process's identity,
 * which every party here trusts: the trust gate lets it through, so intake's own checks are tested.
 */
function forged(...args: Parameters<typeof encodeEnvelope>): Record<string, unknown> {
  const [source, target, taskId, kind, inner, createdAtMs] = args;
  return JSON.parse(
    encodeEnvelope(source, target, taskId, kind, inner, createdAtMs, processLocalTrust(), undefined, sealedTo()).text,
  ) as Record<string, unknown>;
}

setDefaultTimeout(30_000);

const REQUEST_TIMEOUT_MS = 500;

// ---------------------------------------------------------------------------------------------
// fake-relay fixture (virtual time)
// ---------------------------------------------------------------------------------------------

interface FakeParty {
  readonly name: string;
  readonly core: TaskCore;
  readonly host: MemoryHost;
}

interface FakeWorld {
  readonly timers: VirtualTimers;
  readonly relay: FakeRelay;
  readonly origin: FakeParty;
  readonly worker: FakeParty;
  /** Wall clock of task records; `wall.jump(ms)` moves it. */
  readonly wall: { jump(ms: number): void };
  party(name: string, host?: PresentationHost & Partial<MemoryHost>): Promise<FakeParty>;
  /** Drives virtual time until the promise settles. */
  drive<T>(promise: Promise<T>): Promise<T>;
  pass(party: FakeParty): Promise<Awaited<ReturnType<TaskCore["refresh"]>>>;
  /** Passes on both parties until nothing is pending (faults are the test's business). */
  settle(rounds?: number): Promise<void>;
}

/** A session whose relay calls ignore aborts: replies arrive even after the caller gave up. */
function ignoringAbort(inner: VolatileTaskSession): VolatileTaskSession {
  return {
    ...inner,
    send: (envelope) => inner.send(envelope),
    receive: (cursor, options = {}) => inner.receive(cursor, { ...(options.limit === undefined ? {} : { limit: options.limit }) }),
    acknowledge: (envelopeId) => inner.acknowledge(envelopeId),
  };
}

async function fakeWorld(
  options: { originHost?: MemoryHost; workerHost?: MemoryHost; wrap?: (session: VolatileTaskSession) => VolatileTaskSession } = {},
): Promise<FakeWorld> {
  const timers = createVirtualTimers(1_000_000);
  const relay = createFakeRelay(timers);
  let wall = Date.UTC(2026, 10, 30, 12);
  const clock = () => (wall += 1);
  async function drive<T>(promise: Promise<T>): Promise<T> {
    let settled = false;
    const tracked = promise.finally(() => {
      settled = true;
    });
    tracked.catch(() => undefined);
    for (let spent = 0; !settled && spent < 60_000; spent += 10) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (!settled) await timers.advance(10);
    }
    return tracked;
  }
  async function party(name: string, host: MemoryHost = createMemoryHost()): Promise<FakeParty> {
    const session = relay.session(name);
    const core = createTaskCore({ store: createTaskStore(), session: options.wrap?.(session) ?? session, timers, clock, host });
    await core.connect();
    return { name, core, host };
  }
  const origin = await party("origin", options.originHost);
  const worker = await party("worker", options.workerHost);
  await introduce(origin.core, worker.core, (core) => drive(core.refresh()));
  const world: FakeWorld = {
    timers,
    relay,
    origin,
    worker,
    wall: {
      jump(ms) {
        wall += ms;
      },
    },
    party: (name, host) => party(name, host as MemoryHost | undefined),
    drive,
    pass: (p) => drive(p.core.refresh()),
    async settle(rounds = 10) {
      for (let round = 0; round < rounds; round += 1) {
        await world.pass(origin);
        await world.pass(worker);
        if (
          !origin.core.hasPendingWork() &&
          !worker.core.hasPendingWork() &&
          relay.mailbox(worker.core.endpoint()!.id).length === 0 &&
          relay.mailbox(origin.core.endpoint()!.id).length === 0
        )
          return;
        await timers.advance(capacityCooldownMs);
      }
    },
  };
  return world;
}

const eventsOfType = (core: TaskCore, taskId: string, type: string): TaskEvent[] =>
  core.getTask(taskId).events.filter((event) => event.type === type);

// ---------------------------------------------------------------------------------------------
// real-relay fixture
// ---------------------------------------------------------------------------------------------

const fx = useRelayFixture({ proxy: false });

const rig = () => faultRig(fx, REQUEST_TIMEOUT_MS);

type Body = {
  envelope?: {
    envelopeId?: string;
    source?: TaskEndpoint;
    target?: TaskEndpoint;
    payload?: { kind?: string; payload?: { task?: { task?: string } } };
  };
  endpoint?: TaskEndpoint;
  callerSession?: string;
};
const body = (request: ProxyRequest): Body => (request.body ?? {}) as Body;
const fromEndpoint = (endpoint: TaskEndpoint) => (request: ProxyRequest) => body(request).endpoint?.id === endpoint.id;
const sendsOf = (proxy: FaultProxy, envelopeId: string) =>
  proxy.requests().filter((request) => request.operation === "send" && body(request).envelope?.envelopeId === envelopeId);
const relayError = (code: string, extra: Record<string, unknown> = {}, epoch: string | undefined = fx.relay.epoch) => ({
  ok: false,
  profile: RELAY_PROFILE,
  ...(epoch === undefined ? {} : { epoch }),
  error: { code, message: code, ...extra },
});

// =============================================================================================

describe("failure history (docs/failure-history.md)", () => {
  // Extension tests will add: agent_task_inbox is read-only at the tool boundary (no `ack` flag).
  test("regression #1: reading tasks and the inbox never ACKs; two distinct terminal tasks are acknowledged one by one", async () => {
    const w = await fakeWorld();
    const to = w.worker.core.endpoint()!;
    const one = await w.drive(w.origin.core.createTask({ to, task: "one" }));
    const two = await w.drive(w.origin.core.createTask({ to, task: "two" }));
    await w.pass(w.worker);
    await w.drive(w.worker.core.done({ taskId: one.taskId, status: "completed", summary: "one done" }));
    await w.drive(w.worker.core.done({ taskId: two.taskId, status: "failed", summary: "two failed" }));
    w.origin.host.busy = true;
    await w.pass(w.origin);
    expect(w.origin.core.getTask(one.taskId).status).toBe("completed");
    expect(w.origin.core.getTask(two.taskId).status).toBe("failed");

    const requestsBefore = w.relay.requests.length;
    const rows = () => {
      const { rowReads: _reads, rowParses: _parses, cachedBytes: _cached, ...rest } = coreInternals(w.origin.core).store.stats();
      return JSON.stringify(rest);
    };
    const rowsBefore = rows();
    for (let read = 0; read < 3; read += 1) {
      expect(w.origin.core.receive().map((item) => item.kind)).toEqual(["local", "local"]);
      w.origin.core.listTasks();
      w.origin.core.getTask(one.taskId);
      w.origin.core.findTask(two.taskId);
    }
    // Reading sent nothing, ACKed nothing and changed nothing.
    expect(w.relay.requests.length).toBe(requestsBefore);
    expect(rows()).toBe(rowsBefore);
    expect(eventsOfType(w.origin.core, one.taskId, "task.parent_acknowledged")).toEqual([]);
    expect(eventsOfType(w.origin.core, two.taskId, "task.parent_acknowledged")).toEqual([]);

    // A parent ACK of one terminal task touches only that task.
    const ack = await w.drive(w.origin.core.acknowledge({ taskId: one.taskId }));
    expect(eventsOfType(w.origin.core, one.taskId, "task.parent_acknowledged").map((event) => event.eventId)).toEqual([ack.eventId]);
    expect(eventsOfType(w.origin.core, two.taskId, "task.parent_acknowledged")).toEqual([]);
    const again = await w.drive(w.origin.core.acknowledge({ taskId: one.taskId }));
    expect(again.eventId).toBe(ack.eventId);
    const other = await w.drive(w.origin.core.acknowledge({ taskId: two.taskId }));
    expect(other.eventId).not.toBe(ack.eventId);
    expect(eventsOfType(w.origin.core, one.taskId, "task.parent_acknowledged").length).toBe(1);
    expect(eventsOfType(w.origin.core, two.taskId, "task.parent_acknowledged").length).toBe(1);
  });

  // Extension tests will add: session_start, the interval and agent_end refreshes go through this one entry point.
  test("regression #2: concurrent refresh calls share one pass plus one trailing pass; nothing is inserted twice", async () => {
    const w = await fakeWorld();
    const created = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "once" }));
    w.relay.hook("receive", () => w.timers.timeout(100));
    const receivesBefore = w.relay.count("receive");
    const calls = Array.from({ length: 5 }, () => w.worker.core.refresh());
    expect(calls[1]).toBe(calls[2]);
    expect(calls[4]).toBe(calls[1]);
    expect(calls[0]).not.toBe(calls[1]);
    await w.drive(Promise.all(calls));
    // The first pass and one trailing pass, however many callers.
    expect(w.relay.count("receive") - receivesBefore).toBe(2);
    expect(w.worker.host.inserted.filter((item) => item.taskId === created.taskId).length).toBe(1);
    expect(w.worker.host.wakes.length).toBe(1);
    // A refresh requested after the trailing pass started gets a new pass.
    await w.drive(w.worker.core.refresh());
    expect(w.relay.count("receive") - receivesBefore).toBe(3);
  });

  // Extension tests will add: insertion through Pi's followUp queue while the agent is busy.
  test("regression #3: an assignment reaching a busy worker is recorded in RAM and receipted at once, and presented on the very next pass once presentable", async () => {
    const w = await fakeWorld();
    const created = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "while busy" }));
    w.worker.host.busy = true;
    await w.pass(w.worker);
    expect(w.worker.core.findTask(created.taskId)?.status).toBe("active");
    expect(w.worker.host.inserted).toEqual([]);
    await w.pass(w.origin);
    const evidence = w.origin.core.getTask(created.taskId).deliveryEvidence;
    expect(evidence.receiverReceipt).toBe("confirmed");
    expect(evidence.piInsertion).toBe("not_confirmed");

    w.worker.host.busy = false;
    const report = await w.pass(w.worker);
    expect(report.presented).toBe(1);
    expect(w.worker.host.insertedIds()).toEqual([w.worker.core.getTask(created.taskId).events[0]!.eventId]);
    await w.pass(w.origin);
    expect(w.origin.core.getTask(created.taskId).deliveryEvidence).toMatchObject({
      piInsertion: "confirmed",
      wakeAcceptance: "confirmed",
      modelExecution: "not_evidenced",
    });
  });

  test("regression #4: a definitive refusal creates no task (one send, refused); an uncertain outcome keeps an active task", async () => {
    const w = await fakeWorld();
    // Refused by the send's own target check: no task at all.
    const nowhere: TaskEndpoint = { relay: RELAY_ID, id: crypto.randomUUID() };
    const refused = await failure(w.drive(w.origin.core.createTask({ to: nowhere, task: "to nowhere" })));
    expect(refused.code).toBe("TARGET_NOT_REGISTERED");
    expect(refused.retryable).toBe(false);
    expect(refused.details.taskId).toBeUndefined();
    expect(w.origin.core.listTasks()).toEqual([]);
    expect(coreInternals(w.origin.core).store.pendingOutboxCount()).toBe(0);

    // The target vanished just before the send: the same — nothing kept, never retried.
    const to = w.worker.core.endpoint()!;
    let vanish = true;
    w.relay.hook("send", () => {
      if (vanish) throw new TaskError("TARGET_NOT_REGISTERED", { details: { operation: "send" } });
    });
    // (The store holds only the checkpoint its introduction to the worker moved.)
    const records = coreInternals(w.origin.core).store.stats().records;
    const blocked = await failure(w.drive(w.origin.core.createTask({ to, task: "vanished" })));
    vanish = false;
    expect(blocked.code).toBe("TARGET_NOT_REGISTERED");
    expect(blocked.details).toMatchObject({ delivery: "blocked", created: false });
    expect(w.origin.core.listTasks()).toEqual([]);
    expect(coreInternals(w.origin.core).store.stats().records).toBe(records);

    // Uncertain: the task stays active and its envelope is retried.
    let uncertain = true;
    w.relay.hook("send", () => {
      if (uncertain) throw new TaskError("RELAY_TIMEOUT", { details: { operation: "send", mayHaveBeenDelivered: true } });
    });
    const timedOut = await failure(w.drive(w.origin.core.createTask({ to, task: "uncertain" })));
    uncertain = false;
    expect(timedOut.code).toBe("RELAY_TIMEOUT");
    expect(timedOut.retryable).toBe(true);
    const kept = w.origin.core.getTask(timedOut.details.taskId as string);
    expect(kept.status).toBe("active");
    expect(kept.deliveryEvidence.relayAcceptance).toBe("pending");
    await w.settle();
    expect(w.origin.core.getTask(kept.taskId).deliveryEvidence.relayAcceptance).toBe("accepted");
    expect(w.worker.core.listTasks().map((task) => task.taskId)).toEqual([kept.taskId]);
    expect(w.relay.requests.filter((request) => request.operation === "send").length).toBeGreaterThan(0);
  });

  // Extension tests will add: loading extensions/pi-tasks/index.ts under Pi's Node/jiti runtime.
  test("regression #5: nothing in src/ or extensions/ imports bun:sqlite, node:sqlite or better-sqlite3", () => {
    const forbidden = /(?:from\s+|import\s*\(\s*|require\s*\(\s*|import\s+)["'](?:bun:sqlite|node:sqlite|better-sqlite3|sqlite3)["']/;
    const offenders: string[] = [];
    let scanned = 0;
    for (const root of ["src", "extensions"]) {
      for (const file of sourceFiles(join(REPO_ROOT, root), /\.(?:[cm]?[jt]sx?)$/)) {
        scanned += 1;
        if (forbidden.test(readFileSync(file, "utf8"))) offenders.push(relative(REPO_ROOT, file));
      }
    }
    expect(scanned).toBeGreaterThan(10);
    expect(offenders).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as Record<string, Record<string, string> | undefined>;
    const deps = Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies, ...pkg.optionalDependencies });
    expect(deps.filter((name) => /sqlite/i.test(name))).toEqual([]);
  });

  test("regression #5b: code Pi loads never uses Bun's import.meta.dir / dirname / filename (Pi's jiti loader replaces them; import.meta.url stays)", () => {
    const forbidden = /import\.meta\.(?:dir|dirname|filename)\b/;
    const offenders: string[] = [];
    for (const root of ["src", "extensions"]) {
      for (const file of sourceFiles(join(REPO_ROOT, root), /\.(?:[cm]?[jt]sx?)$/))
        if (forbidden.test(readFileSync(file, "utf8"))) offenders.push(relative(REPO_ROOT, file));
    }
    expect(offenders).toEqual([]);
  });

  // Extension tests will add: startup retry, agent_end error containment and the status line clearing.
  test("regression #6: a failed startup can be retried; pass failures are reported, not thrown; a clean pass reports no failures", async () => {
    const proxy = createFaultProxy({ target: fx.relay.url });
    fx.defer(() => proxy.stop());
    const host = createMemoryHost();
    const core = createConfiguredTaskCore({
      url: proxy.url,
      callerSession: `startup-${crypto.randomUUID().slice(0, 8)}`,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      host,
    });
    fx.defer(() => core.close());
    proxy.push({ operation: "connect", kind: "reply", status: 503, body: relayError("RELAY_UNAVAILABLE", {}, undefined) });
    const first = await failure(core.run((current) => current.connect()));
    expect(first.code).toBe("RELAY_UNAVAILABLE");
    expect(first.retryable).toBe(true);
    expect(core.recovering()).toBe(false);
    const bound = await core.run((current) => current.connect());
    expect(bound.relay).toBe(RELAY_ID);

    proxy.push({ operation: "receive", kind: "status-429" });
    const degraded = await core.refresh();
    expect(degraded.failures.get("intake")?.code).toBe("RELAY_CAPACITY");
    const clean = await core.refresh();
    expect(clean.failures.size).toBe(0);
    expect(core.current().endpoint()).toEqual(bound);
  });

  test("regression #7: an in-flight pass, send, ACK or insertion that finishes after close() writes and presents nothing", async () => {
    // A receive reply that arrives after close (the transport ignored the abort).
    {
      const w = await fakeWorld({ wrap: ignoringAbort });
      await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "late page" }));
      let replyAt = 0;
      w.relay.hook("receive", async () => {
        await w.timers.timeout(100);
        replyAt = w.timers.now();
      });
      const pass = w.worker.core.refresh().then(
        () => "resolved",
        (error: TaskError) => error.code,
      );
      await w.timers.advance(50);
      const closing = w.worker.core.close();
      await w.drive(closing);
      await w.drive(pass);
      await w.timers.advance(200);
      expect(replyAt).toBeGreaterThan(0);
      expect(coreInternals(w.worker.core).store.stats().records).toBe(0);
      expect(w.worker.host.inserted).toEqual([]);
      expect(() => w.worker.core.refresh()).toThrow();
    }
    // An ACK and a send whose replies arrive after close.
    {
      const w = await fakeWorld({ wrap: ignoringAbort });
      const created = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "late ack" }));
      let acked = 0;
      w.relay.hook("acknowledge", async () => {
        await w.timers.timeout(100);
        acked += 1;
      });
      const acksBefore = w.relay.count("acknowledge");
      const pass = w.worker.core.refresh().catch(() => undefined);
      for (let tries = 0; tries < 100 && w.relay.count("acknowledge") === acksBefore; tries += 1) await w.timers.advance(1);
      w.relay.hook("send", () => w.timers.timeout(100));
      const message = w.origin.core
        .message({ taskId: created.taskId, type: "information", message: "late send" })
        .catch((error: TaskError) => error);
      await w.timers.advance(10);
      await w.drive(Promise.all([w.worker.core.close(), w.origin.core.close()]));
      await w.drive(pass);
      expect(await w.drive(message)).toBeInstanceOf(TaskError);
      await w.timers.advance(500);
      expect(acked).toBe(1);
      expect(coreInternals(w.worker.core).store.stats().records).toBe(0);
      expect(coreInternals(w.origin.core).store.stats().records).toBe(0);
      expect(w.worker.host.inserted.length).toBe(1);
      expect(w.origin.host.inserted.length).toBe(0);
    }
    // A Pi insertion that completes after close: close drains it, then discards everything.
    {
      const insertion = deferred<boolean>();
      const host = createMemoryHost();
      let inserting = 0;
      host.insert = () => {
        inserting += 1;
        return insertion.promise;
      };
      const w = await fakeWorld({ workerHost: host, wrap: ignoringAbort });
      await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "slow insert" }));
      const pass = w.worker.core.refresh().catch(() => undefined);
      for (let tries = 0; tries < 100 && inserting === 0; tries += 1) await w.timers.advance(1);
      expect(inserting).toBe(1);
      let closed = false;
      const closing = w.worker.core.close().then(() => {
        closed = true;
      });
      await w.timers.advance(10);
      expect(closed).toBe(false);
      insertion.resolve(true);
      await w.drive(closing);
      await w.drive(pass);
      expect(coreInternals(w.worker.core).store.stats().records).toBe(0);
      expect(coreInternals(w.worker.core).store.getEvidence("anything")).toBeUndefined();
      const wakesBefore = host.wakes.length;
      await w.timers.advance(500);
      expect(host.wakes.length).toBe(wakesBefore);
    }
  });

  test("regression #8: two endpoints' stores never share state; one core never sends another's envelope", async () => {
    const w = await fakeWorld();
    const third = await w.party("third");
    for (const from of [w.origin, w.worker]) await introduce(from.core, third.core, (core) => w.drive(core.refresh()));
    expect(coreInternals(w.origin.core).store).not.toBe(coreInternals(w.worker.core).store);
    // The origin's envelope to the third party is stuck in a capacity cooldown.
    let refuse = true;
    w.relay.hook("send", ({ session }) => {
      if (refuse && session === "origin") throw new TaskError("RELAY_CAPACITY", { details: { operation: "send" } });
    });
    const stuck = await failure(w.drive(w.origin.core.createTask({ to: third.core.endpoint()!, task: "stuck" })));
    expect(stuck.code).toBe("RELAY_CAPACITY");
    refuse = false;
    const sendsBySession = () => w.relay.requests.filter((request) => request.operation === "send").map((request) => request.session);
    const before = sendsBySession().length;
    // The worker and third party run passes and work of their own: never the origin's envelope.
    const own = await w.drive(w.worker.core.createTask({ to: third.core.endpoint()!, task: "own" }));
    await w.pass(w.worker);
    await w.pass(third);
    expect(
      sendsBySession()
        .slice(before)
        .every((session) => session !== "origin"),
    ).toBe(true);
    expect(coreInternals(w.origin.core).store.pendingOutboxCount()).toBe(1);
    expect(coreInternals(w.worker.core).store.getOutbox(stuck.details.envelopeId as string)).toBeUndefined();
    expect(coreInternals(third.core).store.getOutbox(stuck.details.envelopeId as string)).toBeUndefined();
    expect(w.origin.core.findTask(own.taskId)).toBeUndefined();
    expect(w.worker.core.findTask(stuck.details.taskId as string)).toBeUndefined();
    // Closing one lifetime clears only its own store.
    await w.drive(w.worker.core.close());
    expect(coreInternals(w.worker.core).store.stats().records).toBe(0);
    expect(w.origin.core.findTask(stuck.details.taskId as string)?.status).toBe("active");
    expect(third.core.findTask(own.taskId)?.status).toBe("active");
  });

  test("regression #9: a lease renewal — even after the lease lapsed at the relay — keeps the endpoint id", async () => {
    const r = await rig();
    // A lease shorter than the renewal window: every operation renews it first.
    const shortLeaseMs = 200;
    const party = await r.party({ leaseMs: shortLeaseMs });
    const first = party.core.endpoint()!;
    await Bun.sleep(shortLeaseMs + 100);
    const connectsOf = () =>
      r.proxy.requests().filter((request) => request.operation === "connect" && body(request).callerSession === party.name);
    const before = connectsOf().length;
    await party.core.refresh();
    const renewals = connectsOf();
    expect(renewals.length).toBeGreaterThan(before);
    // The renewal sends the lifetime's generation, so the relay keeps the same registration.
    expect(new Set(renewals.map((request) => (request.body as { generation: string }).generation)).size).toBe(1);
    expect(party.core.endpoint()).toEqual(first);
    const status = await coreInternals(party.core).session.transport.sessionStatus(party.name);
    expect((status.taskEndpoint as TaskEndpoint).id).toBe(first.id);
    expect(coreInternals(party.core).session.status()).toBe("ready");
  });

  test("regression #10: the lease is renewed inside the margin window (requestTimeoutMs + leaseRenewMarginMs before it ends), not after", async () => {
    const r = await rig();
    let offset = 0;
    const party = await r.party({ now: () => Date.now() + offset });
    const binding = coreInternals(party.core).session.binding()!;
    const renewAt = binding.leaseDeadline - (REQUEST_TIMEOUT_MS + leaseRenewMarginMs);
    const connects = () =>
      r.proxy.requests().filter((request) => request.operation === "connect" && body(request).callerSession === party.name).length;
    const base = connects();
    // Well before the window (a generous margin: a loaded machine may stall): no renewal.
    offset = renewAt - 1_000 - Date.now();
    await party.core.refresh();
    const early = connects() - base;
    // Just inside the window: exactly one renewal, same endpoint. (The clock goes back to real
    // time at once: a client clock ahead of the relay's would see every lease as nearly over.)
    offset = renewAt + 1 - Date.now();
    await party.core.connect();
    offset = 0;
    await party.core.refresh();
    const renewed = coreInternals(party.core).session.binding()!;
    expect({ early, inside: connects() - base, endpoint: renewed.endpoint }).toEqual({ early: 0, inside: 1, endpoint: binding.endpoint });
    // The renewal happened while the old lease was still valid.
    expect(renewAt).toBeLessThan(binding.leaseDeadline);
    expect(renewed.leaseDeadline).toBeGreaterThan(binding.leaseDeadline);
  });

  test("regression #11: one undeliverable envelope blocks no other send, receive or timeout, and its error stays its own", async () => {
    const w = await fakeWorld();
    const lost = await w.party("lost");
    await introduce(w.origin.core, lost.core, (core) => w.drive(core.refresh()));
    const sent: string[] = [];
    w.relay.hook("send", ({ body: request }) => {
      sent.push((request.envelope as { envelopeId: string }).envelopeId);
    });
    const toWorker = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "for the worker" }));
    const toLost = await w.drive(w.origin.core.createTask({ to: lost.core.endpoint()!, task: "for the lost one" }));
    const timed = await w.drive(
      w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "times out", timeoutMs: minTaskTimeoutMs }),
    );
    await w.pass(w.worker);
    await w.pass(lost);
    w.relay.unregister("lost");

    const blocked = await failure(w.drive(w.origin.core.message({ taskId: toLost.taskId, type: "information", message: "undeliverable" })));
    expect(blocked.code).toBe("TARGET_NOT_REGISTERED");
    expect(blocked.retryable).toBe(false);
    expect(blocked.details.delivery).toBe("blocked");
    // A quarantined envelope blocks nothing, not even younger mail to the same target.
    const next = await failure(
      w.drive(w.origin.core.message({ taskId: toLost.taskId, type: "information", message: "also undeliverable" })),
    );
    expect(next.code).toBe("TARGET_NOT_REGISTERED");
    // Mail to the worker leaves and reports only its own (successful) outcome.
    const fine = await w.drive(w.origin.core.message({ taskId: toWorker.taskId, type: "question", message: "still there?" }));
    expect(fine.authority).toBe("origin");
    await w.pass(w.worker);
    await w.drive(w.worker.core.done({ taskId: toWorker.taskId, status: "completed", summary: "yes" }));

    // With the model busy (queued messages), the origin still receives and canonicalizes.
    w.origin.host.busy = true;
    w.wall.jump(minTaskTimeoutMs);
    const report = await w.pass(w.origin);
    expect(report.intake.fetched).toBeGreaterThanOrEqual(1);
    expect(report.intake.timedOut).toBe(1);
    expect(w.origin.core.getTask(toWorker.taskId).status).toBe("completed");
    expect(w.origin.core.getTask(timed.taskId).status).toBe("timed_out");
    expect([...report.failures.values()].map((error) => error.code)).not.toContain("TARGET_NOT_REGISTERED");
    // Quarantined envelopes were attempted once each and never again.
    for (let round = 0; round < 3; round += 1) {
      await w.timers.advance(capacityCooldownMs);
      await w.pass(w.origin);
    }
    const quarantined = coreInternals(w.origin.core)
      .store.listQuarantine()
      .map((entry) => entry.envelopeId);
    expect(quarantined.length).toBe(2);
    for (const id of quarantined) expect(sent.filter((item) => item === id).length).toBe(1);
    w.origin.host.busy = false;
    await w.settle();
    expect(w.worker.core.getTask(timed.taskId).status).toBe("timed_out");
  });

  test("regression #12: relay errors keep their retryable flag through the client and the core", async () => {
    const r = await rig();
    const to = r.worker.core.endpoint()!;
    const cases: { name: string; rule: Record<string, unknown>; code: string; retryable: boolean }[] = [
      { name: "Wolfpack 429", rule: { kind: "status-429" }, code: "RELAY_CAPACITY", retryable: true },
      { name: "typed capacity", rule: { kind: "capacity" }, code: "RELAY_CAPACITY", retryable: true },
      { name: "dropped reply", rule: { kind: "drop-reply" }, code: "RELAY_UNAVAILABLE", retryable: true },
      {
        name: "unavailable said non-retryable",
        rule: { kind: "reply", status: 503, body: relayError("RELAY_UNAVAILABLE", { retryable: false }) },
        code: "RELAY_UNAVAILABLE",
        retryable: true,
      },
      {
        name: "peer unreachable said non-retryable",
        rule: { kind: "reply", status: 503, body: relayError("PEER_UNREACHABLE", { retryable: false }) },
        code: "PEER_UNREACHABLE",
        retryable: true,
      },
      {
        name: "store unavailable",
        rule: { kind: "reply", status: 503, body: relayError("STORE_UNAVAILABLE") },
        code: "STORE_UNAVAILABLE",
        retryable: true,
      },
      {
        name: "unknown retryable code",
        rule: { kind: "reply", status: 503, body: relayError("FUTURE_CODE", { retryable: true }) },
        code: "FUTURE_CODE",
        retryable: true,
      },
      {
        name: "unknown final code",
        rule: { kind: "reply", status: 400, body: relayError("FUTURE_CODE", { retryable: false }) },
        code: "FUTURE_CODE",
        retryable: false,
      },
      {
        name: "invalid request",
        rule: { kind: "reply", status: 400, body: relayError("INVALID_REQUEST", { retryable: true }) },
        code: "INVALID_REQUEST",
        retryable: false,
      },
      {
        name: "target not registered",
        rule: { kind: "reply", status: 404, body: relayError("TARGET_NOT_REGISTERED", { retryable: true }) },
        code: "TARGET_NOT_REGISTERED",
        retryable: false,
      },
    ];
    for (const { name, rule, code, retryable } of cases) {
      r.proxy.push({
        operation: "send",
        ...rule,
        when: (request: ProxyRequest) => clearPayload(body(request).envelope?.payload)?.payload?.task?.task === name,
      } as Parameters<FaultProxy["push"]>[0]);
      const error = await failure(r.origin.core.createTask({ to, task: name }));
      expect({ name, code: error.code, retryable: error.retryable, operation: error.details.operation }).toEqual({
        name,
        code,
        retryable,
        operation: "send",
      });
      // A refusal for good creates no task; a retryable failure keeps one, its assignment pending.
      expect({ name, taskId: typeof error.details.taskId }).toEqual({ name, taskId: retryable ? "string" : "undefined" });
      await drain([r.origin, r.worker], { timers: r.timers });
    }
    // Background retries report the flag too.
    const created = await r.origin.core.createTask({ to, task: "retried" });
    r.proxy.push({ operation: "send", kind: "status-429", times: 2, when: fromEndpoint(r.origin.core.endpoint()!) });
    await failure(r.origin.core.message({ taskId: created.taskId, type: "information", message: "first refusal" }));
    r.timers.jump(capacityCooldownMs);
    const report = await r.origin.core.refresh();
    expect(report.failures.get("retry")?.code).toBe("RELAY_CAPACITY");
    expect(report.failures.get("retry")?.retryable).toBe(true);
  });

  test("regression #13: TARGET_NOT_REGISTERED is quarantined and never retried; after endpoint rotation old-source envelopes and the cursor are gone", async () => {
    const r = await rig();
    const gone = await r.party();
    await introduce(r.origin.core, gone.core);
    const task = await r.origin.core.createTask({ to: gone.core.endpoint()!, task: "to a leaver" });
    await gone.core.refresh();
    await coreInternals(gone.core).session.disconnect();
    const blocked = await failure(r.origin.core.message({ taskId: task.taskId, type: "information", message: "never arrives" }));
    expect(blocked.code).toBe("TARGET_NOT_REGISTERED");
    expect(blocked.retryable).toBe(false);
    const cancel = await r.origin.core.cancel({ taskId: task.taskId });
    expect(cancel.delivery).toBe("blocked");
    // The worker was known lost (the message's refusal): its refusal of the cancel is no news.
    expect({ workerLost: cancel.workerLost, warnings: cancel.warnings }).toEqual({ workerLost: true, warnings: [] });
    for (let round = 0; round < 4; round += 1) {
      r.timers.jump(capacityCooldownMs * 2);
      await r.origin.core.refresh();
    }
    expect(sendsOf(r.proxy, blocked.details.envelopeId as string).length).toBe(1);
    expect(coreInternals(r.origin.core).store.getQuarantine(blocked.details.envelopeId as string)?.errorCode).toBe("TARGET_NOT_REGISTERED");
    expect(coreInternals(r.origin.core).store.pendingOutboxCount()).toBe(0);

    // Endpoint rotation (a rebind of a configured core): the same lifetime moves to the new endpoint.
    const host = createMemoryHost();
    const rotating = createConfiguredTaskCore({
      url: r.proxy.url,
      callerSession: `rotating-${crypto.randomUUID().slice(0, 8)}`,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      host,
      timers: r.timers,
    });
    fx.defer(() => rotating.close());
    const old = await rotating.run((core) => core.connect());
    await introduce(rotating.current(), r.worker.core);
    const held = await rotating.run((core) => core.createTask({ to: r.worker.core.endpoint()!, task: "before rotation" }));
    await r.worker.core.refresh();
    r.proxy.push({ operation: "send", kind: "capacity", times: Number.POSITIVE_INFINITY, when: fromEndpoint(old) });
    const pending = await failure(
      rotating.run((core) => core.message({ taskId: held.taskId, type: "information", message: "pending at rotation" })),
    );
    expect(pending.code).toBe("RELAY_CAPACITY");
    r.proxy.push({
      operation: "receive",
      kind: "reply",
      status: 409,
      body: relayError("RELAY_RESET", { mayHaveBeenDelivered: true }, crypto.randomUUID()),
      when: fromEndpoint(old),
    });
    expect((await failure(rotating.refresh())).code).toBe("RELAY_RESET");
    await rotating.settled();
    const fresh = rotating.current();
    expect(fresh.endpoint()!.id).not.toBe(old.id);
    // The held message was re-addressed from the new endpoint; nothing leaves from the old one.
    const mark = r.proxy.requests().length;
    for (let round = 0; round < 3; round += 1) {
      r.timers.jump(capacityCooldownMs * 2);
      await rotating.refresh();
    }
    const oldSource = r.proxy
      .requests()
      .slice(mark)
      .filter((request) => request.operation === "send" && body(request).envelope?.source?.id === old.id);
    expect(oldSource).toEqual([]);
    expect(coreInternals(fresh).store.checkpoint()).toEqual({ frontier: "0", highWater: "0" });
    expect(coreInternals(fresh).store.pendingOutboxCount()).toBe(0);
    expect(fresh.listTasks().map((task) => [task.taskId, task.origin.id])).toEqual([[held.taskId, fresh.endpoint()!.id]]);
    await r.worker.core.refresh();
    expect(
      r.worker.host.inserted.filter(
        (item) =>
          item.taskId === held.taskId && (item.event?.payload as { message?: string } | undefined)?.message === "pending at rotation",
      ).length,
    ).toBe(1);
  });

  test("regression #14: a pass that repeats (ACK, receipt or wake not done yet) never inserts an item twice", async () => {
    const w = await fakeWorld();
    const created = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "insert me once" }));
    let failAck = true;
    w.relay.hook("acknowledge", () => {
      if (failAck) throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "acknowledge" } });
    });
    for (let round = 0; round < 4; round += 1) await w.pass(w.worker);
    expect(w.worker.host.inserted.length).toBe(1);
    expect(w.worker.host.wakes.length).toBe(1);
    failAck = false;
    await w.pass(w.worker);
    expect(coreInternals(w.worker.core).store.pendingDeliveryCount()).toBe(0);

    // Wake not observed: inserted once, woken once when the wake works.
    w.worker.host.refuseWake = true;
    const question = await w.drive(w.origin.core.message({ taskId: created.taskId, type: "question", message: "wake?" }));
    for (let round = 0; round < 3; round += 1) await w.pass(w.worker);
    w.worker.host.refuseWake = false;
    await w.pass(w.worker);
    // Insertion not observed: retried until observed, then once.
    w.worker.host.refuseInsert = true;
    const info = await w.drive(w.origin.core.message({ taskId: created.taskId, type: "information", message: "insert?" }));
    for (let round = 0; round < 3; round += 1) await w.pass(w.worker);
    expect(w.worker.host.insertedIds()).not.toContain(info.eventId!);
    w.worker.host.refuseInsert = false;
    // Receipts failing: presented, not ACKed, not re-presented.
    let failReceipts = true;
    w.relay.hook("send", ({ session }) => {
      if (failReceipts && session === "worker") throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "send" } });
    });
    const last = await w.drive(w.origin.core.message({ taskId: created.taskId, type: "information", message: "receipt?" }));
    for (let round = 0; round < 3; round += 1) {
      await w.pass(w.worker);
      await w.timers.advance(capacityCooldownMs);
    }
    expect(coreInternals(w.worker.core).store.pendingDeliveryCount()).toBeGreaterThan(0);
    failReceipts = false;
    await w.settle();
    const ids = w.worker.host.insertedIds();
    for (const eventId of [question.eventId!, info.eventId!, last.eventId!]) expect(ids.filter((id) => id === eventId).length).toBe(1);
    expect(new Set(ids).size).toBe(ids.length);
    expect(w.worker.host.wakes.flat().filter((item) => item.eventId === question.eventId).length).toBe(1);
    expect(coreInternals(w.worker.core).store.pendingDeliveryCount()).toBe(0);
  });

  test("regression #15: done/ack retries reuse their ids, a conflicting status is rejected, an ACK before terminal is rejected without mutation", async () => {
    const w = await fakeWorld();
    const created = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "retry me" }));
    await w.pass(w.worker);
    const sent: { session: string; envelopeId: string }[] = [];
    let failing: string | undefined = "worker";
    w.relay.hook("send", ({ session, body: request }) => {
      sent.push({ session, envelopeId: (request.envelope as { envelopeId: string }).envelopeId });
      if (session === failing) throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "send" } });
    });
    const done = { taskId: created.taskId, status: "completed" as const, summary: "done" };
    const first = await failure(w.drive(w.worker.core.done(done)));
    expect(first.retryable).toBe(true);
    const delivery = first.details.terminalDelivery as { state: string; intentId: string; envelopeId: string };
    expect(delivery.state).toBe("pending");
    const second = await failure(w.drive(w.worker.core.done(done)));
    expect((second.details.terminalDelivery as { intentId: string }).intentId).toBe(delivery.intentId);
    expect((second.details.terminalDelivery as { envelopeId: string }).envelopeId).toBe(delivery.envelopeId);
    const conflict = await failure(w.drive(w.worker.core.done({ ...done, status: "failed" })));
    expect(conflict.code).toBe("TERMINAL_INTENT_CONFLICT");
    expect(conflict.retryable).toBe(false);
    expect(conflict.details).toMatchObject({ existingType: "task.completed", requestedType: "task.failed" });
    failing = undefined;
    const accepted = await w.drive(w.worker.core.done(done));
    expect(accepted.terminalDelivery).toMatchObject({ state: "accepted", intentId: delivery.intentId, envelopeId: delivery.envelopeId });
    const workerSends = sent.filter((entry) => entry.session === "worker").map((entry) => entry.envelopeId);
    expect(new Set(workerSends)).toEqual(new Set([delivery.envelopeId]));

    // ACK before terminal: rejected, nothing written, nothing sent.
    const snapshot = () => {
      const { rowReads: _reads, rowParses: _parses, cachedBytes: _cached, ...rest } = coreInternals(w.origin.core).store.stats();
      return JSON.stringify([rest, w.origin.core.getTask(created.taskId)]);
    };
    const before = snapshot();
    const sendsBefore = sent.length;
    const early = await failure(w.drive(w.origin.core.acknowledge({ taskId: created.taskId })));
    expect(early.code).toBe("TASK_NOT_TERMINAL");
    expect(early.retryable).toBe(false);
    expect(snapshot()).toBe(before);
    expect(sent.length).toBe(sendsBefore);

    // ACK retries after terminal: one event, one envelope id.
    await w.pass(w.origin);
    expect(w.origin.core.getTask(created.taskId).status).toBe("completed");
    failing = "origin";
    const ackFailed = await failure(w.drive(w.origin.core.acknowledge({ taskId: created.taskId })));
    expect(ackFailed.retryable).toBe(true);
    failing = undefined;
    const ack = await w.drive(w.origin.core.acknowledge({ taskId: created.taskId }));
    const acks = eventsOfType(w.origin.core, created.taskId, "task.parent_acknowledged");
    expect(acks.map((event) => event.eventId)).toEqual([ack.eventId]);
    const ackEnvelope = coreInternals(w.origin.core).store.getOperation(created.taskId, "parent_acknowledgment")!.envelopeIds[0]!;
    const originSends = sent.filter((entry) => entry.session === "origin" && entry.envelopeId === ackEnvelope);
    expect(originSends.length).toBe(2);
    // The origin's own terminal calls conflict the same way.
    const own = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "origin done" }));
    await w.drive(w.origin.core.done({ taskId: own.taskId, status: "completed", summary: "by the origin" }));
    const ownConflict = await failure(w.drive(w.origin.core.done({ taskId: own.taskId, status: "failed", summary: "no" })));
    expect(ownConflict.code).toBe("TERMINAL_INTENT_CONFLICT");
    expect(eventsOfType(w.origin.core, own.taskId, "task.completed").length).toBe(1);
  });

  // Extension tests will add: the worker tool gate (PI_TASK_WORKER=1) before assignment and after done.
  test("regression #16: (gate, core part) an incorporated assignment exists only in this lifetime's RAM", async () => {
    const w = await fakeWorld();
    const created = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "only in RAM" }));
    // Not incorporated before intake.
    expect(w.worker.core.findTask(created.taskId)).toBeUndefined();
    expect((await failure(w.drive(w.worker.core.message({ taskId: created.taskId, type: "information", message: "early" })))).code).toBe(
      "UNKNOWN_TASK",
    );
    await w.pass(w.worker);
    expect(w.worker.core.getTask(created.taskId).role).toBe("worker");
    expect(w.worker.core.getTask(created.taskId).deliveryEvidence.piInsertion).toBe("confirmed");
    await w.drive(w.worker.core.close());
    expect(coreInternals(w.worker.core).store.stats().records).toBe(0);
    // A new lifetime for the same session: a fresh endpoint, nothing known, nothing replayed.
    const next = await w.party("worker");
    expect(next.core.endpoint()!.id).not.toBe(w.worker.core.endpoint()!.id);
    expect(next.core.findTask(created.taskId)).toBeUndefined();
    await w.pass(next);
    expect(next.core.listTasks()).toEqual([]);
    expect(next.host.inserted).toEqual([]);
    expect((await failure(w.drive(next.core.done({ taskId: created.taskId, status: "completed", summary: "from history" })))).code).toBe(
      "UNKNOWN_TASK",
    );
  });

  test("regression #17: an auto-ACKed later delivery never moves the frontier past an unacknowledged earlier one", async () => {
    const w = await fakeWorld();
    const to = w.worker.core.endpoint()!;
    const first = await w.drive(w.origin.core.createTask({ to, task: "first" }));
    await w.pass(w.worker);
    w.worker.host.busy = true;
    const held = await w.drive(w.origin.core.createTask({ to, task: "held assignment" }));
    await w.drive(w.worker.core.done({ taskId: first.taskId, status: "completed", summary: "done" }));
    // The origin canonicalizes the completion and echoes it to the worker: not model-visible there.
    await w.pass(w.origin);
    await w.pass(w.worker);
    const pending = coreInternals(w.worker.core).store.getDelivery(held.envelopeId)!;
    expect(pending.stage).toBe("recorded");
    // The later, non-visible echo was archived and ACKed; the held assignment was not.
    const atRelay = w.relay.mailbox(to.id);
    expect(atRelay.map((item) => item.envelopeId)).toEqual([held.envelopeId]);
    const checkpoint = coreInternals(w.worker.core).store.checkpoint();
    expect(BigInt(checkpoint.highWater)).toBeGreaterThan(BigInt(pending.cursor));
    expect(BigInt(checkpoint.frontier)).toBeLessThan(BigInt(pending.cursor));
    expectFrontierBelowPending(coreInternals(w.worker.core).store);
    for (let round = 0; round < 3; round += 1) {
      await w.pass(w.worker);
      expect(BigInt(coreInternals(w.worker.core).store.checkpoint().frontier)).toBeLessThan(BigInt(pending.cursor));
    }
    w.worker.host.busy = false;
    await w.pass(w.worker);
    expect(coreInternals(w.worker.core).store.pendingDeliveryCount()).toBe(0);
    expect(coreInternals(w.worker.core).store.checkpoint().frontier).toBe(coreInternals(w.worker.core).store.checkpoint().highWater);
    expect(w.relay.mailbox(to.id)).toEqual([]);
  });

  test("regression #18: retries after a lost reply resend the identical envelope, createdAt included; the relay dedupes instead of ENVELOPE_CONFLICT", async () => {
    const r = await rig();
    const jumpMs = maxEnvelopeFutureSkewMs / 2;
    r.proxy.push({ operation: "send", kind: "drop-reply", when: (request) => body(request).envelope?.payload?.kind === "assignment" });
    const lost = await failure(r.origin.core.createTask({ to: r.worker.core.endpoint()!, task: "same bytes" }));
    const envelopeId = lost.details.envelopeId as string;
    // Time moves on: a regenerated createdAt would differ.
    r.clock.jump(jumpMs);
    await r.origin.core.refresh();
    const assignment = sendsOf(r.proxy, envelopeId);
    expect(assignment.length).toBe(2);
    expect(JSON.stringify(body(assignment[1]!).envelope)).toBe(JSON.stringify(body(assignment[0]!).envelope));
    expect(coreInternals(r.origin.core).store.getOutbox(envelopeId)?.acceptance?.duplicate).toBe(true);

    await r.worker.core.refresh();
    const terminal = (request: ProxyRequest) => {
      const payload = clearPayload(body(request).envelope?.payload);
      return payload?.kind === "intent" && payload.payload?.type === "task.completed";
    };
    r.proxy.push({ operation: "send", kind: "drop-reply", when: terminal });
    const taskId = lost.details.taskId as string;
    const done = { taskId, status: "completed" as const, summary: "done once" };
    const dropped = await failure(r.worker.core.done(done));
    expect(dropped.retryable).toBe(true);
    r.clock.jump(jumpMs);
    const retried = await r.worker.core.done(done);
    expect(retried.terminalDelivery.state).toBe("accepted");
    const intents = r.proxy.requests().filter((request) => request.operation === "send" && terminal(request));
    expect(intents.length).toBe(2);
    expect(JSON.stringify(body(intents[1]!).envelope)).toBe(JSON.stringify(body(intents[0]!).envelope));
    await drain([r.origin, r.worker], { timers: r.timers });
    expect(coreInternals(r.origin.core).store.listQuarantine()).toEqual([]);
    expect(coreInternals(r.worker.core).store.listQuarantine()).toEqual([]);
    expect(r.origin.core.getTask(taskId).status).toBe("completed");
    expectAllPresentedOnce(r.origin, r.worker);
  });

  test("regression #19: envelope endpoint references are validated: forged assignments, intents and events are rejected and never stall the inbox", async () => {
    const w = await fakeWorld();
    const rogue = await w.party("rogue");
    const origin = w.origin.core.endpoint()!;
    const worker = w.worker.core.endpoint()!;
    const self = rogue.core.endpoint()!;
    const real = await w.drive(w.origin.core.createTask({ to: worker, task: "real" }));
    await w.settle();
    const now = Date.UTC(2026, 10, 30, 12);
    const forgedTask = (overrides: Partial<TaskRecord>): TaskRecord => ({
      taskId: crypto.randomUUID(),
      protocolVersion: "pi-tasks/v2",
      origin,
      target: worker,
      task: "forged",
      createdAt: now,
      expiresAt: now + 60_000,
      status: "active",
      ...overrides,
    });
    const cases: { name: string; to: FakeParty; envelope: () => Record<string, unknown>; code: string }[] = [
      {
        name: "an assignment claiming another origin",
        to: w.worker,
        envelope: () => {
          const task = forgedTask({});
          return forged(
            self,
            worker,
            task.taskId,
            "assignment",
            { task, event: makeEvent(task, "task.created", "1", now, { task: task.task }) },
            now,
          );
        },
        code: "INVALID_ASSIGNMENT",
      },
      {
        name: "an assignment whose event endpoints disagree with its task",
        to: w.worker,
        envelope: () => {
          const task = forgedTask({ origin: self });
          const event = { ...makeEvent(task, "task.created", "1", now, { task: task.task }), target: self };
          return forged(self, worker, task.taskId, "assignment", { task, event }, now);
        },
        code: "INVALID_ASSIGNMENT",
      },
      {
        name: "an intent from someone who is not the task's target",
        to: w.origin,
        envelope: () => forged(self, origin, real.taskId, "intent", makeIntent(real.taskId, "task.completed", { summary: "forged" }), now),
        code: "UNAUTHORIZED_INTENT",
      },
      {
        name: "a canonical event not sent by the task's origin",
        to: w.worker,
        envelope: () => {
          const task = w.worker.core.getTask(real.taskId);
          const event = makeEvent(task, "task.cancelled", "99", now, { summary: "forged cancel" });
          return forged(self, worker, real.taskId, "canonical_event", event, now);
        },
        code: "INVALID_EVENT",
      },
    ];
    for (const { name, to, envelope, code } of cases) {
      const tasksBefore = JSON.stringify(to.core.listTasks());
      const insertedBefore = to.host.inserted.length;
      await w.drive(coreInternals(rogue.core).session.send(encodedEnvelope(envelope() as { envelopeId: string })));
      const report = await w.pass(to);
      expect({ name, code: report.failures.get("intake")?.code }).toEqual({ name, code });
      expect(JSON.stringify(to.core.listTasks())).toBe(tasksBefore);
      expect(to.host.inserted.length).toBe(insertedBefore);
      // Rejected deliveries are ACKed: the inbox does not stall.
      expect(w.relay.mailbox(to.core.endpoint()!.id)).toEqual([]);
      expect(coreInternals(to.core).store.pendingDeliveryCount()).toBe(0);
    }
    expect(w.worker.core.getTask(real.taskId).status).toBe("active");
    expect(w.origin.core.getTask(real.taskId).status).toBe("active");
    const after = await w.drive(w.origin.core.message({ taskId: real.taskId, type: "information", message: "still flowing" }));
    await w.pass(w.worker);
    expect(w.worker.host.insertedIds()).toContain(after.eventId!);
  });

  test("regression #20: capacity refusals release their slots; 401 never resets; pending forwarding, a missing profile or an oversized reply never count as acceptance", async () => {
    const r = await rig();
    const to = r.worker.core.endpoint()!;
    // More sequential capacity refusals than there are slots: none leaks.
    r.proxy.push({
      operation: "receive",
      kind: "status-429",
      times: 2 * (maxInFlightRequests + reservedRequestSlots),
      when: fromEndpoint(to),
    });
    for (let round = 0; round < 2 * (maxInFlightRequests + reservedRequestSlots); round += 1) {
      const report = await r.worker.core.refresh();
      expect(report.failures.get("intake")?.code).toBe("RELAY_CAPACITY");
    }
    expect(coreInternals(r.worker.core).session.transport.usage()).toEqual({ ordinary: 0, reserved: 0, waiting: 0 });
    expect((await r.worker.core.refresh()).failures.size).toBe(0);

    // Replies that are not a confirmed acceptance leave the envelope pending.
    const notAccepted: { name: string; rule: Record<string, unknown>; code: string }[] = [
      {
        name: "forwarding pending",
        rule: { kind: "rewrite", rewrite: (reply: { value: Record<string, unknown> }) => ((reply.value.forwarding = "pending"), reply) },
        code: "INVALID_ACCEPTANCE",
      },
      { name: "no profile", rule: { kind: "wrong-profile" }, code: "RELAY_PROFILE_REQUIRED" },
      { name: "oversized", rule: { kind: "oversized" }, code: "INVALID_RESPONSE" },
    ];
    const taskIds: string[] = [];
    for (const { name, rule, code } of notAccepted) {
      r.proxy.push({
        operation: "send",
        ...rule,
        when: (request: ProxyRequest) => clearPayload(body(request).envelope?.payload)?.payload?.task?.task === name,
      } as Parameters<FaultProxy["push"]>[0]);
      const error = await failure(r.origin.core.createTask({ to, task: name }));
      expect({ name, code: error.code }).toEqual({ name, code });
      const envelopeId = error.details.envelopeId as string;
      expect(coreInternals(r.origin.core).store.getOutbox(envelopeId)?.state).toBe("pending");
      expect(r.origin.core.getTask(error.details.taskId as string).deliveryEvidence.relayAcceptance).toBe("pending");
      taskIds.push(error.details.taskId as string);
      await drain([r.origin, r.worker], { timers: r.timers });
      expect(coreInternals(r.origin.core).store.getOutbox(envelopeId)?.state).toBe("accepted");
    }
    for (const taskId of taskIds) expect(r.worker.host.inserted.filter((item) => item.taskId === taskId).length).toBe(1);

    // 401 is RELAY_AUTH_REQUIRED: reported, never a reset or a recovery.
    const host = createMemoryHost();
    const configured = createConfiguredTaskCore({
      url: r.proxy.url,
      callerSession: `auth-${crypto.randomUUID().slice(0, 8)}`,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      host,
    });
    fx.defer(() => configured.close());
    const bound = await configured.run((core) => core.connect());
    r.proxy.push({ operation: "receive", kind: "reply", status: 401, body: { error: "unauthorized" }, when: fromEndpoint(bound) });
    const report = await configured.refresh();
    expect(report.failures.get("intake")?.code).toBe("RELAY_AUTH_REQUIRED");
    expect(report.failures.get("intake")?.retryable).toBe(false);
    expect(configured.recovering()).toBe(false);
    expect(configured.session.status()).toBe("ready");
    expect(configured.current().endpoint()).toEqual(bound);
  });

  test("regression #21: late replies never touch the new binding; the same lifetime is re-homed and its pending mail re-addressed", async () => {
    const { proxy, party } = faultSetup(fx, REQUEST_TIMEOUT_MS);
    const worker = await party();
    const host = createMemoryHost();
    let recoveries = 0;
    const configured = createConfiguredTaskCore({
      url: proxy.url,
      callerSession: `successor-${crypto.randomUUID().slice(0, 8)}`,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      host,
      onRecovered: () => {
        recoveries += 1;
      },
    });
    fx.defer(() => configured.close());
    await configured.run((core) => core.connect());
    await introduce(configured.current(), worker.core);
    const created = await configured.run((core) => core.createTask({ to: worker.core.endpoint()!, task: "before the rebind" }));
    const core = configured.current();
    const oldEndpoint = core.endpoint()!;
    // A send that reaches the relay only after the binding was replaced.
    const lateMs = REQUEST_TIMEOUT_MS - 100;
    proxy.push({ operation: "send", kind: "delay", ms: lateMs, when: fromEndpoint(oldEndpoint) });
    const late = configured
      .run((current) => current.message({ taskId: created.taskId, type: "information", message: "late" }))
      .catch((error: TaskError) => error);
    await proxy.waitFor((stats) => (stats.operations.send?.faulted ?? 0) >= 1);
    // The relay's state is kept (same epoch after the rebind): only this side moves.
    proxy.push({
      operation: "receive",
      kind: "reply",
      status: 409,
      body: relayError("RELAY_RESET", { mayHaveBeenDelivered: true }, crypto.randomUUID()),
      when: fromEndpoint(oldEndpoint),
    });
    expect((await failure(configured.refresh())).code).toBe("RELAY_RESET");
    await settlesWithin(configured.settled(), "recovery");
    const newBinding = configured.session.binding()!;
    expect(newBinding.endpoint.id).not.toBe(oldEndpoint.id);
    expect(await late).toBeInstanceOf(TaskError);
    await proxy.waitFor((stats) => stats.inFlight === 0 && (stats.operations.send?.forwarded ?? 0) >= 2);
    await Bun.sleep(50);
    // The late reply changed nothing: one recovery, the new binding untouched, the same lifetime.
    expect(recoveries).toBe(1);
    expect(configured.session.status()).toBe("ready");
    expect(configured.session.binding()).toEqual(newBinding);
    expect(configured.current()).toBe(core);
    expect(core.getTask(created.taskId).origin).toEqual(newBinding.endpoint);
    expect(core.getTask(created.taskId).target).toEqual(worker.core.endpoint()!);
    // Same relay state: no wait for the peer (which did not move).
    expect(core.getTask(created.taskId).attention).toBeUndefined();
    // The message that was in flight is re-addressed from the new endpoint and arrives once.
    await drain([{ core: configured.current() }, worker]);
    const messages = worker.host.inserted.filter(
      (item) => item.taskId === created.taskId && (item.event?.payload as { message?: string } | undefined)?.message === "late",
    );
    expect(messages.length).toBe(1);
    expect(coreInternals(core).store.pendingOutboxCount()).toBe(0);
    // And the lifetime keeps working.
    const fresh = await configured.run((current) => current.createTask({ to: worker.core.endpoint()!, task: "after the rebind" }));
    await worker.core.refresh();
    expect(worker.host.inserted.map((item) => item.taskId)).toContain(fresh.taskId);
    expect(recoveries).toBe(1);
  });

  test("regression #22: only RELAY_RESET / RELAY_REBIND_REQUIRED trigger recovery; transient, auth, capacity, abort, profile and malformed failures never do", async () => {
    const { proxy, party } = faultSetup(fx, REQUEST_TIMEOUT_MS);
    const worker = await party();
    const host = createMemoryHost();
    let recoveries = 0;
    const timers = createJumpTimers();
    const configured = createConfiguredTaskCore({
      url: proxy.url,
      callerSession: `policy-${crypto.randomUUID().slice(0, 8)}`,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      host,
      timers,
      onRecovered: () => {
        recoveries += 1;
      },
    });
    fx.defer(() => configured.close());
    const created = await configured.run((core) => core.createTask({ to: worker.core.endpoint()!, task: "survives transient failures" }));
    const bound = configured.current().endpoint()!;
    const transient: { name: string; rule: Record<string, unknown>; code: string }[] = [
      { name: "429", rule: { kind: "status-429" }, code: "RELAY_CAPACITY" },
      { name: "capacity", rule: { kind: "capacity", retryAfterMs: 10 }, code: "RELAY_CAPACITY" },
      { name: "unavailable", rule: { kind: "drop-reply" }, code: "RELAY_UNAVAILABLE" },
      { name: "timeout", rule: { kind: "delay", ms: REQUEST_TIMEOUT_MS + 200 }, code: "RELAY_TIMEOUT" },
      { name: "auth", rule: { kind: "reply", status: 401, body: { error: "unauthorized" } }, code: "RELAY_AUTH_REQUIRED" },
      { name: "profile", rule: { kind: "wrong-profile" }, code: "RELAY_PROFILE_REQUIRED" },
      { name: "malformed", rule: { kind: "malformed-json" }, code: "INVALID_RESPONSE" },
    ];
    for (const { name, rule, code } of transient) {
      proxy.push({ operation: "receive", ...rule, when: fromEndpoint(bound) } as Parameters<FaultProxy["push"]>[0]);
      const report = await configured.refresh();
      expect({ name, code: report.failures.get("intake")?.code }).toEqual({ name, code });
      expect(configured.recovering()).toBe(false);
      expect(configured.current().endpoint()).toEqual(bound);
      // A configuration refusal holds relay work for a while (never a recovery): let it pass.
      if (errorSpec(code).holdsSending) timers.jump(maxConfigHoldMs);
    }
    // A caller abort is no loss either.
    const aborted = await failure(configured.run((core) => core.connect({ signal: AbortSignal.abort() })));
    expect(aborted.code).not.toBe("RELAY_RESET");
    expect(configured.recovering()).toBe(false);
    expect(recoveries).toBe(0);
    expect(configured.current().getTask(created.taskId).status).toBe("active");

    // A structured reset does: a fresh endpoint is bound and the task moves to it, without a wake.
    const insertedBefore = host.inserted.length;
    const wakesBefore = host.wakes.length;
    proxy.push({
      operation: "receive",
      kind: "reply",
      status: 409,
      body: relayError("RELAY_RESET", { mayHaveBeenDelivered: true }, crypto.randomUUID()),
      when: fromEndpoint(bound),
    });
    expect((await failure(configured.refresh())).code).toBe("RELAY_RESET");
    await settlesWithin(configured.settled(), "recovery");
    expect(recoveries).toBe(1);
    expect(host.inserted.length).toBe(insertedBefore);
    expect(host.wakes.length).toBe(wakesBefore);
    expect(configured.current().endpoint()!.id).not.toBe(bound.id);
    const kept = configured.current().getTask(created.taskId);
    expect({ status: kept.status, origin: kept.origin }).toEqual({ status: "active", origin: configured.current().endpoint()! });
  });

  test("regression #23: a parent ACK during a deferred wake or wake-receipt flush leaves exactly one wake", async () => {
    // Origin side: the completion's wake is still in flight when the parent ACKs.
    {
      const originHost = createMemoryHost();
      const wakeGate = deferred<boolean>();
      let wakeCalls = 0;
      const plainWake = originHost.wake.bind(originHost);
      originHost.wake = (items) => {
        wakeCalls += 1;
        return wakeCalls === 1 ? wakeGate.promise.then((ok) => ok && (plainWake(items) as boolean)) : plainWake(items);
      };
      const w = await fakeWorld({ originHost });
      const created = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "ack during wake" }));
      await w.pass(w.worker);
      await w.drive(w.worker.core.done({ taskId: created.taskId, status: "completed", summary: "done" }));
      const pass = w.origin.core.refresh();
      for (let tries = 0; tries < 100 && wakeCalls === 0; tries += 1) await w.timers.advance(1);
      expect(wakeCalls).toBe(1);
      await w.drive(w.origin.core.acknowledge({ taskId: created.taskId }));
      wakeGate.resolve(true);
      await w.drive(pass);
      for (let round = 0; round < 3; round += 1) await w.settle(1);
      const completion = eventsOfType(w.origin.core, created.taskId, "task.completed")[0]!;
      expect(originHost.insertedIds().filter((id) => id === completion.eventId).length).toBe(1);
      expect(originHost.wakes.flat().filter((item) => item.eventId === completion.eventId).length).toBe(1);
      expect(wakeCalls).toBe(1);
    }
    // Origin side, wake not observed: the ACK that follows suppresses any second wake.
    {
      const w = await fakeWorld();
      const created = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "unobserved wake" }));
      await w.pass(w.worker);
      await w.drive(w.worker.core.done({ taskId: created.taskId, status: "completed", summary: "done" }));
      let wakeCalls = 0;
      w.origin.host.wake = () => {
        wakeCalls += 1;
        return false;
      };
      await w.pass(w.origin);
      expect(wakeCalls).toBe(1);
      await w.drive(w.origin.core.acknowledge({ taskId: created.taskId }));
      for (let round = 0; round < 3; round += 1) await w.settle(1);
      const completion = eventsOfType(w.origin.core, created.taskId, "task.completed")[0]!;
      expect(w.origin.host.insertedIds().filter((id) => id === completion.eventId).length).toBe(1);
      expect(wakeCalls).toBe(1);
      expect(coreInternals(w.origin.core).store.localPresentations()).toEqual([]);
    }
    // Worker side: the wake_accepted receipt flush is deferred while the parent ACK arrives.
    {
      const w = await fakeWorld();
      const created = await w.drive(w.origin.core.createTask({ to: w.worker.core.endpoint()!, task: "receipt deferred" }));
      await w.pass(w.worker);
      await w.drive(w.origin.core.cancel({ taskId: created.taskId }));
      let failReceipts = true;
      w.relay.hook("send", ({ session }) => {
        if (failReceipts && session === "worker") throw new TaskError("RELAY_UNAVAILABLE", { details: { operation: "send" } });
      });
      await w.pass(w.worker);
      const cancelled = eventsOfType(w.origin.core, created.taskId, "task.cancelled")[0]!;
      expect(w.worker.host.wakes.flat().filter((item) => item.eventId === cancelled.eventId).length).toBe(1);
      await w.drive(w.origin.core.acknowledge({ taskId: created.taskId }));
      await w.pass(w.worker);
      failReceipts = false;
      await w.settle();
      expect(w.worker.host.insertedIds().filter((id) => id === cancelled.eventId).length).toBe(1);
      expect(w.worker.host.wakes.flat().filter((item) => item.eventId === cancelled.eventId).length).toBe(1);
      expect(coreInternals(w.worker.core).store.pendingDeliveryCount()).toBe(0);
      await w.pass(w.origin);
      expect(w.origin.core.getTask(created.taskId).deliveryEvidence.receiverReceipt).toBe("confirmed");
    }
  });

  test("regression #24: harness traps: no eager rejects-matcher on a promise anywhere in tests/, and subprocess-heavy tests raise their timeout", () => {
    const eager = new RegExp(["\\.", "rejects", "\\b"].join(""));
    const spawnCall = /\b(?:startRelayProcess|Bun\.spawn|spawn)\s*\(/g;
    const offenders: string[] = [];
    const heavy: string[] = [];
    const files = sourceFiles(join(REPO_ROOT, "tests"), /\.[cm]?[jt]sx?$/);
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) {
      const code = stripComments(readFileSync(file, "utf8"));
      if (eager.test(code)) offenders.push(relative(REPO_ROOT, file));
      if (!/\.test\.[cm]?[jt]sx?$/.test(file)) continue;
      // Each test body with more than maxInFlightRequests subprocess starts (a loop counts as many)
      // needs a raised timeout: setDefaultTimeout in the file or an explicit per-test timeout.
      const raised = /setDefaultTimeout\s*\(\s*[1-9][\d_]{4,}/.test(code);
      for (const block of testBlocks(code)) {
        const calls = (block.body.match(spawnCall) ?? []).length;
        const looped = loopBodies(block.body).some((loop) => new RegExp(spawnCall.source).test(loop));
        if ((calls > maxInFlightRequests || looped) && !raised && !block.explicitTimeout)
          heavy.push(`${relative(REPO_ROOT, file)}: ${block.name}`);
      }
    }
    expect(offenders).toEqual([]);
    expect(heavy).toEqual([]);
  });
});

/** Files under `root` whose name matches `pattern` (recursively, skipping node_modules). */
function sourceFiles(root: string, pattern: RegExp): string[] {
  const out: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync(root);
  } catch {
    return out;
  }
  for (const name of entries) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const path = join(root, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path, pattern));
    else if (pattern.test(name)) out.push(path);
  }
  return out;
}

/** Source without comments (block comments, and line comments not inside a URL). */
function stripComments(code: string): string {
  return code.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

/** The bodies of `for`/`while` loops and `Array.from(…)` calls in a piece of code (brace matched). */
function loopBodies(code: string): string[] {
  const bodies: string[] = [];
  for (const match of code.matchAll(/\b(?:for|while)\s*\(|Array\.from\s*\(/g)) {
    let index = (match.index ?? 0) + match[0].length - 1;
    // Skip the loop header's parentheses (or take Array.from's arguments whole).
    const header = balanced(code, index, "(", ")");
    if (match[0].startsWith("Array")) {
      bodies.push(code.slice(index, header));
      continue;
    }
    index = header;
    while (index < code.length && /\s/.test(code[index]!)) index += 1;
    if (code[index] === "{") bodies.push(code.slice(index, balanced(code, index, "{", "}")));
    else bodies.push(code.slice(index, code.indexOf(";", index) + 1 || code.length));
  }
  return bodies;
}

/** The index just after the bracket that closes the one at `start`. */
function balanced(code: string, start: number, open: string, close: string): number {
  let depth = 0;
  for (let index = start; index < code.length; index += 1) {
    if (code[index] === open) depth += 1;
    else if (code[index] === close && --depth === 0) return index + 1;
  }
  return code.length;
}

/** Rough test blocks: `test(`/`it(` calls with their body up to the next test, and a trailing numeric timeout. */
function testBlocks(code: string): { name: string; body: string; explicitTimeout: boolean }[] {
  const starts = [...code.matchAll(/\b(?:test|it)(?:\.\w+)?\s*\(\s*(["'`])((?:\\.|(?!\1).)*)\1/g)];
  return starts.map((match, index) => {
    const begin = match.index ?? 0;
    const end = index + 1 < starts.length ? (starts[index + 1]!.index ?? code.length) : code.length;
    const body = code.slice(begin, end);
    return {
      name: match[2]!,
      body,
      explicitTimeout: /\}\s*,\s*[1-9][\d_]*\s*\)\s*;?\s*$/.test(body.trimEnd()) || /\btimeout\s*:\s*[1-9]/.test(body),
    };
  });
}
