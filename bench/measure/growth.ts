/**
 * Growth curves: how a cost grows as the work it carries grows, each curve a few points and a
 * slope classified from them.
 *
 * - Relay cycles/s, the relay's CPU per cycle and delivery p95 against idle registered sessions: a
 *   relay process (child) per size, warmed up, with that many idle sessions registered through raw
 *   `connect` POSTs (binding-secret-v1, as our client does, the longest lease so none lapses); then,
 *   interleaved over the relays round by round, raw-client cycles runs (cycles.ts: send + receive +
 *   batched ACK, 1 KiB text, 4 senders; the median run counts; the relay process's CPU read from
 *   `/proc/<pid>/stat` before and after each run) and delivery samples between fresh pairs of fake
 *   Pis (bench/lib/fake-pi.ts, the real extension stack with `watch-v1`): createTask accepted → the
 *   worker's ACK returned, one task at a time with a pause between. The relay refuses
 *   registrations beyond `maxRelayRegistrations` (RELAY_CAPACITY, by design), so the largest point
 *   fills it to its budget.
 * - Relay memory per registration: an in-process relay engine (as memory.ts does), JS heap after
 *   a full GC before and after registering N sessions through the engine, divided by N.
 * - Refresh-pass cost against store size: a TaskCore (testkit/party.ts) on a relay process whose
 *   store holds archived terminal tasks of 100 events each, written through the store API as in
 *   refresh.ts; p50 of `refresh()` (nothing pending: one receive per pass).
 * - createTask p95 against active tasks: an origin TaskCore holding N active tasks (assigned to
 *   registered sinks that never answer); each sampled task goes to a worker TaskCore that
 *   completes it at once, and the origin takes the result in, so every sample sees N.
 *
 * Proofs (src/core/proofs.ts): task content goes only to an endpoint that proved which key holds
 * it. Every worker is proven to its origin before anything is timed — each fake-Pi pair before its
 * warm-up deliveries, the createTask curve's worker and sinks (TaskCores that answer the origin's
 * hello with one pass, the sinks never running another) before the warm-up and the fill — so every
 * timed or filling createTask leaves at once (`delivery: "accepted"`, checked), as before.
 *
 * Slopes: log–log between the first and last points with a nonzero x and value (for a rate, of
 * its inverse, the cost per cycle): < 0.2 flat, 0.2–1.2 ≈ linear, > 1.2 super-linear (a finding).
 */
