/**
 * Growth curves (issue 16, item 7): how a cost grows as the work it carries grows, each curve a
 * few points and a slope classified from them.
 *
 * - Relay cycles/s and delivery p95 against idle registered sessions: ONE relay process (child),
 *   idle sessions registered with raw `connect` POSTs (binding-secret-v1, as our client does, the
 *   longest lease so none lapses), and at each size a short raw-client cycles run (cycles.ts:
 *   send + receive + ACK, 1 KiB text, 4 senders) and a short delivery sample between a fresh pair
 *   of fake Pis (bench/lib/fake-pi.ts, the real extension stack with `watch-v1`): createTask
 *   accepted → the worker's ACK returned, one task at a time with a pause between. The relay
 *   refuses registrations beyond `relayMaxRegistrations` (RELAY_CAPACITY, by design), so the
 *   largest point fills the relay to its budget.
 * - Relay memory per registration: an in-process relay engine (as memory.ts does), JS heap after
 *   a full GC before and after registering N sessions through the engine, divided by N.
 * - Refresh-pass cost against store size: a TaskCore (kit/party.ts) on a relay process whose
 *   store holds archived terminal tasks of 100 events each, written through the store API as in
 *   refresh.ts; p50 of `refresh()` (nothing pending: one receive per pass).
 * - createTask p95 against active tasks: an origin TaskCore holding N active tasks (assigned to
 *   registered sinks that never answer); each sampled task goes to a worker TaskCore that
 *   completes it at once, and the origin takes the result in, so every sample sees N.
 *
 * Slopes: log–log between the first and last points with a nonzero x and value (for a rate, of
 * its inverse, the cost per cycle): < 0.2 flat, 0.2–1.2 ≈ linear, > 1.2 super-linear (a finding).
 */
import { heapStats } from "bun:jsc";
import { makeEvent } from "../../src/core/envelopes.ts";
import { coreInternals, type TaskCore } from "../../src/core/task-core.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { mintBindingSecret } from "../../src/protocol/wire.ts";
import {
  KiB,
  leaseMaxMs,
  maxStoreRecords,
  RELAY_ENDPOINT_PATH,
  RELAY_PROFILE,
  relayMaxMailboxItems,
  relayMaxRegistrations,
  TASK_PROTOCOL_VERSION,
  taskTimeoutDefaultMs,
  WIRE_PROTOCOL_VERSION,
} from "../../src/protocol/limits.ts";
import type { TaskEndpoint, TaskRecord } from "../../src/protocol/schemas.ts";
import { createRelayEngine, type RelayEngine } from "../../src/relay-server/engine.ts";
import { eventually } from "../../kit/async.ts";
import { closeParties, createParty, type Party } from "../../kit/party.ts";
import { boundEndpoint, type FakePi, startFakePi } from "../lib/fake-pi.ts";
import { now, pool, round, summarize } from "../lib/stats.ts";
import { benchName, filler, rawBinding } from "../lib/wire.ts";
import { runCycles } from "./cycles.ts";

// ---------------------------------------------------------------------------------------------
// Result shapes
// ---------------------------------------------------------------------------------------------

export interface GrowthPoint {
  readonly x: number;
  readonly value: number;
}

export interface GrowthCurve {
  /** Stable id (results.json). */
  readonly id: string;
  /** What is measured, with its unit. */
  readonly title: string;
  readonly xLabel: string;
  readonly unit: string;
  readonly points: readonly GrowthPoint[];
  /** One sentence computed from the points: the class and the figure behind it. */
  readonly slope: string;
  /** What the reader must know (sample sizes, a bound that capped a point). */
  readonly note?: string;
}

