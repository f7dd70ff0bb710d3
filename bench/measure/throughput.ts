/**
 * Request rate: one raw `fetch` client loop (fixed request count, fixed concurrency) against a
 * `Bun.serve` JSON echo and against the real relay (`receive` on an empty mailbox, and `health`),
 * each server in its own child process; rounds alternate between the servers so drift hits both.
 * Also the same relay operation through the real client (`VolatileTaskSession.receive`: ky + p-queue +
 * reply validation), to show what the client stack costs, and the echo reading its bodies the way
 * the relay does (a ReadableStream reader), to show what that costs.
 */
import { maxInFlightRequests } from "../../src/protocol/limits.ts";
import { RELAY_ENDPOINT_PATH } from "../../src/protocol/names.ts";
import type { VolatileTaskSession } from "../../src/relay-client/session.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { CLI_BUNDLE } from "../../src/host/runtime.ts";
import { usersNode } from "../lib/processes.ts";
import { startEcho } from "../lib/processes.ts";
import { now, pool, roundSummary, type Summary, summarize } from "../lib/stats.ts";
import { boundSession, rawBinding } from "../lib/wire.ts";

/** Requests per round and per server (after the warm-up). */
const REQUESTS_PER_ROUND = 2_500;
const QUICK_REQUESTS_PER_ROUND = 200;
const WARMUP_REQUESTS = 1_000;
const QUICK_WARMUP_REQUESTS = 50;
/** Odd, so the median of the per-round ratios is one round's ratio. */
const ROUNDS = 5;
const QUICK_ROUNDS = 1;
/** Client concurrency: the relay client's ordinary lane width. */
const CONCURRENCY = maxInFlightRequests;

export interface RateSample {
  readonly requests: number;
  readonly seconds: number;
  readonly perSecond: number;
  readonly failures: number;
  readonly latencyMs: Summary;
}

export interface ThroughputResult {
  readonly concurrency: number;
  readonly requestsPerRound: number;
  readonly rounds: number;
  readonly requestBytes: { readonly echo: number; readonly receive: number; readonly health: number };
  readonly echo: RateSample;
  /** The echo reading bodies the way the relay does (ReadableStream reader). */
  readonly echoStreamBody: RateSample;
  readonly relayReceive: RateSample;
  readonly relayHealth: RateSample;
  readonly clientReceive: RateSample;
  /** The relay as Pi's users run it (the built `dist/pi-tasks.js` on Node ≥ 22.19), when that Node is here. */
  readonly nodeRelayReceive?: RateSample;
  /** Median per-round ratio of the Node relay's `receive` rate to the Bun relay's (same run, same rounds). */
  readonly nodeRelayRatio?: number;
  /** The Node that ran it. */
  readonly nodeVersion?: string;
  /** Median over rounds of (relay receive rate ÷ echo rate in the same round). */
  readonly ratio: number;
  readonly roundRatios: readonly number[];
  readonly healthRatio: number;
  /** Median per-round ratio of the real client's `receive` loop to the raw-fetch `receive` loop (same relay). */
  readonly clientRatio: number;
  /** Median per-round ratio of the stream-reading echo to the plain echo. */
  readonly streamBodyRatio: number;
}

async function rawLoop(url: string, body: string, count: number): Promise<{ seconds: number; failures: number; latencies: number[] }> {
  const latencies: number[] = new Array(count);
  let failures = 0;
  const started = now();
  await pool(count, CONCURRENCY, async (index) => {
    const at = now();
    const response = await fetch(url, { method: "POST", body, headers: { "content-type": "application/json" } });
    const text = await response.text();
    latencies[index] = now() - at;
    if (response.status !== 200 || text.length === 0) failures += 1;
  });
  return { seconds: (now() - started) / 1000, failures, latencies };
}

async function clientLoop(
  session: VolatileTaskSession,
  count: number,
): Promise<{ seconds: number; failures: number; latencies: number[] }> {
  const latencies: number[] = new Array(count);
  let failures = 0;
  const started = now();
  await pool(count, CONCURRENCY, async (index) => {
    const at = now();
    try {
      await session.receive("0");
    } catch {
      failures += 1;
    }
    latencies[index] = now() - at;
  });
  return { seconds: (now() - started) / 1000, failures, latencies };
}

function combine(runs: { seconds: number; failures: number; latencies: number[] }[]): RateSample {
  const requests = runs.reduce((sum, run) => sum + run.latencies.length, 0);
  const seconds = runs.reduce((sum, run) => sum + run.seconds, 0);
  return {
    requests,
    seconds: Math.round(seconds * 1000) / 1000,
    perSecond: Math.round(requests / seconds),
    failures: runs.reduce((sum, run) => sum + run.failures, 0),
    latencyMs: roundSummary(summarize(runs.flatMap((run) => run.latencies))),
  };
}

/** A raw loop's URL and request body. */
interface Target {
  readonly url: string;
  readonly body: string;
}

/** What the raw loops hit: the echo (plain and stream-reading), the relay's receive and health, and the relay on Node. */
interface Targets {
  readonly echo: Target;
  readonly stream: Target;
  readonly receive: Target;
  readonly health: Target;
  readonly node: Target | undefined;
}

type Run = Awaited<ReturnType<typeof rawLoop>>;

interface Runs {
  readonly echo: Run[];
  readonly stream: Run[];
  readonly receive: Run[];
  readonly health: Run[];
  readonly client: Run[];
  readonly node: Run[];
}

