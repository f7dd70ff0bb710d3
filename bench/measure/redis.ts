/**
 * The Redis store, measured in the bench's run: relays sharing one real `redis-server`
 * (testkit/redis-process.ts; skipped with its reason when the Debian package `redis-server` is missing).
 *
 * - Envelope cycles/s through two relays sharing Redis ÷ through one relay on the in-process store:
 *   the raw-fetch cycles workload of ./cycles.ts (senders → one receiver, send + receive + ACK,
 *   1 KiB text), with the senders on relay A and the receiver on relay B, beside the same workload
 *   on one relay process with the in-process store; each round runs both back to back on fresh
 *   relays (and a fresh Redis), the order alternating; the figure is the median of the per-round
 *   ratios. The raw client keeps the client's own cost out of the ratio (the relays are measured).
 * - Delivery p95 across relays with `watch-v1`: ./delivery.ts with the origin on relay A and the
 *   worker on relay B (the doorbell crosses Redis pub/sub).
 * - Redis memory per queued 1 KiB envelope: `INFO memory` `used_memory` before and after queueing
 *   the envelopes of ./memory.ts (unacknowledged, over 16 mailboxes) through a relay engine on the
 *   Redis store, ÷ the envelopes.
 */
import { packageMissingReason } from "../../testkit/debian-package.ts";
import { REDIS_BINARY, REDIS_PACKAGE, type RedisProcess, startRedis } from "../../testkit/redis-process.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { maxInFlightRequests, reservedRequestSlots } from "../../src/protocol/limits.ts";
import { startRelayServer } from "../../src/relay-server/server.ts";
import { createRedisStore } from "../../src/relay-server/store/redis/index.ts";
import { childCpuMs } from "../lib/cpu.ts";
import { round } from "../lib/stats.ts";
import type { Figure } from "../report.ts";
import { activeItems, type CycleRun, runCycles } from "./cycles.ts";
import { deliveryBetween, type DeliveryRun } from "./delivery.ts";
import { memoryWorkload, PER_TARGET, QUICK_PER_TARGET, QUICK_TARGETS, TARGETS } from "./memory.ts";

const ROUNDS = 3;
const QUICK_ROUNDS = 1;
const ENVELOPES = 3_000;
const QUICK_ENVELOPES = 120;
const WARMUP_ENVELOPES = 400;
const QUICK_WARMUP_ENVELOPES = 20;
const DELIVERY_SAMPLES = 40;
/**
 * ACKs the receiver sends at once: what the real client allows (its ordinary lanes plus the slots
 * reserved for ACKs), so the receiver's relay is never past its admission bound. Both stores' runs
 * use it; the cycles rows of ./cycles.ts send a whole page of ACKs at once.
 */
const ACK_LANES = maxInFlightRequests + reservedRequestSlots;
const QUICK_DELIVERY_SAMPLES = 6;

export interface RedisCyclesRound {
  /** Which store ran first in this round. */
  readonly first: "redis" | "memory";
  readonly redis: CycleRun;
  readonly memory: CycleRun;
  /** Redis cycles/s ÷ in-process cycles/s. */
  readonly ratio: number;
}

export interface RedisResult {
  readonly cycles: {
    readonly rounds: readonly RedisCyclesRound[];
    /** Median of the per-round ratios. */
    readonly ratio: number;
    readonly redisCyclesPerSecond: number;
    readonly memoryCyclesPerSecond: number;
    readonly lost: number;
    readonly duplicates: number;
    /** Envelopes the relays still held after the runs (must be 0). */
    readonly left: number;
    /** CPU per cycle on the Redis store (medians of the rounds), µs. */
    readonly profile: CycleProfile;
    /** CPU per cycle on the in-process store: the relay and the clients, µs. */
    readonly memoryProfile: { readonly relayUs: number; readonly clientUs: number };
  };
  readonly delivery: DeliveryRun;
  readonly memory: {
    readonly envelopes: number;
    readonly bytesPerEnvelope: number;
    /** Canonical bytes of one envelope (what the budgets charge). */
    readonly encodedBytesPerEnvelope: number;
    readonly usedMemoryBefore: number;
    readonly usedMemoryAfter: number;
  };
  readonly redisVersion: string;
}

/** Measured, or skipped with the reason (the Debian package is missing). */
export type RedisMeasurement = { readonly skipped: string } | RedisResult;

export function isSkipped(measurement: RedisMeasurement): measurement is { readonly skipped: string } {
  return "skipped" in measurement;
}