import { ARCHIVED_MESSAGE_CHARS, archive } from "./refresh.ts";
import { heapAfterGc } from "./memory.ts";
import { coreInternals, type TaskCore } from "../../src/core/task-core.ts";
import { type RelayProcess, startRelayProcess } from "../../src/demo/relay-process.ts";
import { mintBindingSecret } from "../../src/protocol/wire.ts";
import {
  KiB,
  maxLeaseMs,
  maxStoreRecords,
  maxRelayMailboxItems,
  maxRelayReceiptBytes,
  maxRelayRegistrations,
} from "../../src/protocol/limits.ts";
import { RELAY_ENDPOINT_PATH, RELAY_PROFILE, WIRE_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { createRelayEngine, type RelayEngine } from "../../src/relay-server/engine.ts";
import { eventually } from "../../testkit/async.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { boundEndpoint, type FakePi, startFakePi } from "../lib/fake-pi.ts";
import { introduceFakePis, requireSentAtOnce } from "../lib/proofs.ts";
import { now, pool, round, summarize } from "../lib/stats.ts";
import { benchName, filler, rawBinding } from "../lib/wire.ts";
import { runCycles, SENDERS } from "./cycles.ts";

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
/**
 * Envelopes of each cycles run, runs per point (odd: the median run counts, since this 2-core
 * machine is shared and single runs swing by ±20 %), and each relay's warm-up run. A relay keeps
 * a dedupe receipt per accepted envelope for 15 minutes within `maxRelayReceiptBytes` (about 6,700
 * 1 KiB envelopes), so every envelope of one point must fit in its relay's receipts (checked).
 */
const CYCLE_ENVELOPES = 1_200;
const QUICK_CYCLE_ENVELOPES = 60;
const CYCLE_RUNS = 3;
const QUICK_CYCLE_RUNS = 1;
const WARMUP_CYCLE_ENVELOPES = 300;
const QUICK_WARMUP_CYCLE_ENVELOPES = 20;
/** Deliveries timed at each relay point: rounds of a fresh pair each (after warm-up deliveries on the pair). */
const DELIVERY_ROUNDS = 2;
const QUICK_DELIVERY_ROUNDS = 1;
const DELIVERY_SAMPLES_PER_ROUND = 25;
const QUICK_DELIVERY_SAMPLES_PER_ROUND = 4;
const DELIVERY_WARMUP = 3;
const QUICK_DELIVERY_WARMUP = 1;
/** Untimed deliveries before the first point, so this process's JIT warm-up lands in no point. */
const PROCESS_WARMUP_DELIVERIES = 20;
const QUICK_PROCESS_WARMUP_DELIVERIES = 2;
/** Pause after each delivery, so the worker is idle with its watch parked before the next send. */
const DELIVERY_GAP_MS = 15;
/** A delivery not ACKed within this has stalled. */
const DELIVERY_TIMEOUT_MS = 5_000;
/** How often a wait re-checks its condition (the ACK time itself comes from the request log). */
const POLL_MS = 1;
/** Raw `connect` POSTs in flight while registering idle sessions (under the relay's admission limit). */
const CONNECT_CONCURRENCY = 8;

/** Registrations at the memory points (the last is the budget). */
const MEMORY_SIZES = [100, 1_000, maxRelayRegistrations];
const QUICK_MEMORY_SIZES = [100, 1_000];
const MEMORY_TRIALS = 3;
const QUICK_MEMORY_TRIALS = 1;

/** Archived events at the refresh points: terminal tasks of `EVENTS_PER_ARCHIVED_TASK` events each. */
const REFRESH_EVENTS = [0, 1_000, 16_000];
const QUICK_REFRESH_EVENTS = [0, 100, 1_000];
const EVENTS_PER_ARCHIVED_TASK = 100;
const REFRESH_PASSES = 120;
const QUICK_REFRESH_PASSES = 8;
const REFRESH_WARMUP_PASSES = 20;
const QUICK_REFRESH_WARMUP_PASSES = 2;

/** Active tasks at the createTask points. */
const ACTIVE_TASK_SIZES = [1, 100, 1_000];
const QUICK_ACTIVE_TASK_SIZES = [1, 10, 100];
const CREATE_SAMPLES = 100;
const QUICK_CREATE_SAMPLES = 5;
const CREATE_WARMUP = 60;
const QUICK_CREATE_WARMUP = 2;
/** Origin refresh passes timed at each number of active tasks (after a warm-up). */
const ACTIVE_PASSES = 60;
const QUICK_ACTIVE_PASSES = 5;
const ACTIVE_WARMUP_PASSES = 5;
/** createTask calls in flight while filling the origin with active tasks (untimed). */
const FILL_CONCURRENCY = 4;
/** Task text of every created task (as acceptance.ts and delivery.ts). */
const TASK_TEXT_CHARS = KiB;

/** Log–log slope bounds of the classification. */
const FLAT_BELOW = 0.2;
const LINEAR_UP_TO = 1.2;
const PERCENT = 100;
/** A linear cost is stated per unit of x from this much per unit, else per 1,000 units. */
const PER_UNIT_SHOWN_FROM = 0.1;
const PER_THOUSAND = 1_000;
const MS_PER_SECOND = 1_000;
/** One tick of `/proc/<pid>/stat` CPU time (USER_HZ = 100), µs. */
const TICK_US = 10_000;

// ---------------------------------------------------------------------------------------------
// Slopes and formatting
// ---------------------------------------------------------------------------------------------

/** The median of some numbers (the mean of the middle two for an even count). */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Whether a curve's value is a cost (time, bytes) or a rate (higher is cheaper). */
type Sense = "cost" | "rate";

const formatNumber = (value: number, digits = 0): string =>
  value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });

/** A value with 3 significant digits (whole numbers from 100 up). */
function readable(value: number): string {
  if (Math.abs(value) >= 100) return formatNumber(value);
  return value.toLocaleString("en-US", { maximumSignificantDigits: 3 });
}

/** The log–log slope of cost against x between the first and last points with nonzero x and value. */
export function logLogSlope(
  points: readonly GrowthPoint[],
  sense: Sense = "cost",
): { slope: number; first: GrowthPoint; last: GrowthPoint } | undefined {
  const usable = points.filter((point) => point.x > 0 && point.value > 0);
  if (usable.length < 2) return undefined;
  const first = usable[0]!;
  const last = usable[usable.length - 1]!;
  const slope = Math.log(last.value / first.value) / Math.log(last.x / first.x);
  return { slope: sense === "rate" ? -slope : slope, first, last };
}

/** The x scale of a linear cost's figure: per unit, or per 1,000 units when one unit costs little. */
function perScale(perUnit: number): number {
  return Math.abs(perUnit) < PER_UNIT_SHOWN_FROM ? PER_THOUSAND : 1;
}