export interface GrowthCheck {
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

export interface GrowthResult {
  readonly curves: readonly GrowthCurve[];
  /** Integrity of the runs behind the curves (nothing lost, every sample completed). */
  readonly checks: readonly GrowthCheck[];
  readonly seconds: number;
}

// ---------------------------------------------------------------------------------------------
// Sizes, sample counts and timing
// ---------------------------------------------------------------------------------------------

/** Idle registered sessions at the relay points below the budget (the last point fills the budget). */
const IDLE_SIZES = [1, 100, 1_000];
const QUICK_IDLE_SIZES = [1, 10, 100];
/** What the issue asks for as the largest point; beyond the relay's registration budget. */
const ASKED_LARGEST_SESSIONS = 10_000;
/** Envelopes of each cycles run, and of the one warm-up run before the first point. */
const CYCLE_ENVELOPES = 1_200;
const QUICK_CYCLE_ENVELOPES = 60;
const WARMUP_CYCLE_ENVELOPES = 400;
const QUICK_WARMUP_CYCLE_ENVELOPES = 20;
/** Deliveries timed at each relay point (after warm-up deliveries on the fresh pair). */
const DELIVERY_SAMPLES = 40;
const QUICK_DELIVERY_SAMPLES = 4;
const DELIVERY_WARMUP = 3;
const QUICK_DELIVERY_WARMUP = 1;
/** Pause after each delivery, so the worker is idle with its watch parked before the next send. */
const DELIVERY_GAP_MS = 15;
/** A delivery not ACKed within this has stalled. */
const DELIVERY_TIMEOUT_MS = 5_000;
/** How often a wait re-checks its condition (the ACK time itself comes from the request log). */
const POLL_MS = 1;
/** Raw `connect` POSTs in flight while registering idle sessions (under the relay's admission limit). */
const CONNECT_CONCURRENCY = 8;

/** Registrations at the memory points (the last is the budget). */
const MEMORY_SIZES = [100, 1_000, relayMaxRegistrations];
const QUICK_MEMORY_SIZES = [10, 100];

/** Archived events at the refresh points: terminal tasks of `EVENTS_PER_ARCHIVED_TASK` events each. */
const REFRESH_EVENTS = [0, 1_000, 16_000];
const QUICK_REFRESH_EVENTS = [0, 100, 1_000];
const EVENTS_PER_ARCHIVED_TASK = 100;
/** Characters of each archived message (as refresh.ts). */
const ARCHIVED_MESSAGE_CHARS = 200;
const REFRESH_PASSES = 120;
const QUICK_REFRESH_PASSES = 8;
const REFRESH_WARMUP_PASSES = 20;
const QUICK_REFRESH_WARMUP_PASSES = 2;

/** Active tasks at the createTask points. */
const ACTIVE_TASK_SIZES = [1, 100, 1_000];
const QUICK_ACTIVE_TASK_SIZES = [1, 10, 100];
const CREATE_SAMPLES = 60;
const QUICK_CREATE_SAMPLES = 5;
const CREATE_WARMUP = 10;
const QUICK_CREATE_WARMUP = 2;
/** createTask calls in flight while filling the origin with active tasks (untimed). */
const FILL_CONCURRENCY = 4;
/** Task text of every created task (as acceptance.ts and delivery.ts). */
const TASK_TEXT_CHARS = KiB;

/** Log–log slope bounds of the classification. */
const FLAT_BELOW = 0.2;
const LINEAR_UP_TO = 1.2;
const PERCENT = 100;
const MS_PER_SECOND = 1_000;

// ---------------------------------------------------------------------------------------------
// Slopes and formatting
// ---------------------------------------------------------------------------------------------

/** Whether a curve's value is a cost (time, bytes) or a rate (higher is cheaper). */
type Sense = "cost" | "rate";

const formatNumber = (value: number, digits = 0): string => value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });

/** Digits that keep a value readable: 3 significant digits at least, whole numbers above 100. */
function readable(value: number): string {
  const magnitude = Math.abs(value);
  const digits = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3;
  return formatNumber(value, digits);
}

/** The log–log slope of cost against x between the first and last points with nonzero x and value. */
export function logLogSlope(points: readonly GrowthPoint[], sense: Sense = "cost"): { slope: number; first: GrowthPoint; last: GrowthPoint } | undefined {
  const usable = points.filter((point) => point.x > 0 && point.value > 0);
  if (usable.length < 2) return undefined;
  const first = usable[0]!;
  const last = usable[usable.length - 1]!;
  const slope = Math.log(last.value / first.value) / Math.log(last.x / first.x);
  return { slope: sense === "rate" ? -slope : slope, first, last };
}

/** A round per-x scale for a linear cost: per 1, per 1,000 … so the figure reads well. */
function perScale(perUnit: number): number {
  let scale = 1;
  while (Math.abs(perUnit * scale) < 0.1 && scale < 1e6) scale *= 1_000;
  return scale;
}