/** The raw loops' own registrations (protected like the session's), with as empty a mailbox; the echo gets the same body as the relay's receive. */
async function targetsOf(relayUrl: string, nodeRelayUrl: string | undefined, echoUrl: string, echoStreamUrl: string): Promise<Targets> {
  const { base } = await rawBinding(relayUrl, "rate-raw");
  const receiveBody = JSON.stringify({ operation: "receive", ...base, cursor: "0", limit: 50 });
  const node =
    nodeRelayUrl === undefined
      ? undefined
      : {
          url: `${nodeRelayUrl}${RELAY_ENDPOINT_PATH}`,
          body: JSON.stringify({ operation: "receive", ...(await rawBinding(nodeRelayUrl, "rate-raw")).base, cursor: "0", limit: 50 }),
        };
  const relay = `${relayUrl}${RELAY_ENDPOINT_PATH}`;
  return {
    echo: { url: `${echoUrl}/echo`, body: receiveBody },
    stream: { url: `${echoStreamUrl}/echo`, body: receiveBody },
    receive: { url: relay, body: receiveBody },
    health: { url: relay, body: JSON.stringify({ operation: "health", ...base }) },
    node,
  };
}

const loop = (target: Target, count: number) => rawLoop(target.url, target.body, count);

async function warmUp(targets: Targets, session: VolatileTaskSession, warmup: number): Promise<void> {
  await loop(targets.echo, warmup);
  await loop(targets.stream, warmup);
  await loop(targets.receive, warmup);
  await loop(targets.health, warmup);
  await clientLoop(session, warmup);
  if (targets.node !== undefined) await loop(targets.node, warmup);
}

/** Each round runs every loop back to back, so a round's ratios are immune to drift between rounds. */
async function measureRounds(targets: Targets, session: VolatileTaskSession, perRound: number, rounds: number): Promise<Runs> {
  const runs: Runs = { echo: [], stream: [], receive: [], health: [], client: [], node: [] };
  for (let round = 0; round < rounds; round += 1) {
    runs.echo.push(await loop(targets.echo, perRound));
    runs.stream.push(await loop(targets.stream, perRound));
    runs.receive.push(await loop(targets.receive, perRound));
    if (targets.node !== undefined) runs.node.push(await loop(targets.node, perRound));
    runs.health.push(await loop(targets.health, perRound));
    runs.client.push(await clientLoop(session, perRound));
  }
  return runs;
}

/** The rates of every loop, and the medians of the per-round ratios (robust to one disturbed round). */
function throughputResult(
  targets: Targets,
  runs: Runs,
  shape: { readonly perRound: number; readonly rounds: number },
  node: ReturnType<typeof usersNode>,
): ThroughputResult {
  const rate = (run: { seconds: number; latencies: number[] }) => run.latencies.length / run.seconds;
  const medianRatio = (list: { seconds: number; latencies: number[] }[], base = runs.echo) => {
    const ratios = list.map((run, index) => rate(run) / rate(base[index]!)).sort((a, b) => a - b);
    return Math.round(ratios[Math.floor(ratios.length / 2)]! * 1000) / 1000;
  };
  return {
    concurrency: CONCURRENCY,
    requestsPerRound: shape.perRound,
    rounds: shape.rounds,
    requestBytes: { echo: targets.echo.body.length, receive: targets.receive.body.length, health: targets.health.body.length },
    echo: combine(runs.echo),
    echoStreamBody: combine(runs.stream),
    relayReceive: combine(runs.receive),
    relayHealth: combine(runs.health),
    clientReceive: combine(runs.client),
    ratio: medianRatio(runs.receive),
    roundRatios: runs.receive.map((run, index) => Math.round((rate(run) / rate(runs.echo[index]!)) * 1000) / 1000),
    healthRatio: medianRatio(runs.health),
    clientRatio: medianRatio(runs.client, runs.receive),
    streamBodyRatio: medianRatio(runs.stream),
    ...(node === undefined
      ? {}
      : { nodeRelayReceive: combine(runs.node), nodeRelayRatio: medianRatio(runs.node, runs.receive), nodeVersion: node.version }),
  };
}

export async function measureThroughput(options: { quick?: boolean } = {}): Promise<ThroughputResult> {
  const quick = options.quick === true;
  const perRound = quick ? QUICK_REQUESTS_PER_ROUND : REQUESTS_PER_ROUND;
  const warmup = quick ? QUICK_WARMUP_REQUESTS : WARMUP_REQUESTS;
  const rounds = quick ? QUICK_ROUNDS : ROUNDS;
  const echo = await startEcho();
  const echoStream = await startEcho({ streamBody: true });
  const relay = await startRelayProcess();
  const node = usersNode();
  const nodeRelay = node === undefined ? undefined : await startRelayProcess({ command: [node.path, CLI_BUNDLE] });
  const { session } = await boundSession(relay.url, "rate");
  try {
    const targets = await targetsOf(relay.url, nodeRelay?.url, echo.url, echoStream.url);
    await warmUp(targets, session, warmup);
    const runs = await measureRounds(targets, session, perRound, rounds);
    return throughputResult(targets, runs, { perRound, rounds }, node);
  } finally {
    session.close();
    await relay.stop().catch(() => undefined);
    await nodeRelay?.stop().catch(() => undefined);
    await echo.stop().catch(() => undefined);
    await echoStream.stop().catch(() => undefined);
  }
}