/** The slope sentence of a curve: its class and the figure that shows it. */
export function slopeSentence(
  points: readonly GrowthPoint[],
  labels: { readonly xLabel: string; readonly xUnit: string; readonly unit: string; readonly sense?: Sense },
): string {
  const sense = labels.sense ?? "cost";
  const fit = logLogSlope(points, sense);
  if (fit === undefined) return "not enough points to state a slope";
  const { slope, first, last } = fit;
  // (+ 0 turns a -0 into 0.)
  const shown = `log–log slope ${formatNumber(round(slope, 2) + 0, 2)}`;
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
  const per = scale === 1 ? labels.xUnit : `${formatNumber(scale)} ${labels.xLabel}`;
  const growth = `≈ ${readable(perUnit * scale)} ${labels.unit} more per ${per}`;
  if (slope <= LINEAR_UP_TO)
    return `≈ linear: ${growth}, ${formatNumber(ratio, 2)}× from ${formatNumber(first.x)} to ${formatNumber(last.x)} (${shown})`;
  return `super-linear (a finding): ${formatNumber(ratio, 2)}× from ${formatNumber(first.x)} to ${formatNumber(last.x)} ${labels.xLabel}, ${growth} on average (${shown})`;
}

/** A curve with its slope sentence; `xUnit` names one unit of x ("registration"), `sense` defaults to cost. */
function curve(fields: Omit<GrowthCurve, "slope"> & { readonly xUnit: string; readonly sense?: Sense }): GrowthCurve {
  const { sense, xUnit, ...rest } = fields;
  return {
    ...rest,
    slope: slopeSentence(fields.points, { xLabel: fields.xLabel, xUnit, unit: fields.unit, ...(sense === undefined ? {} : { sense }) }),
  };
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
  lines.push(
    "",
    failed.length === 0
      ? `Integrity: ${result.checks.map((check) => check.name.replace(/^growth: /, "")).join("; ")} — all held.`
      : `Integrity FAILED: ${failed.map((check) => `${check.name} (${check.detail})`).join("; ")}.`,
  );
  return `${lines.join("\n")}\n`;
}

// ---------------------------------------------------------------------------------------------
// Relay: cycles/s and delivery p95 against idle registered sessions
// ---------------------------------------------------------------------------------------------

/** One raw POST to the relay endpoint; the reply's value, or throws with its error code. */
export async function relayPost(url: string, body: Record<string, unknown>): Promise<Record<string, any>> {
  const response = await fetch(`${url}${RELAY_ENDPOINT_PATH}`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  const reply = (await response.json()) as { ok: boolean; value: Record<string, any>; error?: { code: string } };
  if (!reply.ok) throw new Error(`relay refused ${String(body.operation)}: ${reply.error?.code ?? response.status}`);
  return reply.value;
}

/** Registers `count` idle sessions (a secret each, the longest lease) with raw connects; resolves with refusals. */
export async function registerIdle(url: string, count: number): Promise<number> {
  let refused = 0;
  await pool(count, CONNECT_CONCURRENCY, async () => {
    const body = {
      operation: "connect",
      profile: RELAY_PROFILE,
      callerSession: benchName("growth-idle"),
      generation: crypto.randomUUID(),
      protocolVersions: [WIRE_PROTOCOL_VERSION],
      leaseMs: maxLeaseMs,
      bindingSecret: mintBindingSecret(),
    };
    await relayPost(url, body).catch(() => {
      refused += 1;
    });
  });
  return refused;
}

/** The relay's store usage (health, through a raw binding of our own). */
export async function relayUsage(
  url: string,
  probe: Record<string, unknown>,
): Promise<{ registrations: number; receipts: number; receiptBytes: number }> {
  const store = (await relayPost(url, { operation: "health", ...probe })).store;
  return { registrations: Number(store.registrations), receipts: Number(store.receipts), receiptBytes: Number(store.receiptBytes) };
}

/**
 * Throws unless the relay's receipt budget has room for `envelopes` more (at the bytes per receipt
 * seen so far): a full budget refuses sends with RELAY_CAPACITY until receipts expire (15 min).
 */
export async function requireReceiptRoom(url: string, probe: Record<string, unknown>, envelopes: number): Promise<void> {
  const { receipts, receiptBytes } = await relayUsage(url, probe);
  if (receipts === 0) return;
  const room = Math.floor((maxRelayReceiptBytes - receiptBytes) / (receiptBytes / receipts));
  if (room < envelopes)
    throw new Error(`growth: the relay's receipt budget has room for ${room} envelopes, the next point needs ${envelopes}`);
}

interface DeliverySample {
  readonly ackMs: readonly number[];
  readonly unacknowledged: number;
  readonly watching: boolean;
}

/**
 * Delivery latency between a fresh pair of fake Pis: createTask accepted → the worker's relay ACK
 * returned (its request log's time), one task at a time, `DELIVERY_GAP_MS` apart. The worker
 * proves itself to the origin first (untimed), so every assignment leaves with its createTask.
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
    await introduceFakePis(origin, worker, to);
    const text = filler(TASK_TEXT_CHARS);
    const ackMs: number[] = [];
    let unacknowledged = 0;
    for (let index = 0; index < warmup + samples; index += 1) {
      const created = await origin.lifecycle.run((core) => core.createTask({ to, task: text }));
      const acceptedAt = now();
      requireSentAtOnce(created, "growth delivery");
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
  /** The relay process's CPU per cycle (user + system), median over the runs, µs; NaN when unreadable. */
  readonly relayCpuUsPerCycle: number;
  readonly deliveryP95Ms: number;
}