/** The middle value (of an odd count; the upper middle of an even one). */
const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** A fresh Redis with two relay processes on it; `stop` ends them all. */
async function sharedRelays(): Promise<{ redis: RedisProcess; relays: RelayProcess[]; stop(): Promise<void> }> {
  const redis = await startRedis();
  const relays = await Promise.all([0, 1].map(() => startRelayProcess({ args: ["--store", redis.url] })));
  return {
    redis,
    relays,
    async stop() {
      await Promise.all(relays.map((relay) => relay.stop().catch(() => undefined)));
      await redis.stop();
    },
  };
}

/** Redis's own CPU so far (`INFO cpu`: user + system), µs. */
async function redisCpuUs(redis: RedisProcess): Promise<number> {
  const info = String(await redis.command("INFO", ["cpu"]));
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1] ?? "0");
  return (field("used_cpu_user") + field("used_cpu_sys")) * 1e6;
}

/** Where the CPU of one cycle on the Redis store goes (µs): Redis, the senders' relay, the receiver's relay, the bench's clients. */
export interface CycleProfile {
  readonly redisUs: number;
  readonly senderRelayUs: number;
  readonly receiverRelayUs: number;
  readonly clientUs: number;
}

async function redisCycles(total: number, warmup: number): Promise<{ run: CycleRun; left: number; profile: CycleProfile }> {
  const shared = await sharedRelays();
  try {
    const [a, b] = shared.relays as [RelayProcess, RelayProcess];
    await runCycles(a.url, "raw", warmup, { receiverUrl: b.url, ackLanes: ACK_LANES });
    const [redisBefore, receiverBefore] = [await redisCpuUs(shared.redis), childCpuMs(b.process.pid) ?? 0];
    const run = await runCycles(a.url, "raw", total, { receiverUrl: b.url, ackLanes: ACK_LANES, relayPid: a.process.pid });
    const profile = {
      redisUs: Math.round(((await redisCpuUs(shared.redis)) - redisBefore) / run.envelopes),
      senderRelayUs: run.relayCpuUsPerCycle,
      receiverRelayUs: Math.round((((childCpuMs(b.process.pid) ?? 0) - receiverBefore) * 1000) / run.envelopes),
      clientUs: run.clientCpuUsPerCycle,
    };
    return { run, left: await activeItems(a.url), profile };
  } finally {
    await shared.stop();
  }
}

async function memoryCycles(total: number, warmup: number): Promise<{ run: CycleRun; left: number }> {
  const relay = await startRelayProcess();
  try {
    await runCycles(relay.url, "raw", warmup, { ackLanes: ACK_LANES });
    const run = await runCycles(relay.url, "raw", total, { relayPid: relay.process.pid, ackLanes: ACK_LANES });
    return { run, left: await activeItems(relay.url) };
  } finally {
    await relay.stop().catch(() => undefined);
  }
}

async function measureCyclesRatio(rounds: number, total: number, warmup: number): Promise<RedisResult["cycles"]> {
  const done: RedisCyclesRound[] = [];
  const profiles: CycleProfile[] = [];
  let left = 0;
  for (let index = 0; index < rounds; index += 1) {
    const first = index % 2 === 0 ? "redis" : "memory";
    const runs: { redis?: CycleRun; memory?: CycleRun } = {};
    for (const store of first === "redis" ? (["redis", "memory"] as const) : (["memory", "redis"] as const)) {
      if (store === "redis") {
        const measured = await redisCycles(total, warmup);
        profiles.push(measured.profile);
        runs.redis = measured.run;
        left += measured.left;
      } else {
        const measured = await memoryCycles(total, warmup);
        runs.memory = measured.run;
        left += measured.left;
      }
    }
    done.push({
      first,
      redis: runs.redis!,
      memory: runs.memory!,
      ratio: round(runs.redis!.cyclesPerSecond / runs.memory!.cyclesPerSecond),
    });
  }
  const all = done.flatMap((item) => [item.redis, item.memory]);
  return {
    rounds: done,
    ratio: median(done.map((item) => item.ratio)),
    redisCyclesPerSecond: median(done.map((item) => item.redis.cyclesPerSecond)),
    memoryCyclesPerSecond: median(done.map((item) => item.memory.cyclesPerSecond)),
    lost: all.reduce((sum, run) => sum + run.lost, 0),
    duplicates: all.reduce((sum, run) => sum + run.duplicates, 0),
    left,
    profile: {
      redisUs: median(profiles.map((item) => item.redisUs)),
      senderRelayUs: median(profiles.map((item) => item.senderRelayUs)),
      receiverRelayUs: median(profiles.map((item) => item.receiverRelayUs)),
      clientUs: median(profiles.map((item) => item.clientUs)),
    },
    memoryProfile: {
      relayUs: median(done.map((item) => item.memory.relayCpuUsPerCycle)),
      clientUs: median(done.map((item) => item.memory.clientCpuUsPerCycle)),
    },
  };
}

