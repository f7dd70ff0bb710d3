/**
 * A seeded random fault schedule.
 *
 * 1. `RUNS` runs on the in-memory fake relay with virtual timers (fast): random interleavings of
 *    createTask / message / done / cancel / parent ACK / passes, busy or refusing hosts, task
 *    timeouts, and relay faults — refusals before the operation (RELAY_UNAVAILABLE,
 *    RELAY_CAPACITY with or without retryAfterMs), lost replies after it took effect
 *    (RELAY_TIMEOUT / RELAY_UNAVAILABLE with mayHaveBeenDelivered) and delays on virtual time.
 * 2. `REAL_RUNS` smaller runs against the real relay (its CLI) through the fault proxy.
 *
 * Each run then drains with faults off and checks the invariants of docs/architecture.md:
 * - no model-visible event lost or inserted twice within a lifetime;
 * - mail to one target accepted by the relay in creation order (outbox `seq`);
 * - the ACK frontier below every pending delivery (and every delivery the relay still holds),
 *   checked after every pass;
 * - one terminal winner per task, both sides agree on the final status, and an accepted terminal
 *   intent becomes exactly one canonical event (the winner or a later `task.late_terminal`);
 * - no ACK before the receipt that justifies it (checked at the relay when the ACK arrives), and
 *   no intent ACKed before its canonical fan-out was accepted;
 * - bounded memory: store records/bytes within the store bounds, pending deliveries within
 *   `maxFetchedUnacknowledgedDeliveries`.
 * A failing run reports its seed; `SCHEDULE_SEED=<seed> SCHEDULE_RUNS=1` replays it.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createTaskCore, type TaskCore, coreInternals } from "../../src/core/task-core.ts";
import { createVirtualTimers, type VirtualTimers } from "../../testkit/virtual-timers.ts";
import { TaskError, toTaskError } from "../../src/protocol/errors.ts";
import { eventTypeRow } from "../../src/protocol/events.ts";
import { capacityCooldownMs, maxFetchedUnacknowledgedDeliveries, minTaskTimeoutMs } from "../../src/protocol/limits.ts";
import type { TaskEndpoint, TaskEnvelope, TaskEvent } from "../../src/protocol/schemas.ts";
import type { VolatileTaskSession } from "../../src/relay-client/session.ts";
import { createTaskStore, type TaskStore } from "../../src/store/task-store.ts";
import { createFakeRelay, type FakeRelay } from "../helpers/fake-relay.ts";
import { createFaultProxy, type FaultProxy } from "../../testkit/fault-proxy.ts";
import { drain, relayBacklog } from "../../testkit/drain.ts";
import { clearEnvelope, clearPayload, isHello } from "../../testkit/sealed.ts";
import { createJumpClock, createJumpTimers } from "../../testkit/jump-timers.ts";
import { createObservedParty, type ObservedParty } from "../../testkit/observed-party.ts";
import { closeParties } from "../../testkit/party.ts";
import {
  audienceOf,
  authorsFromReplies,
  expectedPresentations,
  type IntentAuthors,
  intentAuthors,
} from "../helpers/presentation-oracle.ts";
import { createMemoryHost, type MemoryHost } from "../../testkit/memory-host.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";

setDefaultTimeout(90_000);

const BASE_SEED = Number(process.env.SCHEDULE_SEED ?? 0x5eed0004);
const RUNS = Number(process.env.SCHEDULE_RUNS ?? 500);
const REAL_RUNS = Number(process.env.SCHEDULE_REAL_RUNS ?? 20);

// ---------------------------------------------------------------------------------------------
// seeded randomness
// ---------------------------------------------------------------------------------------------

interface Rand {
  next(): number;
  int(bound: number): number;
  chance(probability: number): boolean;
  pick<T>(items: readonly T[]): T;
}

/** mulberry32: a small, fast, seeded PRNG. */
function seeded(seed: number): Rand {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  return {
    next,
    int: (bound) => Math.floor(next() * bound),
    chance: (probability) => next() < probability,
    pick: (items) => items[Math.floor(next() * items.length)]!,
  };
}

// ---------------------------------------------------------------------------------------------
// shared invariant checks (collect violations instead of throwing, to report the seed)
// ---------------------------------------------------------------------------------------------

/** Error codes the schedule's own faults and operations may legitimately produce. */
const EXPECTED_CODES = new Set([
  "RELAY_UNAVAILABLE",
  "RELAY_CAPACITY",
  "RELAY_TIMEOUT",
  "INVALID_RESPONSE",
  "ABORTED",
  "TASK_DELIVERY_DEFERRED",
  "TERMINAL_INTENT_CONFLICT",
  "TASK_NOT_TERMINAL",
  "TASK_TERMINAL",
  "UNKNOWN_TASK",
]);
/** Failure codes a pass may report under the schedule's faults. */
const EXPECTED_PASS_CODES = new Set([
  "RELAY_UNAVAILABLE",
  "RELAY_CAPACITY",
  "RELAY_TIMEOUT",
  "INVALID_RESPONSE",
  "ABORTED",
  "TASK_DELIVERY_DEFERRED",
]);