interface RelayCounts {
  lost: number;
  duplicates: number;
  capacityRefusals: number;
  unacknowledged: number;
  refused: number;
  watching: boolean;
}

interface RelayCurves {
  readonly curves: GrowthCurve[];
  readonly checks: GrowthCheck[];
}

interface RelaySettings {
  readonly targets: readonly (number | "budget")[];
  readonly envelopes: number;
  readonly runs: number;
  readonly warmupEnvelopes: number;
  readonly rounds: number;
  readonly samplesPerRound: number;
  readonly warmup: number;
  readonly processWarmup: number;
}

function relaySettings(quick: boolean): RelaySettings {
  return {
    targets: quick ? QUICK_IDLE_SIZES : [...IDLE_SIZES, "budget"],
    envelopes: quick ? QUICK_CYCLE_ENVELOPES : CYCLE_ENVELOPES,
    runs: quick ? QUICK_CYCLE_RUNS : CYCLE_RUNS,
    warmupEnvelopes: quick ? QUICK_WARMUP_CYCLE_ENVELOPES : WARMUP_CYCLE_ENVELOPES,
    rounds: quick ? QUICK_DELIVERY_ROUNDS : DELIVERY_ROUNDS,
    samplesPerRound: quick ? QUICK_DELIVERY_SAMPLES_PER_ROUND : DELIVERY_SAMPLES_PER_ROUND,
    warmup: quick ? QUICK_DELIVERY_WARMUP : DELIVERY_WARMUP,
    processWarmup: quick ? QUICK_PROCESS_WARMUP_DELIVERIES : PROCESS_WARMUP_DELIVERIES,
  };
}

/** A relay of one point: its idle sessions registered, its cycles rates and delivery times so far. */
interface Station {
  readonly relay: RelayProcess;
  readonly probe: Record<string, unknown>;
  readonly idle: number;
  readonly rates: number[];
  /** The relay's CPU per cycle of each run, µs (runs where it was unreadable left out). */
  readonly cpuUs: number[];
  readonly ackMs: number[];
}

/**
 * A fresh relay for one point, warmed up, with `target` idle sessions ("budget": as many as leave
 * room for the point's own clients). A relay per point: a relay keeps a receipt per accepted
 * envelope for 15 minutes, and receipts piling up from earlier points would slow later ones.
 */
async function openStation(target: number | "budget", settings: RelaySettings, counts: RelayCounts): Promise<Station> {
  const relay = await startRelayProcess();
  try {
    const probe = (await rawBinding(relay.url, "growth-probe")).base;
    await runCycles(relay.url, "raw", settings.warmupEnvelopes);
    const before = (await relayUsage(relay.url, probe)).registrations;
    // The point's own clients: a receiver and the senders per cycles run, a pair per delivery round.
    const own = settings.runs * (SENDERS + 1) + settings.rounds * 2;
    const idle = target === "budget" ? maxRelayRegistrations - before - own : target;
    counts.refused += await registerIdle(relay.url, idle);
    await requireReceiptRoom(
      relay.url,
      probe,
      settings.runs * settings.envelopes + settings.rounds * (settings.samplesPerRound + settings.warmup),
    );
    return { relay, probe, idle, rates: [], cpuUs: [], ackMs: [] };
  } catch (error) {
    await relay.stop().catch(() => undefined);
    throw error;
  }
}

/** The stations in round `round`'s order: forward, then backward, so no point always runs last. */
function inTurn(stations: readonly Station[], round: number): readonly Station[] {
  return round % 2 === 0 ? stations : [...stations].reverse();
}

/**
 * Every point's relay open at once, the work interleaved: round after round, one cycles run (then
 * one delivery sample) on each relay in turn, so a disturbance of this shared machine spreads
 * over the points instead of bending the curve. The median cycles run of each point counts; its
 * deliveries are pooled.
 */