async function measureCrossDelivery(samples: number): Promise<DeliveryRun> {
  const shared = await sharedRelays();
  try {
    const [a, b] = shared.relays as [RelayProcess, RelayProcess];
    return await deliveryBetween({ origin: a.url, worker: b.url }, "watch-v1", samples);
  } finally {
    await shared.stop();
  }
}

export function usedMemory(info: unknown): number {
  const match = /^used_memory:(\d+)/m.exec(String(info));
  if (match === null) throw new Error("redis: INFO memory has no used_memory");
  return Number(match[1]);
}

async function measureRedisMemory(targets: number, perTarget: number): Promise<RedisResult["memory"] & { version: string }> {
  const redis = await startRedis();
  const relay = await startRelayServer({ port: 0, env: {}, store: await createRedisStore({ url: redis.url }) });
  try {
    const workload = await memoryWorkload(relay, targets, perTarget);
    const before = usedMemory(await redis.command("INFO", ["memory"]));
    const total = await workload.queue();
    const after = usedMemory(await redis.command("INFO", ["memory"]));
    const usage = await relay.engine.usage();
    if (usage.activeItems !== total) throw new Error(`redis memory: ${usage.activeItems} of ${total} envelopes queued`);
    const version = /^redis_version:(\S+)/m.exec(String(await redis.command("INFO", ["server"])))?.[1] ?? "unknown";
    return {
      envelopes: total,
      bytesPerEnvelope: Math.round((after - before) / total),
      encodedBytesPerEnvelope: round(usage.activeBytes / total, 0),
      usedMemoryBefore: before,
      usedMemoryAfter: after,
      version,
    };
  } finally {
    await relay.stop();
    await redis.stop();
  }
}

export async function measureRedis(options: { quick?: boolean } = {}): Promise<RedisMeasurement> {
  const missing = packageMissingReason(REDIS_BINARY, REDIS_PACKAGE);
  if (missing !== undefined) return { skipped: missing };
  const quick = options.quick === true;
  const cycles = await measureCyclesRatio(
    quick ? QUICK_ROUNDS : ROUNDS,
    quick ? QUICK_ENVELOPES : ENVELOPES,
    quick ? QUICK_WARMUP_ENVELOPES : WARMUP_ENVELOPES,
  );
  const delivery = await measureCrossDelivery(quick ? QUICK_DELIVERY_SAMPLES : DELIVERY_SAMPLES);
  const { version, ...memory } = await measureRedisMemory(quick ? QUICK_TARGETS : TARGETS, quick ? QUICK_PER_TARGET : PER_TARGET);
  return { cycles, delivery, memory, redisVersion: version };
}

/** The goals the Redis figures are held to (bench/goals.ts `GOALS`). */
export interface RedisGoals {
  readonly redisCyclesRatio: number;
  readonly watchDeliveryP95Ms: number;
  readonly bytesPerQueuedEnvelope: number;
}

const fmt = (value: number) => (Math.abs(value) >= 100 ? Math.round(value).toLocaleString("en-US") : String(value));

