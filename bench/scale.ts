/**
 * Scale past one machine, simulated (`npm run scale`): 1, 4 and 8 relay processes sharing one real
 * `redis-server`, a growing population of lightweight simulated sessions, and at each size a steady
 * task load between the first relay and the last. The sessions are registrations as our client
 * makes them (raw `connect`, a binding secret each, the longest lease), spread round-robin over the
 * relays and never used after. At each size:
 *
 * - **registered**: live registrations the state holds (relay `health`), and **refused** connects
 *   (`RELAY_CAPACITY`: the state's `maxRelayRegistrations` budget is shared by every relay);
 * - **Redis bytes per session**: what the sessions registered at this point added to `INFO memory`
 *   `used_memory`, ÷ their number (measured before the load runs, so its receipts do not count);
 * - **cycles/s**: the raw-client cycles workload of bench/measure/cycles.ts (send + receive + ACK,
 *   1 KiB text), senders on the first relay, the receiver on the last;
 * - **delivery p95**: bench/measure/delivery.ts with `watch-v1` between fake Pis (the real extension
 *   stack), the origin on the first relay and the worker on the last.
 *
 * Every curve gets its log–log slope against the sessions registered. Writes bench/scale-results.json
 * and the section "Growth across relays" at the end of docs/performance.md (kept by `npm run bench`).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type RedisProcess, startRedis } from "../testkit/redis-process.ts";
import { type RelayProcess, startRelayProcess } from "../testkit/relay-process.ts";
import { maxRelayRegistrations } from "../src/protocol/limits.ts";
import { replaceTail } from "./lib/doc.ts";
import { round } from "./lib/stats.ts";
import { rawBinding } from "./lib/wire.ts";
import { runCycles } from "./measure/cycles.ts";
import { deliveryBetween } from "./measure/delivery.ts";
import { registerIdle, relayUsage } from "./measure/growth.ts";
import { usedMemory } from "./measure/redis.ts";
import { PERFORMANCE_DOC, SCALE_HEADING } from "./run.ts";

/** Relay processes per curve. */
const RELAY_COUNTS = [1, 4, 8];
/** Sessions offered at each point (cumulative). */
const SESSION_COUNTS = [1_000, 2_000, 4_000, 10_000];
/** Envelopes of one cycles run at each point. */
const CYCLE_ENVELOPES = 1_000;
/** Delivery samples at each point. */
const DELIVERY_SAMPLES = 20;
/** Sessions a memory figure needs to stand above the allocator's granularity (fewer added: no figure). */
const MIN_SESSIONS_MEASURED = 500;
/** Registrations the load itself needs (cycles senders and receiver, two fake Pis, the probe), with room to spare. */
const LOAD_SESSIONS = 16;

export interface ScalePoint {
  readonly relays: number;
  readonly offered: number;
  readonly registered: number;
  readonly refused: number;
  /** Redis memory each session added at this point costs (none added past the budget: undefined). */
  readonly redisBytesPerSession?: number;
  /** Undefined where the state holds no room for the load's own sessions (past the budget). */
  readonly cyclesPerSecond?: number;
  readonly deliveryP95Ms?: number;
}

/** Log–log slope between the first and last points (x: sessions registered). */
function slope(all: readonly ScalePoint[], value: (point: ScalePoint) => number | undefined): number {
  const points = all.filter((point) => (value(point) ?? 0) > 0);
  if (points.length < 2) return 0;
  const first = points[0]!;
  const last = points.at(-1)!;
  if (first.registered === last.registered) return 0;
  return round(Math.log(value(last)! / value(first)!) / Math.log(last.registered / first.registered), 2);
}

async function redisMemory(redis: RedisProcess): Promise<number> {
  return usedMemory(await redis.command("INFO", ["memory"]));
}

/** The steady load between the first relay and the last: cycles/s and delivery p95. */
async function load(relays: readonly RelayProcess[]): Promise<{ cyclesPerSecond: number; deliveryP95Ms: number }> {
  const cycles = await runCycles(relays[0]!.url, "raw", CYCLE_ENVELOPES, { receiverUrl: relays.at(-1)!.url });
  const delivery = await deliveryBetween({ origin: relays[0]!.url, worker: relays.at(-1)!.url }, "watch-v1", DELIVERY_SAMPLES);
  return { cyclesPerSecond: Math.round(cycles.cyclesPerSecond), deliveryP95Ms: round(delivery.ackMs.p95, 1) };
}