/** The slope sentence of a curve: its class and the figure that shows it. */
export function slopeSentence(points: readonly GrowthPoint[], labels: { readonly xLabel: string; readonly unit: string; readonly sense?: Sense }): string {
  const sense = labels.sense ?? "cost";
  const fit = logLogSlope(points, sense);
  if (fit === undefined) return "not enough points to state a slope";
  const { slope, first, last } = fit;
  const shown = `log–log slope ${formatNumber(slope, 2)}`;
  const at = `${formatNumber(last.x)} ${labels.xLabel}`;
  if (sense === "rate") {
    const share = Math.round((last.value / first.value) * PERCENT);
    const kind = slope < FLAT_BELOW ? "flat" : slope <= LINEAR_UP_TO ? "≈ linear (in cost per unit of work)" : "super-linear (a finding)";
    return `${kind}: with ${at} the rate is ${share} % of the rate with ${formatNumber(first.x)} (${shown} of the cost per unit of work)`;
  }
  const ratio = last.value / first.value;
  if (slope < FLAT_BELOW) return `flat: with ${at} it is ${formatNumber(ratio, 2)}× its value with ${formatNumber(first.x)} (${shown})`;
  const perUnit = (last.value - first.value) / (last.x - first.x);
  const scale = perScale(perUnit);
  const growth = `≈ ${readable(perUnit * scale)} ${labels.unit} more per ${formatNumber(scale)} ${labels.xLabel}`;
  if (slope <= LINEAR_UP_TO) return `≈ linear or less: ${growth}, ${formatNumber(ratio, 2)}× from ${formatNumber(first.x)} to ${formatNumber(last.x)} (${shown})`;
  return `super-linear (a finding): ${formatNumber(ratio, 2)}× from ${formatNumber(first.x)} to ${formatNumber(last.x)} ${labels.xLabel}, ${growth} on average (${shown})`;
}

function curve(fields: Omit<GrowthCurve, "slope"> & { readonly sense?: Sense }): GrowthCurve {
  const { sense, ...rest } = fields;
  return { ...rest, slope: slopeSentence(fields.points, { xLabel: fields.xLabel, unit: fields.unit, ...(sense === undefined ? {} : { sense }) }) };
}

export function growthMarkdown(result: GrowthResult): string {
  const lines = [
    "## Growth curves",
    "",
    `How cost grows as work grows, measured in one run (${formatNumber(result.seconds, 1)} s). The slope is the log–log slope between the first and last points with a nonzero x (for a rate: of the cost per unit of work): < ${FLAT_BELOW} flat, ${FLAT_BELOW}–${LINEAR_UP_TO} ≈ linear, > ${LINEAR_UP_TO} super-linear (a finding to fix or explain).`,
  ];
  for (const item of result.curves) {
    lines.push("", `### ${item.title}`, "", `| ${item.xLabel} | ${item.unit} |`, "|---:|---:|");
    for (const point of item.points) lines.push(`| ${formatNumber(point.x)} | ${readable(point.value)} |`);
    lines.push("", `Slope: ${item.slope}.`);
    if (item.note !== undefined) lines.push("", item.note);
  }
  const failed = result.checks.filter((check) => !check.ok);
  lines.push("", failed.length === 0 ? `Integrity: ${result.checks.map((check) => check.name).join("; ")} — all held.` : `Integrity FAILED: ${failed.map((check) => `${check.name} (${check.detail})`).join("; ")}.`);
  return `${lines.join("\n")}\n`;
}

// ---------------------------------------------------------------------------------------------
// Relay: cycles/s and delivery p95 against idle registered sessions
// ---------------------------------------------------------------------------------------------