async function relayPoints(settings: RelaySettings, counts: RelayCounts): Promise<RelayPoint[]> {
  const stations: Station[] = [];
  try {
    for (const target of settings.targets) stations.push(await openStation(target, settings, counts));
    // The deliveries' client stack is cold in this process: one untimed sample first.
    counts.unacknowledged += (await deliverySample(stations[0]!.relay.url, 0, settings.processWarmup)).unacknowledged;
    for (let round = 0; round < settings.runs; round += 1) {
      for (const station of inTurn(stations, round)) {
        const run = await runCycles(station.relay.url, "raw", settings.envelopes, { relayPid: station.relay.process.pid });
        counts.lost += run.lost;
        counts.duplicates += run.duplicates;
        counts.capacityRefusals += run.capacityRefusals;
        station.rates.push(run.cyclesPerSecond);
        if (run.relayCpuUsPerCycle >= 0) station.cpuUs.push(run.relayCpuUsPerCycle);
      }
    }
    for (let round = 0; round < settings.rounds; round += 1) {
      for (const station of inTurn(stations, round)) {
        const delivery = await deliverySample(station.relay.url, settings.samplesPerRound, settings.warmup);
        counts.unacknowledged += delivery.unacknowledged;
        counts.watching &&= delivery.watching;
        station.ackMs.push(...delivery.ackMs);
      }
    }
    const points: RelayPoint[] = [];
    for (const station of stations) {
      const { registrations } = await relayUsage(station.relay.url, station.probe);
      points.push({
        idle: station.idle,
        registrations,
        cyclesPerSecond: Math.round(median(station.rates)),
        relayCpuUsPerCycle: station.cpuUs.length === 0 ? Number.NaN : Math.round(median(station.cpuUs)),
        deliveryP95Ms: round(summarize(station.ackMs).p95, 2),
      });
    }
    return points;
  } finally {
    await Promise.all(stations.map((station) => station.relay.stop().catch(() => undefined)));
  }
}

async function relayCurves(quick: boolean): Promise<RelayCurves> {
  const settings = relaySettings(quick);
  const counts: RelayCounts = { lost: 0, duplicates: 0, capacityRefusals: 0, unacknowledged: 0, refused: 0, watching: true };
  const points = await relayPoints(settings, counts);
  const largest = points[points.length - 1]!;
  const sizes = points.map((point) => formatNumber(point.idle)).join(", ");
  const capped = quick
    ? `Quick run: ${sizes} idle sessions only.`
    : `The largest point is the relay's registration budget: ${formatNumber(ASKED_LARGEST_SESSIONS)} sessions are beyond maxRelayRegistrations = ${formatNumber(maxRelayRegistrations)} (refused with RELAY_CAPACITY by design), so there the relay holds ${formatNumber(largest.registrations)} registrations: ${formatNumber(largest.idle)} idle ones and the rest the measuring clients' (live and ended).`;
  const sessionsLabel = "idle registered sessions";
  const cycles = curve({
    id: "growth-relay-cycles",
    title: "Relay cycles/s (send + receive + batched ACK, raw client) against idle registered sessions",
    xLabel: sessionsLabel,
    xUnit: "idle session",
    unit: "cycles/s",
    sense: "rate",
    points: points.map((point) => ({ x: point.idle, value: point.cyclesPerSecond })),
    note: `A relay process per point, all open at once and the runs interleaved across them, the order reversed every other round (receipts piling up from earlier points would slow later ones by themselves on one relay); idle sessions registered with raw connects (binding secret, ${formatNumber(maxLeaseMs / MS_PER_SECOND)} s lease) beside the active clients; at each point the median of ${settings.runs} runs of ${formatNumber(settings.envelopes)} cycles of a 1 KiB text, 4 raw senders → 1 receiver (cycles.ts). ${capped}`,
  });
  const cpu = curve({
    id: "growth-relay-cpu",
    title: "Relay CPU per cycle (the relay process, user + system) against idle registered sessions, µs",
    xLabel: sessionsLabel,
    xUnit: "idle session",
    unit: "µs",
    points: points.map((point) => ({ x: point.idle, value: point.relayCpuUsPerCycle })),
    note: `The relay process's CPU time (\`/proc/<pid>/stat\`, user + system, 10 ms ticks) read before and after each timed cycles run of the curve above, divided by its ${formatNumber(settings.envelopes)} cycles (one tick is ${readable(TICK_US / settings.envelopes)} µs per cycle of a run); the median of the ${settings.runs} runs at each point. Same relays, points and runs as the cycles curve.`,
  });
  const delivery = curve({
    id: "growth-delivery-p95",
    title: "Delivery p95 with watch-v1 (accepted → worker's ACK) against idle registered sessions, ms",
    xLabel: sessionsLabel,
    xUnit: "idle session",
    unit: "ms",
    points: points.map((point) => ({ x: point.idle, value: point.deliveryP95Ms })),
    note: `${settings.rounds * settings.samplesPerRound} deliveries per point, in ${settings.rounds} round${settings.rounds === 1 ? "" : "s"} of ${settings.samplesPerRound} (after ${settings.warmup} warm-up each) between a fresh pair of fake Pis (the real extension stack), one task at a time, ${DELIVERY_GAP_MS} ms apart (delivery.ts spaces them 100 ms apart instead); each pair's worker proves its endpoint to the origin before its warm-up (untimed), so every assignment leaves with its createTask (checked). Same relays and points as the cycles curve.`,
  });
  const checks: GrowthCheck[] = [
    {
      name: "growth: relay cycles lose and duplicate nothing, never refused for capacity",
      ok: counts.lost === 0 && counts.duplicates === 0 && counts.capacityRefusals === 0,
      detail: `lost ${counts.lost}, duplicates ${counts.duplicates}, capacity refusals ${counts.capacityRefusals}`,
    },
    {
      name: "growth: every delivery acknowledged, over watch-v1",
      ok: counts.unacknowledged === 0 && counts.watching,
      detail: `unacknowledged ${counts.unacknowledged}, watch-v1 ${counts.watching ? "seen" : "missing"}`,
    },
    { name: "growth: every idle registration accepted", ok: counts.refused === 0, detail: `refused ${counts.refused}` },
    {
      name: "growth: the relay's CPU read at every point",
      ok: points.every((point) => Number.isFinite(point.relayCpuUsPerCycle)),
      detail: points.map((point) => `${formatNumber(point.idle)}: ${point.relayCpuUsPerCycle} µs`).join(", "),
    },
  ];
  if (!quick) {
    const full = largest.registrations === maxRelayRegistrations;
    checks.push({
      name: "growth: the largest relay point holds the whole registration budget",
      ok: full,
      detail: `${formatNumber(largest.registrations)} of ${formatNumber(maxRelayRegistrations)}`,
    });
  }
  return { curves: [cycles, cpu, delivery], checks };
}