/** One curve: `count` relays on a fresh Redis, the population grown point by point. */
async function curve(count: number, progress: (line: string) => void): Promise<ScalePoint[]> {
  const redis = await startRedis();
  const relays: RelayProcess[] = [];
  try {
    relays.push(...(await Promise.all(Array.from({ length: count }, () => startRelayProcess({ args: ["--store", redis.url] })))));
    const probe = await rawBinding(relays[0]!.url, "scale-probe");
    const points: ScalePoint[] = [];
    let offered = 0;
    let refused = 0;
    let registered = (await relayUsage(relays[0]!.url, probe.base)).registrations;
    for (const target of SESSION_COUNTS) {
      const more = target - offered;
      const memoryBefore = await redisMemory(redis);
      const refusals = await Promise.all(
        relays.map((relay, index) => registerIdle(relay.url, Math.floor(more / count) + (index < more % count ? 1 : 0))),
      );
      const added = (await relayUsage(relays[0]!.url, probe.base)).registrations - registered;
      const grown = (await redisMemory(redis)) - memoryBefore;
      registered += added;
      refused += refusals.reduce((sum, value) => sum + value, 0);
      offered = target;
      const point = {
        relays: count,
        offered,
        registered,
        refused,
        ...(added >= MIN_SESSIONS_MEASURED ? { redisBytesPerSession: Math.round(grown / added) } : {}),
        ...(registered + LOAD_SESSIONS > maxRelayRegistrations ? {} : await load(relays)),
      };
      progress(JSON.stringify(point));
      points.push(point);
    }
    return points;
  } finally {
    await Promise.all(relays.map((relay) => relay.stop().catch(() => undefined)));
    await redis.stop();
  }
}

function scaleMarkdown(curves: readonly ScalePoint[][], date: string, seconds: number): string {
  const lines = [
    SCALE_HEADING,
    "",
    `Generated by \`npm run scale\` (bench/scale.ts) on ${date} in ${seconds} s, on this machine (2 cores: the relays, Redis and every client share them). 1, 4 and 8 relay processes share one \`redis-server\`; the population of simulated sessions (idle registrations, spread round-robin over the relays) grows to 10,000 offered; at each size a raw-client cycles run (senders on the first relay, receiver on the last) and ${DELIVERY_SAMPLES} deliveries with \`watch-v1\` between fake Pis (origin on the first relay, worker on the last). Slopes are log–log against the sessions registered, over the points that have the figure (below the budget only two: read them as flat within this machine's noise, not as trends).`,
    "",
    "| relays | sessions offered | registered | refused | Redis B/session | cycles/s | delivery p95 ms |",
    "|---|---|---|---|---|---|---|",
    ...curves
      .flat()
      .map(
        (p) =>
          `| ${p.relays} | ${p.offered} | ${p.registered} | ${p.refused} | ${p.redisBytesPerSession ?? "— (too few added)"} | ${p.cyclesPerSecond ?? "— (no room)"} | ${p.deliveryP95Ms ?? "— (no room)"} |`,
      ),
    "",
    "| relays | slope of cycles/s | slope of delivery p95 | slope of Redis B/session |",
    "|---|---|---|---|",
    ...curves.map(
      (points) =>
        `| ${points[0]!.relays} | ${slope(points, (p) => p.cyclesPerSecond)} | ${slope(points, (p) => p.deliveryP95Ms)} | ${slope(points, (p) => p.redisBytesPerSession)} |`,
    ),
    "",
    `Where it bends: at \`maxRelayRegistrations\` (${maxRelayRegistrations}) registrations. The budget is the state's, shared by every relay on the Redis, so more relays do not hold more sessions: past it every connect is refused \`RELAY_CAPACITY\` (the simulated sessions are live — the longest lease — and a registration that never made a bound request is reclaimed only once \`relayRegistrationGraceMs\` old, longer than a point takes here), and the load's own new sessions find no room either (— in the table). Below the budget the costs stay flat in the population: each request touches its own registration and mailbox keys (hashes and sorted sets, O(1) or O(log n)), so cycles/s and delivery p95 do not depend on how many others are registered; they depend on how many relay processes share the 2 cores. Redis memory per session is the registration's hash and its index entries.`,
    "",
  ];
  return lines.join("\n");
}

if (import.meta.main) {
  const started = Date.now();
  const progress = (line: string) => process.stderr.write(`scale: ${line}\n`);
  const curves: ScalePoint[][] = [];
  for (const count of RELAY_COUNTS) curves.push(await curve(count, progress));
  const seconds = Math.round((Date.now() - started) / 1000);
  writeFileSync(join(import.meta.dir, "scale-results.json"), `${JSON.stringify({ date: new Date().toISOString(), curves }, null, 2)}\n`);
  replaceTail(PERFORMANCE_DOC, SCALE_HEADING, scaleMarkdown(curves, new Date().toISOString().slice(0, 10), seconds));
  process.stdout.write(`scale: ${curves.flat().length} points in ${seconds} s; docs/performance.md updated\n`);
}