/** One raw POST to the relay endpoint; the reply's value, or throws with its error code. */
async function relayPost(url: string, body: Record<string, unknown>): Promise<Record<string, any>> {
  const response = await fetch(`${url}${RELAY_ENDPOINT_PATH}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  const reply = (await response.json()) as { ok: boolean; value: Record<string, any>; error?: { code: string } };
  if (!reply.ok) throw new Error(`relay refused ${String(body.operation)}: ${reply.error?.code ?? response.status}`);
  return reply.value;
}

/** Registers `count` idle sessions (a secret each, the longest lease) with raw connects; resolves with refusals. */
async function registerIdle(url: string, count: number): Promise<number> {
  let refused = 0;
  await pool(count, CONNECT_CONCURRENCY, async () => {
    const body = {
      operation: "connect",
      profile: RELAY_PROFILE,
      callerSession: benchName("growth-idle"),
      generation: crypto.randomUUID(),
      protocolVersions: [WIRE_PROTOCOL_VERSION],
      leaseMs: leaseMaxMs,
      bindingSecret: mintBindingSecret(),
    };
    await relayPost(url, body).catch(() => {
      refused += 1;
    });
  });
  return refused;
}

/** The relay's registration count (health, through a raw binding of our own). */
async function registrations(url: string, probe: Record<string, unknown>): Promise<number> {
  const value = await relayPost(url, { operation: "health", ...probe });
  return Number(value.store.registrations);
}

interface DeliverySample {
  readonly ackMs: readonly number[];
  readonly unacknowledged: number;
  readonly watching: boolean;
}

/**
 * Delivery latency between a fresh pair of fake Pis: createTask accepted → the worker's relay ACK
 * returned (its request log's time), one task at a time, `DELIVERY_GAP_MS` apart.
 */
async function deliverySample(url: string, samples: number, warmup: number): Promise<DeliverySample> {
  let origin: FakePi | undefined;
  let worker: FakePi | undefined;
  try {
    worker = startFakePi({ url, worker: true });
    origin = startFakePi({ url, logRequests: false });
    const to = await boundEndpoint(worker);
    await boundEndpoint(origin);
    const watching = coreInternals(worker.core()).session.features().has("watch-v1");
    const text = filler(TASK_TEXT_CHARS);
    const ackMs: number[] = [];
    let unacknowledged = 0;
    for (let index = 0; index < warmup + samples; index += 1) {
      const created = await origin.lifecycle.run((core) => core.createTask({ to, task: text }));
      const acceptedAt = now();
      const log = worker.log;
      const acked = await eventually(() => log.ackedAt(created.envelopeId), DELIVERY_TIMEOUT_MS, POLL_MS);
      if (acked === undefined) unacknowledged += 1;
      else if (index >= warmup) ackMs.push(acked - acceptedAt);
      await Bun.sleep(DELIVERY_GAP_MS);
    }
    return { ackMs, unacknowledged, watching };
  } finally {
    await origin?.stop().catch(() => undefined);
    await worker?.stop().catch(() => undefined);
  }
}

interface RelayPoint {
  readonly idle: number;
  readonly registrations: number;
  readonly cyclesPerSecond: number;
  readonly deliveryP95Ms: number;
}

interface RelayCurves {
  readonly curves: GrowthCurve[];
  readonly checks: GrowthCheck[];
}

async function relayCurves(quick: boolean): Promise<RelayCurves> {
  const sizes = quick ? QUICK_IDLE_SIZES : IDLE_SIZES;
  const envelopes = quick ? QUICK_CYCLE_ENVELOPES : CYCLE_ENVELOPES;
  const samples = quick ? QUICK_DELIVERY_SAMPLES : DELIVERY_SAMPLES;
  const warmup = quick ? QUICK_DELIVERY_WARMUP : DELIVERY_WARMUP;
  const relay = await startRelayProcess();
  const points: RelayPoint[] = [];
  let lost = 0;
  let duplicates = 0;
  let unacknowledged = 0;
  let refused = 0;
  let watching = true;
  try {
    const probe = (await rawBinding(relay.url, "growth-probe")).base;
    await runCycles(relay.url, "raw", quick ? QUICK_WARMUP_CYCLE_ENVELOPES : WARMUP_CYCLE_ENVELOPES);
    let idle = 0;
    // Registrations one point's own clients add (cycles: receiver + senders; delivery: the pair).
    let perPoint = 0;
    const targets: (number | "budget")[] = quick ? sizes : [...sizes, "budget"];
    for (const target of targets) {
      const before = await registrations(relay.url, probe);
      const wanted = target === "budget" ? idle + (relayMaxRegistrations - before - perPoint) : target;
      refused += await registerIdle(relay.url, wanted - idle);
      idle = wanted;
      const held = await registrations(relay.url, probe);
      const run = await runCycles(relay.url, "raw", envelopes, { relayPid: relay.process.pid });
      lost += run.lost;
      duplicates += run.duplicates;
      const delivery = await deliverySample(relay.url, samples, warmup);
      unacknowledged += delivery.unacknowledged;
      watching &&= delivery.watching;
      const after = await registrations(relay.url, probe);
      perPoint = Math.max(perPoint, after - held);
      points.push({ idle, registrations: after, cyclesPerSecond: run.cyclesPerSecond, deliveryP95Ms: round(summarize(delivery.ackMs).p95, 2) });
    }
  } finally {
    await relay.stop().catch(() => undefined);
  }
  const largest = points[points.length - 1]!;
  const capped = quick
    ? `Quick run: ${sizes.join(", ")} idle sessions only.`
    : `The largest point is the relay's registration budget: ${formatNumber(ASKED_LARGEST_SESSIONS)} sessions are beyond relayMaxRegistrations = ${formatNumber(relayMaxRegistrations)} (refused with RELAY_CAPACITY by design), so there the relay holds ${formatNumber(largest.registrations)} registrations: ${formatNumber(largest.idle)} idle ones and the rest the measuring clients' (active and ended).`;
  const sessionsLabel = "idle registered sessions";
  const cycles = curve({
    id: "growth-relay-cycles",
    title: "Relay cycles/s (send + receive + ACK, raw client) against idle registered sessions",
    xLabel: sessionsLabel,
    unit: "cycles/s",
    sense: "rate",
    points: points.map((point) => ({ x: point.idle, value: point.cyclesPerSecond })),
    note: `One relay process; idle sessions registered with raw connects (binding secret, ${leaseMaxMs / MS_PER_SECOND} s lease) beside the active clients; at each point ${formatNumber(envelopes)} cycles of a 1 KiB text, 4 raw senders → 1 receiver (cycles.ts). ${capped}`,
  });
  const delivery = curve({
    id: "growth-delivery-p95",
    title: "Delivery p95 with watch-v1 (accepted → worker's ACK), ms, against idle registered sessions",
    xLabel: sessionsLabel,
    unit: "ms",
    points: points.map((point) => ({ x: point.idle, value: point.deliveryP95Ms })),
    note: `${samples} deliveries per point (after ${warmup} warm-up) between a fresh pair of fake Pis (real extension stack), one task at a time, ${DELIVERY_GAP_MS} ms apart (delivery.ts spaces them 100 ms apart instead). Same relay and points as the cycles curve.`,
  });
  const checks: GrowthCheck[] = [
    { name: "growth: relay cycles lose and duplicate nothing", ok: lost === 0 && duplicates === 0, detail: `lost ${lost}, duplicates ${duplicates}` },
    { name: "growth: every delivery acknowledged, over watch-v1", ok: unacknowledged === 0 && watching, detail: `unacknowledged ${unacknowledged}, watch-v1 ${watching ? "seen" : "missing"}` },
    { name: "growth: every idle registration accepted", ok: refused === 0, detail: `refused ${refused}` },
  ];
  return { curves: [cycles, delivery], checks };
}

// ---------------------------------------------------------------------------------------------
// Relay memory per registration
// ---------------------------------------------------------------------------------------------

function heapAfterGc(): number {
  Bun.gc(true);
  Bun.gc(true);
  return heapStats().heapSize;
}

/** Registers `count` sessions through the engine, as the HTTP layer hands a parsed connect to it. */
async function connectThroughEngine(engine: RelayEngine, count: number): Promise<void> {
  for (let index = 0; index < count; index += 1) {
    await engine.handle("connect", {
      operation: "connect",
      profile: RELAY_PROFILE,
      callerSession: benchName("growth-memory"),
      generation: crypto.randomUUID(),
      protocolVersions: [WIRE_PROTOCOL_VERSION],
      leaseMs: leaseMaxMs,
      bindingSecret: mintBindingSecret(),
    });
  }
}

async function memoryCurve(quick: boolean): Promise<GrowthCurve> {
  const sizes = quick ? QUICK_MEMORY_SIZES : MEMORY_SIZES;
  // A warm-up engine: JIT tiers and lazily built structures are not per-registration memory.
  const warm = await createRelayEngine();
  await connectThroughEngine(warm, sizes[0]!);
  await warm.close();
  const engine = await createRelayEngine();
  const points: GrowthPoint[] = [];
  let charged = 0;
  try {
    const base = heapAfterGc();
    let registered = 0;
    for (const size of sizes) {
      await connectThroughEngine(engine, size - registered);
      registered = size;
      points.push({ x: size, value: Math.round((heapAfterGc() - base) / size) });
      charged = (await engine.usage()).metadataBytes / size;
    }
  } finally {
    await engine.close();
  }
  return curve({
    id: "growth-registration-bytes",
    title: "Relay memory per registration (JS heap growth ÷ registrations), B",
    xLabel: "registrations",
    unit: "B",
    points,
    note: `An in-process relay engine (as memory.ts): JS heap after a full GC before and after registering the sessions through the engine (binding secret, one new session each), divided by their count; one trial. The relay's budget charges ${formatNumber(charged)} B of metadata per registration.`,
  });
}