// ---------------------------------------------------------------------------------------------
// Relay memory per registration
// ---------------------------------------------------------------------------------------------

/** Registers `count` sessions through the engine, as the HTTP layer hands a parsed connect to it. */
async function connectThroughEngine(engine: RelayEngine, count: number): Promise<void> {
  for (let index = 0; index < count; index += 1) {
    await engine.handle("connect", {
      operation: "connect",
      profile: RELAY_PROFILE,
      callerSession: benchName("growth-memory"),
      generation: crypto.randomUUID(),
      protocolVersions: [WIRE_PROTOCOL_VERSION],
      leaseMs: maxLeaseMs,
      bindingSecret: mintBindingSecret(),
    });
  }
}

/** One trial on a fresh engine: heap growth per registration at each size (registering up to it), and the charged metadata. */
async function memoryTrial(sizes: readonly number[]): Promise<{ perRegistration: number[]; charged: number }> {
  const engine = await createRelayEngine();
  const perRegistration: number[] = [];
  let charged = 0;
  try {
    const base = await heapAfterGc();
    let registered = 0;
    for (const size of sizes) {
      await connectThroughEngine(engine, size - registered);
      registered = size;
      perRegistration.push(((await heapAfterGc()) - base) / size);
      charged = (await engine.usage()).metadataBytes / size;
    }
  } finally {
    await engine.close();
  }
  return { perRegistration, charged };
}

async function memoryCurve(quick: boolean): Promise<GrowthCurve> {
  const sizes = quick ? QUICK_MEMORY_SIZES : MEMORY_SIZES;
  const trials = quick ? QUICK_MEMORY_TRIALS : MEMORY_TRIALS;
  // A warm-up engine: JIT tiers and lazily built structures are not per-registration memory.
  await memoryTrial([sizes[0]!]);
  const results: Awaited<ReturnType<typeof memoryTrial>>[] = [];
  for (let index = 0; index < trials; index += 1) results.push(await memoryTrial(sizes));
  const points = sizes.map((size, index) => ({
    x: size,
    value: Math.round(median(results.map((result) => result.perRegistration[index]!))),
  }));
  return curve({
    id: "growth-registration-bytes",
    title: "Relay memory per registration (JS heap growth ÷ registrations), B",
    xLabel: "registrations",
    xUnit: "registration",
    unit: "B",
    points,
    note: `An in-process relay engine (as memory.ts): JS heap after a full GC before and after registering the sessions through the engine (binding secret, one new session each), divided by their count; median of ${trials} trial${trials === 1 ? "" : "s"} on fresh engines. The relay's budget charges ${formatNumber(results[0]!.charged)} B of metadata per registration.`,
  });
}

// ---------------------------------------------------------------------------------------------
// Refresh pass against store size
// ---------------------------------------------------------------------------------------------