/** The Redis rows of docs/performance.md (none when the measurement was skipped). */
export function redisFigures(
  measurement: RedisMeasurement,
  goals: RedisGoals,
  anchors: { readonly deliveryAck: string; readonly memory: string },
): Figure[] {
  if (isSkipped(measurement)) return [];
  const { cycles: c, delivery: d, memory: m } = measurement;
  const perRound = c.rounds.map((item) => `${item.ratio} (${item.first} first)`).join(", ");
  return [
    {
      id: "redis-cycles-ratio",
      label: "Envelope cycles/s through two relays sharing Redis ÷ one relay on the in-process store",
      measured: c.ratio,
      unit: "×",
      detail: `${fmt(c.redisCyclesPerSecond)} vs ${fmt(c.memoryCyclesPerSecond)} cycles/s (medians); per round ${c.rounds.map((item) => item.ratio).join(", ")}; lost ${c.lost}, duplicates ${c.duplicates}`,
      goal: { op: ">=", value: goals.redisCyclesRatio },
      anchor: "—",
      how: `the raw-fetch cycles workload (4 senders → 1 receiver, send + receive + ACK, 1 KiB text, the receiver sending at most ${ACK_LANES} ACKs at once) with the senders on relay A and the receiver on relay B, two relay processes started with \`--store\` on one \`redis-server\` ${measurement.redisVersion} (persistence off, loopback), beside the same workload on one relay process with the in-process store; ${c.rounds.length} round${c.rounds.length === 1 ? "" : "s"} of ${fmt(c.rounds[0]?.redis.envelopes ?? 0)} envelopes per run after a warm-up, each on fresh relays and a fresh Redis, the order alternating; the figure is the median of the per-round ratios. Every accepted id must be received exactly once and the relays must end empty.`,
      evidence: `per round ${perRound}. CPU per cycle (µs, medians): on Redis — Redis ${c.profile.redisUs}, the senders' relay ${c.profile.senderRelayUs}, the receiver's relay ${c.profile.receiverRelayUs}, the clients ${c.profile.clientUs} (${c.profile.redisUs + c.profile.senderRelayUs + c.profile.receiverRelayUs + c.profile.clientUs} in all); in process — the relay ${c.memoryProfile.relayUs}, the clients ${c.memoryProfile.clientUs} (${c.memoryProfile.relayUs + c.memoryProfile.clientUs}). With every process on the same 2 cores, the ratio is bounded near the inverse ratio of those sums.`,
      reason:
        "every request on the Redis store costs the relay a round trip to Redis per store call (a send is one script, its binding and admission together; a receive or an ACK two: the binding lookup, then the operation's script) and Redis its command and Lua time; on this machine the two relays, Redis and the clients share 2 cores",
    },
    {
      id: "redis-delivery-watch",
      label: "Delivery latency p95 across relays (origin on A, worker on B), `watch-v1` over Redis pub/sub",
      measured: d.ackMs.p95,
      unit: "ms",
      detail: `p50 ${d.ackMs.p50}; accepted → inserted p50 ${d.insertMs.p50}, p95 ${d.insertMs.p95}; n=${d.ackMs.count}`,
      goal: { op: "<=", value: goals.watchDeliveryP95Ms },
      anchor: anchors.deliveryAck,
      how: "the delivery-watch measurement (the real extension stack on both sides, a 1 KiB task every 100 ms, from `createTask` returning to the worker's `acknowledge` reply) with the origin bound to relay A and the worker to relay B, both relays on one Redis: the worker's watch parks on relay B and is rung through Redis pub/sub when relay A admits the assignment. As there, the worker proves its endpoint to the origin before the warm-up (its hello and answer cross the relays too; untimed), so every timed assignment leaves with its `createTask`.",
    },
    {
      id: "redis-memory",
      label: "Redis memory per queued 1 KiB envelope",
      measured: m.bytesPerEnvelope,
      unit: "B",
      detail: `encoded ${m.encodedBytesPerEnvelope} B; ${fmt(m.envelopes)} envelopes; used_memory ${fmt(m.usedMemoryBefore)} → ${fmt(m.usedMemoryAfter)} B`,
      goal: { op: "<=", value: goals.bytesPerQueuedEnvelope },
      anchor: anchors.memory,
      how: "a relay engine on the Redis store (`startRelayServer` with `createRedisStore`, a fresh `redis-server`), the envelopes of the memory row queued unacknowledged over 16 mailboxes; Redis's `INFO memory` `used_memory` before and after, ÷ the envelopes. It includes everything Redis keeps per envelope: its mailbox sorted-set member (the packed envelope id followed by its text), its receipt and its expiry entry (src/relay-server/store/redis/keys.ts).",
      evidence: `used_memory grows ${m.bytesPerEnvelope} B per envelope whose canonical text is ${m.encodedBytesPerEnvelope} B.`,
      reason:
        "per envelope Redis keeps one mailbox sorted-set member — the envelope id packed to 23 bytes, then the text, one sds string rounded up to the allocator's size class (1,536 B for this text) with its skiplist node and dict entry — a receipt of ≈ 74 B (a state letter, the budget charge, the digest and the endpoints packed to their bytes, the cursor) in a hash field named by the packed id, and a sorted-set entry for receipt expiry; the acceptance id is derived (a keyed hash of the envelope id), the acceptance time is the expiry entry's score. The text in a hash of its own beside the sorted set, and every id held as text in the receipt, measured ≈ 2,280 B. What remains beyond the text is the allocator's rounding and Redis's per-entry structures",
    },
  ];
}

/** The Redis integrity check: nothing lost or twice, relays empty, every assignment ACKed once. */
export function redisChecks(measurement: RedisMeasurement): { name: string; ok: boolean; detail: string }[] {
  if (isSkipped(measurement)) return [];
  const { cycles: c, delivery: d } = measurement;
  return [
    {
      name: "redis: two relays lose and duplicate nothing, end empty; every assignment across relays ACKed, none inserted twice",
      ok: c.lost === 0 && c.duplicates === 0 && c.left === 0 && d.unacknowledged === 0 && d.duplicateInsertions === 0,
      detail: `cycles lost ${c.lost} dup ${c.duplicates} left ${c.left}; delivery unacked ${d.unacknowledged} dup ${d.duplicateInsertions}`,
    },
  ];
}