// ---------------------------------------------------------------------------------------------
// Refresh pass against store size
// ---------------------------------------------------------------------------------------------

/** Writes `tasks` terminal tasks of EVENTS_PER_ARCHIVED_TASK events each through the store API (as refresh.ts). */
function archive(core: TaskCore, target: TaskEndpoint, tasks: number): void {
  const origin = core.endpoint()!;
  const store = coreInternals(core).store;
  const at = Date.now();
  for (let t = 0; t < tasks; t += 1) {
    const record: TaskRecord = {
      taskId: crypto.randomUUID(),
      protocolVersion: TASK_PROTOCOL_VERSION,
      origin,
      target,
      task: `archived task ${t}`,
      createdAt: at,
      expiresAt: at + taskTimeoutDefaultMs,
      status: "active",
    };
    store.transaction(() => {
      store.putTask(record, "origin");
      store.appendEvent(makeEvent(record, "task.created", "1", at, { task: record.task }));
      for (let sequence = 2; sequence < EVENTS_PER_ARCHIVED_TASK; sequence += 1) {
        store.appendEvent(makeEvent(record, "task.information", String(sequence), at, { message: `message ${sequence} `.padEnd(ARCHIVED_MESSAGE_CHARS, "m") }));
      }
      store.appendEvent(makeEvent(record, "task.completed", String(EVENTS_PER_ARCHIVED_TASK), at, { summary: "done" }));
      store.setStatus(record.taskId, "completed");
    });
  }
}