/** One timed refresh pass, ms; throws when the pass fails. */
async function timedPass(core: TaskCore): Promise<number> {
  const at = now();
  const report = await core.refresh();
  const elapsed = now() - at;
  if (report.failures.size > 0)
    throw new Error(`growth: refresh pass failed: ${[...report.failures.values()].map((error) => error.code).join(", ")}`);
  return elapsed;
}

/** p50 of `passes` refresh passes (after `warmup`), ms. */
async function passP50(core: TaskCore, passes: number, warmup: number): Promise<number> {
  const samples: number[] = [];
  for (let index = 0; index < warmup + passes; index += 1) {
    const elapsed = await timedPass(core);
    if (index >= warmup) samples.push(elapsed);
  }
  return summarize(samples).p50;
}

/** p50 of each core's passes, the cores taking turns pass by pass (a disturbance hits them alike). */
async function interleavedPassP50s(cores: readonly TaskCore[], passes: number, warmup: number): Promise<number[]> {
  const samples = cores.map((): number[] => []);
  for (let index = 0; index < warmup + passes; index += 1) {
    for (const [which, core] of cores.entries()) {
      const elapsed = await timedPass(core);
      if (index >= warmup) samples[which]!.push(elapsed);
    }
  }
  return samples.map((times) => summarize(times).p50);
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
      archive(party.core, target, tasks, EVENTS_PER_ARCHIVED_TASK);
    }
    const p50s = await interleavedPassP50s(
      parties.map((party) => party.core),
      passes,
      warmup,
    );
    for (const [index, events] of sizes.entries()) points.push({ x: events, value: round(p50s[index]!, 3) });
    pending = parties.filter((party) => party.core.hasPendingWork()).length;
  } finally {
    await closeParties(parties);
  }
  return {
    curve: curve({
      id: "growth-refresh",
      title: "Refresh pass p50 (nothing pending) against archived events in the store, ms",
      xLabel: "archived events",
      xUnit: "archived event",
      unit: "ms",
      points,
      note: `A TaskCore on a relay process; its store holds archived terminal tasks of ${EVENTS_PER_ARCHIVED_TASK} events each (created, messages of ${ARCHIVED_MESSAGE_CHARS} characters, completed), written through the store API as refresh.ts does (which uses 100 tasks × 160 events for its 16,000). One TaskCore per size, their passes taking turns; p50 of ${passes} passes after ${warmup} warm-up, each one relay receive.`,
    }),
    check: { name: "growth: refresh passes leave nothing pending", ok: pending === 0, detail: `${pending} stores with pending work` },
  };
}

// ---------------------------------------------------------------------------------------------
// createTask against active tasks
// ---------------------------------------------------------------------------------------------

/**
 * Sinks enough to hold `tasks` assignments without filling a mailbox: TaskCores (this process's
 * identity, as the origin's) that answer the origin's hello with one pass and never run another,
 * so the assignments wait in their mailboxes unanswered. Each is pushed to `parties` (to close).
 */
async function sinks(url: string, tasks: number, origin: TaskCore, parties: Party[]): Promise<TaskEndpoint[]> {
  const count = Math.ceil(tasks / (maxRelayMailboxItems / 2)) + 1;
  const endpoints: TaskEndpoint[] = [];
  for (let index = 0; index < count; index += 1) {
    const sink = await createParty({ url, name: benchName(`growth-sink-${index}`) });
    parties.push(sink);
    await introduce(origin, sink.core);
    endpoints.push(sink.core.endpoint()!);
  }
  return endpoints;
}

/**
 * createTask p95 at each number of active tasks, and beside it the origin's refresh pass with
 * nothing pending (a pass also visits the active tasks: expiry and orphan-probe checks).
 */