interface Side {
  readonly name: string;
  readonly core: TaskCore;
  readonly host: MemoryHost;
}

function checkPassInvariants(side: Side, relayCursors: readonly bigint[] | undefined, violations: string[], where: string): void {
  const store = coreInternals(side.core).store;
  const frontier = BigInt(store.checkpoint().frontier);
  for (const row of store.deliveries()) {
    if (BigInt(row.cursor) <= frontier)
      violations.push(`${where}: ${side.name} frontier ${frontier} passes pending delivery at ${row.cursor}`);
  }
  for (const cursor of relayCursors ?? []) {
    if (cursor <= frontier) violations.push(`${where}: ${side.name} frontier ${frontier} passes relay-held delivery at ${cursor}`);
  }
  const stats = store.stats();
  if (stats.pendingDeliveries > maxFetchedUnacknowledgedDeliveries)
    violations.push(`${where}: ${side.name} holds ${stats.pendingDeliveries} pending deliveries`);
  if (stats.records > stats.maxRecords || stats.encodedBytes > stats.maxEncodedBytes)
    violations.push(`${where}: ${side.name} store over its bound`);
}

function checkPassReport(side: Side, report: { failures: ReadonlyMap<string, TaskError> }, violations: string[], where: string): void {
  for (const [kind, error] of report.failures) {
    if (!EXPECTED_PASS_CODES.has(error.code))
      violations.push(`${where}: ${side.name} pass failure ${kind} ${error.code}: ${error.message} ${JSON.stringify(error.details)}`);
  }
}