/** p50 of `passes` refresh passes (after `warmup`), ms; throws when a pass fails. */
async function passP50(core: TaskCore, passes: number, warmup: number): Promise<number> {
  const samples: number[] = [];
  for (let index = 0; index < warmup + passes; index += 1) {
    const at = now();
    const report = await core.refresh();
    if (index >= warmup) samples.push(now() - at);
    if (report.failures.size > 0) throw new Error(`growth: refresh pass failed: ${[...report.failures.values()].map((error) => error.code).join(", ")}`);
  }
  return summarize(samples).p50;
}

async function refreshCurve(url: string, quick: boolean): Promise<{ curve: GrowthCurve; check: GrowthCheck }> {
  const sizes = quick ? QUICK_REFRESH_EVENTS : REFRESH_EVENTS;
  const passes = quick ? QUICK_REFRESH_PASSES : REFRESH_PASSES;
  const warmup = quick ? QUICK_REFRESH_WARMUP_PASSES : REFRESH_WARMUP_PASSES;
  const parties: Party[] = [];
  const points: GrowthPoint[] = [];
  let pending = 0;
  try {
    const target = (await rawBinding(url, "growth-refresh-target")).endpoint;
    for (const events of sizes) {
      const tasks = Math.round(events / EVENTS_PER_ARCHIVED_TASK);
      if (tasks * (EVENTS_PER_ARCHIVED_TASK + 1) > maxStoreRecords) throw new Error("growth: archive exceeds the store's record bound");
      const party = await createParty({ url, name: benchName("growth-refresh") });
      parties.push(party);
      archive(party.core, target, tasks);
      points.push({ x: tasks * EVENTS_PER_ARCHIVED_TASK, value: round(await passP50(party.core, passes, warmup), 3) });
      if (party.core.hasPendingWork()) pending += 1;
    }
  } finally {
    await closeParties(parties);
  }
  return {
    curve: curve({
      id: "growth-refresh",
      title: "Refresh pass p50 (nothing pending) against archived events in the store, ms",
      xLabel: "archived events",
      unit: "ms",
      points,
      note: `A TaskCore on a relay process; its store holds archived terminal tasks of ${EVENTS_PER_ARCHIVED_TASK} events each (created, messages of ${ARCHIVED_MESSAGE_CHARS} characters, completed), written through the store API as refresh.ts does (which uses 100 tasks × 160 events for its 16,000). p50 of ${passes} passes after ${warmup} warm-up, each one relay receive.`,
    }),
    check: { name: "growth: refresh passes leave nothing pending", ok: pending === 0, detail: `${pending} stores with pending work` },
  };
}