async function activeTaskCurves(url: string, quick: boolean): Promise<{ curves: GrowthCurve[]; check: GrowthCheck }> {
  const sizes = quick ? QUICK_ACTIVE_TASK_SIZES : ACTIVE_TASK_SIZES;
  const samples = quick ? QUICK_CREATE_SAMPLES : CREATE_SAMPLES;
  const warmup = quick ? QUICK_CREATE_WARMUP : CREATE_WARMUP;
  const largest = sizes[sizes.length - 1]!;
  const origin = await createParty({ url, name: benchName("growth-origin") });
  const worker = await createParty({ url, name: benchName("growth-worker") });
  const sinkParties: Party[] = [];
  const text = filler(TASK_TEXT_CHARS);
  const points: GrowthPoint[] = [];
  const passPoints: GrowthPoint[] = [];
  const passes = quick ? QUICK_ACTIVE_PASSES : ACTIVE_PASSES;
  const medians: number[] = [];
  const mismatches: string[] = [];
  let records = 0;
  try {
    const parked = await sinks(url, largest, origin.core, sinkParties);
    const to = worker.core.endpoint()!;
    // The worker proves itself once (untimed): each sample's assignment leaves with its createTask.
    await introduce(origin.core, worker.core);
    let filled = 0;
    /** One task to the worker, completed there and taken in by the origin; resolves with the createTask time. */
    const sample = async (): Promise<number> => {
      const at = now();
      const created = await origin.core.createTask({ to, task: text });
      const elapsed = now() - at;
      requireSentAtOnce(created, "growth createTask");
      await worker.core.refresh();
      await worker.core.done({ taskId: created.taskId, status: "completed", summary: "done" });
      await origin.core.refresh();
      return elapsed;
    };
    for (let index = 0; index < warmup; index += 1) await sample();
    for (const size of sizes) {
      await pool(size - filled, FILL_CONCURRENCY, async (index) => {
        requireSentAtOnce(await origin.core.createTask({ to: parked[(filled + index) % parked.length]!, task: text }), "growth fill");
      });
      filled = size;
      const times: number[] = [];
      for (let index = 0; index < samples; index += 1) times.push(await sample());
      const active = origin.core.activeTaskIds().length;
      if (active !== size) mismatches.push(`${active} active after the samples at ${size}`);
      const summary = summarize(times);
      points.push({ x: size, value: round(summary.p95, 3) });
      medians.push(round(summary.p50, 2));
      passPoints.push({ x: size, value: round(await passP50(origin.core, passes, ACTIVE_WARMUP_PASSES), 3) });
    }
    // Each parked task holds ~5 store records and each completed sample ~13 (the store only grows).
    records = coreInternals(origin.core).store.stats().records;
  } finally {
    await closeParties([origin, worker, ...sinkParties]);
  }
  return activeTaskResult({ points, passPoints, medians, mismatches, records, samples, warmup, passes });
}

/** What `activeTaskCurves` measured, for its curves and check. */
interface ActiveTaskMeasured {
  readonly points: readonly GrowthPoint[];
  readonly passPoints: readonly GrowthPoint[];
  /** createTask p50 per point. */
  readonly medians: readonly number[];
  readonly mismatches: readonly string[];
  /** The origin store's records at the end. */
  readonly records: number;
  readonly samples: number;
  readonly warmup: number;
  readonly passes: number;
}

/** The createTask and refresh-pass curves against active tasks, and the check that every point held its size. */
function activeTaskResult(measured: ActiveTaskMeasured): { curves: GrowthCurve[]; check: GrowthCheck } {
  const { points, passPoints, medians, mismatches, records, samples, warmup, passes } = measured;
  const create = curve({
    id: "growth-create-p95",
    title: "createTask p95 (call → relay acceptance) against the origin's active tasks, ms",
    xLabel: "active tasks",
    xUnit: "active task",
    unit: "ms",
    points,
    note: `One origin TaskCore (testkit/party.ts, no background passes) on a relay process, holding N active tasks assigned to registered sinks that never answer (TaskCores that proved their endpoints to the origin with one pass each, before the fill, and never run another: the assignments wait in their mailboxes); ${samples} timed createTask calls per point (after ${warmup} warm-up), each a 1 KiB task to a worker TaskCore that completes it at once, the origin taking the result in before the next, so each call sees N active tasks. The worker proved its endpoint before the warm-up (one hello round trip, untimed), so every timed assignment leaves sealed with its createTask (checked). p50 per point: ${medians.map((value) => readable(value)).join(", ")} ms.`,
  });
  const pass = curve({
    id: "growth-refresh-active",
    title: "Origin refresh pass p50 (nothing pending) against its active tasks, ms",
    xLabel: "active tasks",
    xUnit: "active task",
    unit: "ms",
    points: passPoints,
    note: `Not asked by the issue; the same origin as the createTask curve, right after each point's samples: p50 of ${passes} passes after ${ACTIVE_WARMUP_PASSES} warm-up. Every pass visits each active task (its expiry, and whether its worker is due a registration probe).`,
  });
  return {
    curves: [create, pass],
    check: {
      name: "growth: createTask samples complete, active tasks stay at each point's size",
      ok: mismatches.length === 0,
      detail: [...mismatches, `origin store ${formatNumber(records)} of ${formatNumber(maxStoreRecords)} records`].join("; "),
    },
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
    const active = await activeTaskCurves(coreRelay.url, quick);
    return {
      curves: [...relay.curves, memory, refresh.curve, ...active.curves],
      checks: [...relay.checks, refresh.check, active.check],
      seconds: round((now() - started) / MS_PER_SECOND, 1),
    };
  } finally {
    await coreRelay.stop().catch(() => undefined);
  }
}