/** Final invariants after a full drain (faults off, presentable hosts); `authors`: the intents seen sent. */
function checkFinal(sides: readonly Side[], authors: IntentAuthors, violations: string[]): void {
  for (const side of sides) {
    const ids = side.host.insertedIds();
    const dup = ids.filter((id, index) => ids.indexOf(id) !== index);
    if (dup.length > 0) violations.push(`${side.name} inserted ${dup.length} event(s) twice: ${dup.join(",")}`);
    const store = coreInternals(side.core).store;
    if (store.pendingOutboxCount() > 0) violations.push(`${side.name} still has ${store.pendingOutboxCount()} pending envelopes`);
    if (store.pendingDeliveryCount() > 0) violations.push(`${side.name} still has ${store.pendingDeliveryCount()} pending deliveries`);
    if (store.localPresentations().length > 0) violations.push(`${side.name} still has local presentations`);
    for (const entry of store.listQuarantine()) violations.push(`${side.name} quarantined ${entry.purpose} envelope: ${entry.errorCode}`);
    for (const task of store.listTasks()) {
      const terminals = task.events.filter((event) => eventTypeRow(event.type).terminalStatus !== null);
      if (terminals.length > 1) violations.push(`${side.name} task ${task.taskId} has ${terminals.length} terminal events`);
      if (terminals.length === 1 && task.status !== eventTypeRow(terminals[0]!.type).terminalStatus) {
        violations.push(`${side.name} task ${task.taskId} status ${task.status} disagrees with ${terminals[0]!.type}`);
      }
      if (terminals.length === 0 && task.status !== "active")
        violations.push(`${side.name} task ${task.taskId} is ${task.status} without a terminal event`);
    }
  }
  const inserted = new Map(sides.map((side) => [side.name, new Set(side.host.insertedIds())]));
  for (const origin of sides) {
    for (const task of coreInternals(origin.core).store.listTasks()) {
      if (task.role !== "origin") continue;
      const target = sides.find((side) => side.core.endpoint()?.id === task.target.id);
      if (target === undefined) continue;
      const copy = coreInternals(target.core).store.getTask(task.taskId);
      if (copy === undefined) {
        violations.push(`task ${task.taskId} never reached ${target.name}`);
        continue;
      }
      if (copy.status !== task.status) violations.push(`task ${task.taskId}: origin ${task.status}, target ${copy.status}`);
      // The target's terminal intent, once accepted, is canonical exactly once: as the terminal
      // winner or as a later `task.late_terminal`.
      const intent = coreInternals(target.core).store.getOperation(task.taskId, "terminal_intent");
      if (intent !== undefined && coreInternals(target.core).store.getOutbox(intent.envelopeIds[0]!)?.state === "accepted") {
        const canonical = task.events.filter((event) => (event.payload as { intentId?: unknown }).intentId === intent.logicalId);
        const types = canonical.map((event) => event.type);
        if (!(types.length === 1 && (types[0] === intent.logicalType || types[0] === "task.late_terminal"))) {
          violations.push(`task ${task.taskId}: terminal intent ${intent.logicalType} became [${types.join(",")}]`);
        }
      }
      const events = new Map(task.events.map((event) => [event.eventId, event]));
      const describe = (eventId: string) => `${events.get(eventId)!.type} ${eventId} of ${task.taskId}`;
      let expected: ReturnType<typeof expectedPresentations>;
      try {
        expected = expectedPresentations([task], authors);
      } catch (error) {
        violations.push(`task ${task.taskId}: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      for (const id of expected.atTarget)
        if (!inserted.get(target.name)!.has(id)) violations.push(`${describe(id)} never inserted at target ${target.name}`);
      for (const id of expected.atOrigin)
        if (!inserted.get(origin.name)!.has(id)) violations.push(`${describe(id)} never inserted at origin ${origin.name}`);
      for (const id of expected.neverAtTarget)
        if (inserted.get(target.name)!.has(id)) violations.push(`${describe(id)} inserted at target ${target.name}, which must not see it`);
      for (const id of expected.neverAtOrigin)
        if (inserted.get(origin.name)!.has(id)) violations.push(`${describe(id)} inserted at origin ${origin.name}, which must not see it`);
    }
  }
}

interface Accepted {
  readonly sender: string;
  readonly target: string;
  readonly envelopeId: string;
  readonly seq: number;
}

/** Mail from one sender to one target is accepted in creation (outbox `seq`) order. */
function checkFifo(accepted: readonly Accepted[], violations: string[]): void {
  const last = new Map<string, number>();
  for (const entry of accepted) {
    const key = `${entry.sender}->${entry.target}`;
    const previous = last.get(key);
    if (previous !== undefined && entry.seq <= previous)
      violations.push(`${key}: envelope seq ${entry.seq} accepted after seq ${previous}`);
    last.set(key, entry.seq);
  }
}

/** The receipt's event id, when an envelope carries a delivery receipt intent. */
function receiptEventOf(envelope: Record<string, unknown>): string | undefined {
  const payload = clearPayload(envelope.payload);
  if (payload?.kind !== "intent") return undefined;
  const intent = payload.payload as { type?: string; payload?: { eventId?: string; state?: string } };
  return intent.type === "task.delivery_receipt" && intent.payload?.state === "confirmed" ? intent.payload.eventId : undefined;
}

/**
 * Whether an ACK of this delivery is justified now: a presented model-visible item at the target
 * needs an accepted confirmed receipt of its event; a canonicalized intent needs its fan-out
 * accepted. Returns a violation text or undefined.
 */
function ackViolation(
  store: TaskStore,
  authors: IntentAuthors,
  envelopeId: string,
  receiptAccepted: (eventId: string) => boolean,
  fanoutAccepted: (envelopeId: string) => boolean,
): string | undefined {
  const row = store.getDelivery(envelopeId);
  if (row === undefined) return `ACK of untracked delivery ${envelopeId}`;
  const data = row.data as { eventId?: string; taskId?: string; requires?: string[] };
  if (row.stage === "tracked" || row.stage === "recorded") return `ACK of ${row.stage} delivery ${envelopeId} before presentation`;
  const task = data.taskId === undefined ? undefined : store.getStoredTask(data.taskId);
  if (row.stage === "presented" && task?.role === "worker") {
    const event = data.eventId === undefined ? undefined : store.getEvent(data.eventId);
    if (event === undefined) return `ACK of presented delivery ${envelopeId} whose event ${data.eventId} is unknown`;
    if (audienceOf(event, task.record, authors).target && !receiptAccepted(event.eventId))
      return `ACK of ${envelopeId} (event ${event.eventId}) before its receipt was accepted`;
  }
  if (row.stage === "canonicalized") {
    for (const id of data.requires ?? [])
      if (!fanoutAccepted(id)) return `ACK of intent ${envelopeId} before its fan-out ${id} was accepted`;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// 1. the fake relay
// ---------------------------------------------------------------------------------------------

interface FakeSide extends Side {
  readonly index: number;
}

interface KnownTask {
  readonly taskId: string;
  readonly origin: number;
  readonly target: number;
}

type FaultPlan = { readonly kind: "before"; readonly error: TaskError } | { readonly kind: "after"; readonly error: TaskError } | undefined;

/** Coverage counters over all fake runs (printed, and checked so the schedule cannot go idle). */
const coverage: Record<string, number> = {};
function count(key: string, by = 1): void {
  coverage[key] = (coverage[key] ?? 0) + by;
}

async function fakeRun(seed: number): Promise<{ violations: string[]; trace: string[] }> {
  const rand = seeded(seed);
  const violations: string[] = [];
  const trace: string[] = [];
  const timers: VirtualTimers = createVirtualTimers(1_000_000);
  const relay: FakeRelay = createFakeRelay(timers);
  let wall = Date.UTC(2026, 10, 30, 12);
  const clock = () => (wall += 1);
  const faults = { active: true, rate: rand.pick([0.05, 0.15, 0.3]), delayRate: rand.pick([0, 0.1, 0.3]) };
  const accepted: Accepted[] = [];
  const acceptedIds = new Set<string>();
  const receiptsAccepted = new Set<string>();
  const authors = intentAuthors();
  const sides: FakeSide[] = [];

  function plan(operation: string): FaultPlan {
    if (!faults.active || !rand.chance(faults.rate)) return undefined;
    const roll = rand.int(5);
    count(`fault ${operation} ${["unavailable", "capacity", "timeout", "lost-reply timeout", "lost-reply unavailable"][roll]}`);
    const details = { operation };
    if (roll === 0) return { kind: "before", error: new TaskError("RELAY_UNAVAILABLE", { details }) };
    if (roll === 1) {
      const retryAfterMs = rand.chance(0.5) ? rand.int(capacityCooldownMs * 2) : undefined;
      return {
        kind: "before",
        error: new TaskError("RELAY_CAPACITY", { details: { ...details, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) } }),
      };
    }
    if (roll === 2)
      return { kind: "before", error: new TaskError("RELAY_TIMEOUT", { details: { ...details, mayHaveBeenDelivered: true } }) };
    // Lost replies: the operation took effect, the reply never arrived.
    if (roll === 3)
      return { kind: "after", error: new TaskError("RELAY_TIMEOUT", { details: { ...details, mayHaveBeenDelivered: true } }) };
    return { kind: "after", error: new TaskError("RELAY_UNAVAILABLE", { details: { ...details, mayHaveBeenDelivered: true } }) };
  }

  async function delay(operation: string, signal: AbortSignal | undefined): Promise<void> {
    if (!faults.active || !rand.chance(faults.delayRate)) return;
    try {
      await timers.timeout(rand.int(600), signal);
    } catch {
      throw new TaskError("ABORTED", { details: { operation } });
    }
  }

  function faulty(inner: VolatileTaskSession, side: () => FakeSide): VolatileTaskSession {
    return {
      ...inner,
      async send(encoded, signal) {
        const envelope = JSON.parse(encoded.text) as Record<string, unknown>;
        authors.sent(envelope);
        await delay("send", signal);
        const fault = plan("send");
        if (fault?.kind === "before") throw fault.error;
        const acceptance = await inner.send(encoded, signal);
        const envelopeId = envelope.envelopeId as string;
        // Hellos leave outside the outbox (src/core/proofs.ts): they have no place in its order.
        if (!isHello(envelope) && !acceptance.duplicate && !acceptedIds.has(envelopeId)) {
          const store = coreInternals(side().core).store;
          const seq = store.getOutbox(envelopeId)?.seq ?? store.getQuarantine(envelopeId)?.seq ?? -1;
          accepted.push({ sender: side().name, target: (envelope.target as TaskEndpoint).id, envelopeId, seq });
          acceptedIds.add(envelopeId);
          const receipt = receiptEventOf(envelope);
          if (receipt !== undefined) receiptsAccepted.add(`${side().name}:${receipt}`);
        }
        if (fault?.kind === "after") throw fault.error;
        return acceptance;
      },
      async receive(cursor, options = {}) {
        await delay("receive", options.signal);
        const fault = plan("receive");
        if (fault?.kind === "before") throw fault.error;
        const page = await inner.receive(cursor, options);
        if (fault?.kind === "after") throw fault.error;
        return page;
      },
      async acknowledge(envelopeId, signal) {
        await delay("acknowledge", signal);
        const self = side();
        const problem = ackViolation(
          coreInternals(self.core).store,
          authors,
          envelopeId,
          (eventId) => receiptsAccepted.has(`${self.name}:${eventId}`),
          (id) => acceptedIds.has(id),
        );
        if (problem !== undefined) violations.push(`${self.name}: ${problem}`);
        count("ack checked");
        const fault = plan("acknowledge");
        if (fault?.kind === "before") throw fault.error;
        const result = await inner.acknowledge(envelopeId, signal);
        if (fault?.kind === "after") throw fault.error;
        return result;
      },
    };
  }

  const partyCount = rand.chance(0.3) ? 3 : 2;
  for (let index = 0; index < partyCount; index += 1) {
    const name = `p${index}`;
    const host = createMemoryHost();
    let self: FakeSide;
    const session = faulty(relay.session(name), () => self);
    const core = createTaskCore({ store: createTaskStore(), session, timers, clock, host });
    self = { name, index, core, host };
    sides.push(self);
    await core.connect();
  }

  const inflight = new Set<Promise<unknown>>();

  /** Drives virtual time until every in-flight operation settled. */
  async function settleAll(limitMs = 60_000): Promise<void> {
    let spent = 0;
    while (inflight.size > 0) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (inflight.size === 0) break;
      if (spent >= limitMs) {
        violations.push(`operations hung for ${limitMs} virtual ms`);
        return;
      }
      await timers.advance(10);
      spent += 10;
    }
  }

  function start(label: string, side: FakeSide, run: () => Promise<unknown>, onValue?: (value: unknown) => void): void {
    trace.push(label);
    const promise = run().then(
      (value) => onValue?.(value),
      (raw) => {
        const error = toTaskError(raw);
        count(`error ${error.code}`);
        if (error.code === "TASK_ERROR" || !(raw instanceof TaskError) || !EXPECTED_CODES.has(error.code)) {
          violations.push(`${label}: unexpected ${error.code}: ${error.message} ${JSON.stringify(error.details)}`);
        }
        if (label.startsWith("create") && typeof error.details.taskId === "string") onValue?.({ taskId: error.details.taskId });
      },
    );
    inflight.add(promise);
    promise.finally(() => inflight.delete(promise));
    void side;
  }

  function relayCursors(side: FakeSide): bigint[] {
    return relay.mailbox(side.core.endpoint()!.id).map((item) => item.cursor);
  }

  function pass(side: FakeSide, where: string): void {
    start(
      `${where}:refresh ${side.name}`,
      side,
      () => side.core.refresh(),
      (report) => {
        checkPassReport(side, report as { failures: ReadonlyMap<string, TaskError> }, violations, where);
        checkPassInvariants(side, relayCursors(side), violations, where);
      },
    );
  }

  const tasks: KnownTask[] = [];
  const steps = 15 + rand.int(35);
  let created = 0;
  for (let step = 0; step < steps; step += 1) {
    const roll = rand.int(100);
    const side = rand.pick(sides);
    if (roll < 18) {
      const others = sides.filter((other) => other !== side);
      const target = rand.pick(others);
      const short = rand.chance(0.2);
      const n = (created += 1);
      start(
        `create ${side.name}->${target.name} #${n}${short ? " short" : ""}`,
        side,
        () =>
          side.core.createTask(
            { to: target.core.endpoint()!, task: `task ${n}`, ...(short ? { timeoutMs: minTaskTimeoutMs } : {}) },
            { lineage: "root" },
          ),
        (value) => {
          const taskId = (value as { taskId?: string }).taskId;
          if (taskId !== undefined) tasks.push({ taskId, origin: side.index, target: target.index });
        },
      );
    } else if (roll < 32 && tasks.length > 0) {
      const task = rand.pick(tasks);
      const author = sides[rand.chance(0.5) ? task.origin : task.target]!;
      const known = author.core.findTask(task.taskId);
      if (known === undefined) continue;
      const question = known.events.find((event) => event.type === "task.question");
      const type = question !== undefined && rand.chance(0.3) ? "answer" : rand.pick(["question", "information"] as const);
      start(`message ${author.name} ${type} ${task.taskId.slice(0, 8)}`, author, () =>
        author.core.message({
          taskId: task.taskId,
          type,
          message: `${type} at ${step}`,
          ...(type === "answer" ? { inReplyTo: question!.eventId } : {}),
        }),
      );
    } else if (roll < 44 && tasks.length > 0) {
      // Prefer tasks the worker already has.
      const received = tasks.filter((task) => sides[task.target]!.core.findTask(task.taskId) !== undefined);
      const task = rand.pick(received.length > 0 ? received : tasks);
      const worker = sides[task.target]!;
      if (worker.core.findTask(task.taskId) === undefined) continue;
      const status = rand.pick(["completed", "completed", "failed", "cancelled"] as const);
      start(`done ${worker.name} ${status} ${task.taskId.slice(0, 8)}`, worker, () =>
        worker.core.done({ taskId: task.taskId, status, summary: `${status} at ${step}` }),
      );
    } else if (roll < 50 && tasks.length > 0) {
      const task = rand.pick(tasks);
      const origin = sides[task.origin]!;
      start(`cancel ${origin.name} ${task.taskId.slice(0, 8)}`, origin, () => origin.core.cancel({ taskId: task.taskId }));
    } else if (roll < 56 && tasks.length > 0) {
      const task = rand.pick(tasks);
      const origin = sides[task.origin]!;
      start(`ack ${origin.name} ${task.taskId.slice(0, 8)}`, origin, () => origin.core.acknowledge({ taskId: task.taskId }));
    } else if (roll < 80) {
      pass(side, `step ${step}`);
    } else if (roll < 88) {
      const flag = rand.pick(["busy", "refuseInsert", "refuseWake"] as const);
      side.host[flag] = !side.host[flag];
      trace.push(`${side.name}.${flag}=${side.host[flag]}`);
    } else if (roll < 91) {
      wall += minTaskTimeoutMs;
      trace.push("clock +timeout");
    } else {
      trace.push("settle");
      await settleAll();
      await timers.advance(rand.int(capacityCooldownMs));
    }
    if (rand.chance(0.3)) await settleAll();
  }
  await settleAll();

  // Drain with faults off.
  faults.active = false;
  for (const side of sides) {
    side.host.busy = false;
    side.host.refuseInsert = false;
    side.host.refuseWake = false;
  }
  let drained = false;
  for (let round = 0; round < 40 && !drained; round += 1) {
    for (const side of sides) pass(side, `drain ${round}`);
    await settleAll();
    drained = sides.every((side) => !side.core.hasPendingWork() && relay.mailbox(side.core.endpoint()!.id).length === 0);
    if (!drained) await timers.advance(capacityCooldownMs * 2 + 1);
  }
  if (!drained) violations.push("did not drain within 40 rounds");
  checkFinal(sides, authors, violations);
  checkFifo(accepted, violations);
  count("accepted envelopes", accepted.length);
  for (const side of sides) {
    count("inserted", side.host.inserted.length);
    count("wakes", side.host.wakes.length);
    for (const task of coreInternals(side.core).store.listTasks()) {
      if (task.role !== "origin") continue;
      count(`final ${task.status}`);
      for (const event of task.events)
        if (event.type === "task.late_terminal" || event.type === "task.parent_acknowledged") count(event.type);
    }
  }
  for (const side of sides) await side.core.close();
  return { violations, trace };
}

describe("seeded fault schedule", () => {
  test(`${RUNS} runs on the fake relay with random faults, interleavings and hosts keep every invariant`, async () => {
    const failures: string[] = [];
    const started = performance.now();
    for (let run = 0; run < RUNS; run += 1) {
      const seed = BASE_SEED + run;
      const { violations, trace } = await fakeRun(seed);
      if (violations.length > 0) failures.push(`seed ${seed}: ${violations.slice(0, 5).join(" | ")}\n  trace: ${trace.join("; ")}`);
      if (failures.length >= 5) break;
    }
    const elapsed = performance.now() - started;
    expect(failures).toEqual([]);
    console.log(
      `fault schedule: ${RUNS} fake-relay runs in ${Math.round(elapsed)} ms`,
      JSON.stringify(coverage, Object.keys(coverage).sort()),
    );
    if (RUNS >= 100) {
      // The schedule really exercises what it claims (so it cannot go idle unnoticed).
      for (const operation of ["send", "receive", "acknowledge"]) {
        for (const kind of ["unavailable", "capacity", "timeout", "lost-reply timeout", "lost-reply unavailable"])
          expect(coverage[`fault ${operation} ${kind}`] ?? 0).toBeGreaterThan(0);
      }
      for (const key of [
        "ack checked",
        "task.late_terminal",
        "task.parent_acknowledged",
        "final completed",
        "final failed",
        "final cancelled",
        "final timed_out",
        "error TERMINAL_INTENT_CONFLICT",
      ]) {
        expect({ key, seen: (coverage[key] ?? 0) > 0 }).toEqual({ key, seen: true });
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 2. the real relay through the fault proxy
// ---------------------------------------------------------------------------------------------

const REAL_TIMEOUT_MS = 500;

interface Seen {
  readonly envelope: TaskEnvelope;
  readonly cursor: bigint;
}

/** Every delivery a party got from the relay, by envelope id (from the replies it observed). */
function seenDeliveries(party: ObservedParty): Map<string, Seen> {
  const seen = new Map<string, Seen>();
  for (const entry of party.replies) {
    if (entry.operation !== "receive" || entry.reply?.ok !== true) continue;
    const deliveries = (entry.reply.value as { deliveries?: { cursor: string; envelope: TaskEnvelope }[] }).deliveries ?? [];
    for (const delivery of deliveries)
      if (!seen.has(delivery.envelope.envelopeId))
        seen.set(delivery.envelope.envelopeId, { envelope: clearEnvelope(delivery.envelope), cursor: BigInt(delivery.cursor) });
  }
  return seen;
}

/** The event a delivery carries when this (target) party's model must be shown it (the oracle). */
function visibleEventOf(authors: IntentAuthors, envelope: TaskEnvelope): TaskEvent | undefined {
  const payload = envelope.payload;
  if (payload.kind === "assignment") return payload.payload.event;
  if (payload.kind !== "canonical_event") return undefined;
  const event = payload.payload;
  return audienceOf(event, { origin: envelope.source, target: envelope.target }, authors).target ? event : undefined;
}

function checkRealOrdering(parties: readonly ObservedParty[], authors: IntentAuthors, violations: string[]): void {
  for (const receiver of parties) {
    const seen = [...seenDeliveries(receiver).values()].sort((a, b) => (a.cursor < b.cursor ? -1 : a.cursor > b.cursor ? 1 : 0));
    // Relay cursor order is acceptance order: per sender it must follow the sender's outbox seq.
    const last = new Map<string, number>();
    for (const item of seen) {
      const sender = parties.find((party) => party.core.endpoint()?.id === item.envelope.source.id);
      const seq = sender === undefined ? undefined : coreInternals(sender.core).store.getOutbox(item.envelope.envelopeId)?.seq;
      if (sender === undefined || seq === undefined) continue;
      const previous = last.get(sender.name);
      if (previous !== undefined && seq <= previous)
        violations.push(`${sender.name}->${receiver.name}: seq ${seq} accepted after seq ${previous}`);
      last.set(sender.name, seq);
    }
    // Every ACK request was preceded by the accepted receipt (or fan-out) that justifies it.
    const byId = seenDeliveries(receiver);
    const acceptedSends = receiver.replies.filter((entry) => entry.operation === "send" && entry.reply?.ok === true);
    const acceptedBefore = (startSeq: number, match: (envelope: Record<string, unknown>) => boolean) =>
      acceptedSends.some((entry) => entry.endSeq < startSeq && match(entry.request.envelope as Record<string, unknown>));
    for (const ack of receiver.replies.filter((entry) => entry.operation === "acknowledge")) {
      const envelopeId = ack.request.envelopeId as string;
      const item = byId.get(envelopeId);
      if (item === undefined) continue;
      const event = visibleEventOf(authors, item.envelope);
      if (event !== undefined && !acceptedBefore(ack.startSeq, (envelope) => receiptEventOf(envelope) === event.eventId)) {
        violations.push(`${receiver.name}: ACK of ${event.type} ${event.eventId} before its receipt was accepted`);
      }
      if (item.envelope.payload.kind === "intent") {
        const intent = item.envelope.payload.payload;
        const fanout = coreInternals(receiver.core).store.getOperation(intent.taskId, `intent:${intent.intentId}`)?.envelopeIds ?? [];
        for (const id of fanout) {
          if (!acceptedBefore(ack.startSeq, (envelope) => envelope.envelopeId === id))
            violations.push(`${receiver.name}: ACK of intent ${intent.intentId} before its fan-out was accepted`);
        }
      }
    }
  }
}

async function realRun(relayUrl: string, seed: number): Promise<{ violations: string[]; trace: string[] }> {
  const rand = seeded(seed);
  const violations: string[] = [];
  const trace: string[] = [];
  const proxy: FaultProxy = createFaultProxy({ target: relayUrl });
  const timers = createJumpTimers();
  const clock = createJumpClock();
  const parties: ObservedParty[] = [];
  const faults = { active: true };
  const on = (probability: number) => () => faults.active && rand.chance(probability);
  const operations = ["send", "receive", "acknowledge"];
  proxy.push({ operation: operations, kind: "drop-reply", times: Number.POSITIVE_INFINITY, when: on(0.15) });
  proxy.push({ operation: operations, kind: "status-429", times: Number.POSITIVE_INFINITY, when: on(0.1) });
  proxy.push({
    operation: ["send", "acknowledge"],
    kind: "capacity",
    retryAfterMs: capacityCooldownMs * 2,
    times: Number.POSITIVE_INFINITY,
    when: on(0.05),
  });
  proxy.push({ operation: "receive", kind: "malformed-json", times: Number.POSITIVE_INFINITY, when: on(0.04) });
  proxy.push({ operation: operations, kind: "delay", ms: REAL_TIMEOUT_MS + 100, times: Number.POSITIVE_INFINITY, when: on(0.03) });
  try {
    for (let index = 0; index < 2; index += 1) {
      parties.push(
        await createObservedParty({
          url: proxy.url,
          name: `real-${seed}-${index}-${crypto.randomUUID().slice(0, 8)}`,
          requestTimeoutMs: REAL_TIMEOUT_MS,
          timers,
          clock,
        }),
      );
    }
    const sides: Side[] = parties.map((party, index) => ({ name: `p${index}`, core: party.core, host: party.host }));
    const tasks: KnownTask[] = [];
    const record = (label: string) => (raw: unknown) => {
      const error = toTaskError(raw);
      if (!EXPECTED_CODES.has(error.code)) violations.push(`${label}: unexpected ${error.code}: ${error.message}`);
      return error;
    };
    const steps = 10 + rand.int(10);
    for (let step = 0; step < steps; step += 1) {
      const index = rand.int(2);
      const side = parties[index]!;
      const other = parties[1 - index]!;
      const roll = rand.int(100);
      if (roll < 25) {
        trace.push(`create p${index}`);
        const outcome = await side.core
          .createTask(
            { to: other.core.endpoint()!, task: `real ${step}`, ...(rand.chance(0.15) ? { timeoutMs: minTaskTimeoutMs } : {}) },
            { lineage: "root" },
          )
          .then(
            (value) => value.taskId,
            (raw) => record(`create p${index}`)(raw).details.taskId as string | undefined,
          );
        if (outcome !== undefined) tasks.push({ taskId: outcome, origin: index, target: 1 - index });
      } else if (roll < 40 && tasks.length > 0) {
        const task = rand.pick(tasks);
        const author = parties[rand.chance(0.5) ? task.origin : task.target]!;
        if (author.core.findTask(task.taskId) === undefined) continue;
        trace.push(`message ${task.taskId.slice(0, 8)}`);
        await author.core.message({ taskId: task.taskId, type: "information", message: `info ${step}` }).catch(record("message"));
      } else if (roll < 55 && tasks.length > 0) {
        const task = rand.pick(tasks);
        const worker = parties[task.target]!;
        if (worker.core.findTask(task.taskId) === undefined) continue;
        trace.push(`done ${task.taskId.slice(0, 8)}`);
        await worker.core
          .done({ taskId: task.taskId, status: rand.pick(["completed", "failed"] as const), summary: "done" })
          .catch(record("done"));
      } else if (roll < 62 && tasks.length > 0) {
        const task = rand.pick(tasks);
        trace.push(`cancel ${task.taskId.slice(0, 8)}`);
        await parties[task.origin]!.core.cancel({ taskId: task.taskId }).catch(record("cancel"));
      } else if (roll < 68 && tasks.length > 0) {
        const task = rand.pick(tasks);
        trace.push(`ack ${task.taskId.slice(0, 8)}`);
        await parties[task.origin]!.core.acknowledge({ taskId: task.taskId }).catch(record("ack"));
      } else if (roll < 75) {
        side.host.busy = !side.host.busy;
        trace.push(`p${index}.busy=${side.host.busy}`);
      } else if (roll < 78) {
        clock.jump(minTaskTimeoutMs);
        trace.push("clock +timeout");
      } else {
        trace.push(`refresh p${index}`);
        const report = await side.core.refresh();
        checkPassReport(sides[index]!, report, violations, `step ${step}`);
        checkPassInvariants(sides[index]!, undefined, violations, `step ${step}`);
      }
      if (rand.chance(0.2)) timers.jump(capacityCooldownMs * 2);
    }
    faults.active = false;
    for (const party of parties) party.host.busy = false;
    // Delayed requests still on their way reach the relay first.
    await proxy.waitFor((stats) => stats.inFlight === 0, 5_000);
    await drain(parties, { timers, cooldownMs: capacityCooldownMs * 2 });
    for (const side of sides) checkPassInvariants(side, undefined, violations, "drained");
    for (const party of parties) if ((await relayBacklog(party.core)) > 0) violations.push(`relay still holds mail for ${party.name}`);
    const authors = authorsFromReplies(parties);
    checkFinal(sides, authors, violations);
    checkRealOrdering(parties, authors, violations);
    count("real faulted", proxy.stats().total.faulted);
    count("real requests", proxy.stats().total.seen);
    count("real tasks", tasks.length);
    for (const party of parties) count("real inserted", party.host.inserted.length);
    for (const party of parties) count("real acks", party.replies.filter((entry) => entry.operation === "acknowledge").length);
  } catch (error) {
    violations.push(`run failed: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await closeParties(parties);
    await proxy.stop();
  }
  return { violations, trace };
}

describe("seeded fault schedule on the real relay", () => {
  let relay: RelayProcess;
  beforeAll(async () => {
    relay = await startRelayProcess();
  });
  afterAll(async () => {
    await relay?.stop();
  });

  test(`${REAL_RUNS} runs against the real relay through the fault proxy keep every invariant`, async () => {
    const failures: string[] = [];
    for (let run = 0; run < REAL_RUNS; run += 1) {
      const seed = BASE_SEED + 1_000_000 + run;
      const { violations, trace } = await realRun(relay.url, seed);
      if (violations.length > 0) failures.push(`seed ${seed}: ${violations.slice(0, 5).join(" | ")}\n  trace: ${trace.join("; ")}`);
    }
    expect(failures).toEqual([]);
    console.log(
      "real-relay schedule:",
      JSON.stringify(Object.fromEntries(Object.entries(coverage).filter(([key]) => key.startsWith("real")))),
    );
  });
});