// ---------------------------------------------------------------------------------------------
// createTask against active tasks
// ---------------------------------------------------------------------------------------------

/** Sinks enough to hold `tasks` assignments without filling a mailbox. */
async function sinks(url: string, tasks: number): Promise<TaskEndpoint[]> {
  const count = Math.ceil(tasks / (relayMaxMailboxItems / 2)) + 1;
  return Promise.all(Array.from({ length: count }, async (_, index) => (await rawBinding(url, `growth-sink-${index}`)).endpoint));
}

async function createCurve(url: string, quick: boolean): Promise<{ curve: GrowthCurve; check: GrowthCheck }> {
  const sizes = quick ? QUICK_ACTIVE_TASK_SIZES : ACTIVE_TASK_SIZES;
  const samples = quick ? QUICK_CREATE_SAMPLES : CREATE_SAMPLES;
  const warmup = quick ? QUICK_CREATE_WARMUP : CREATE_WARMUP;
  const largest = sizes[sizes.length - 1]!;
  const origin = await createParty({ url, name: benchName("growth-origin") });
  const worker = await createParty({ url, name: benchName("growth-worker") });
  const text = filler(TASK_TEXT_CHARS);
  const points: GrowthPoint[] = [];
  const mismatches: string[] = [];
  try {
    const parked = await sinks(url, largest);
    const to = worker.core.endpoint()!;
    let filled = 0;
    /** One task to the worker, completed there and taken in by the origin; resolves with the createTask time. */
    const sample = async (): Promise<number> => {
      const at = now();
      const created = await origin.core.createTask({ to, task: text });
      const elapsed = now() - at;
      await worker.core.refresh();
      await worker.core.done({ taskId: created.taskId, status: "completed", summary: "done" });
      await origin.core.refresh();
      return elapsed;
    };
    for (let index = 0; index < warmup; index += 1) await sample();
    for (const size of sizes) {
      await pool(size - filled, FILL_CONCURRENCY, async (index) => {
        await origin.core.createTask({ to: parked[(filled + index) % parked.length]!, task: text });
      });
      filled = size;
      const times: number[] = [];
      for (let index = 0; index < samples; index += 1) times.push(await sample());
      const active = origin.core.activeTaskIds().length;
      if (active !== size) mismatches.push(`${active} active after the samples at ${size}`);
      points.push({ x: size, value: round(summarize(times).p95, 3) });
    }
  } finally {
    await closeParties([origin, worker]);
  }
  return {
    curve: curve({
      id: "growth-create-p95",
      title: "createTask p95 (call → relay acceptance) against the origin's active tasks, ms",
      xLabel: "active tasks",
      unit: "ms",
      points,
      note: `One origin TaskCore (kit/party.ts, no background passes) on a relay process, holding N active tasks assigned to registered sinks that never answer; ${samples} timed createTask calls per point (after ${warmup} warm-up), each a 1 KiB task to a worker TaskCore that completes it at once, the origin taking the result in before the next, so each call sees N active tasks.`,
    }),
    check: { name: "growth: createTask samples complete, active tasks stay at each point's size", ok: mismatches.length === 0, detail: mismatches.join("; ") || "ok" },
  };
}

// ---------------------------------------------------------------------------------------------
// All curves
// ---------------------------------------------------------------------------------------------

export async function measureGrowth(options: { quick?: boolean } = {}): Promise<GrowthResult> {
  const quick = options.quick === true;
  const started = now();
  const relay = await relayCurves(quick);
  const memory = await memoryCurve(quick);
  const coreRelay = await startRelayProcess();
  try {
    const refresh = await refreshCurve(coreRelay.url, quick);
    const create = await createCurve(coreRelay.url, quick);
    return {
      curves: [...relay.curves, memory, refresh.curve, create.curve],
      checks: [...relay.checks, refresh.check, create.check],
      seconds: round((now() - started) / MS_PER_SECOND, 1),
    };
  } finally {
    await coreRelay.stop().catch(() => undefined);
  }
}
