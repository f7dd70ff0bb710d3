/**
 * Request rate: one raw `fetch` client loop (fixed request count, fixed concurrency) against a
 * `Bun.serve` JSON echo and against the real relay (`receive` on an empty mailbox, and `health`),
 * each server in its own child process; rounds alternate between the servers so drift hits both.
 * Also the same relay operation through the real client (`VolatileTaskSession.receive`: ky + p-queue +
 * reply validation), to show what the client stack costs, and the echo reading its bodies the way
 * the relay does (a ReadableStream reader), to show what that costs.
 */
import { maxInFlightRequests, RELAY_ENDPOINT_PATH } from "../../src/protocol/limits.ts";
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
    // The raw loops' own registration (protected like the session's), with as empty a mailbox.
    const { base } = await rawBinding(relay.url, "rate-raw");
    const receiveBody = JSON.stringify({ operation: "receive", ...base, cursor: "0", limit: 50 });
    const nodeReceive =
      nodeRelay === undefined
        ? undefined
        : {
            url: `${nodeRelay.url}${RELAY_ENDPOINT_PATH}`,
            body: JSON.stringify({ operation: "receive", ...(await rawBinding(nodeRelay.url, "rate-raw")).base, cursor: "0", limit: 50 }),
          };
    const healthBody = JSON.stringify({ operation: "health", ...base });
    const relayUrl = `${relay.url}${RELAY_ENDPOINT_PATH}`;
    const echoUrl = `${echo.url}/echo`;
    const echoStreamUrl = `${echoStream.url}/echo`;
    // The echo gets the same request body as the relay's receive.
    const echoBody = receiveBody;
    await rawLoop(echoUrl, echoBody, warmup);
    await rawLoop(echoStreamUrl, echoBody, warmup);
    await rawLoop(relayUrl, receiveBody, warmup);
    await rawLoop(relayUrl, healthBody, warmup);
    await clientLoop(session, warmup);
    if (nodeReceive !== undefined) await rawLoop(nodeReceive.url, nodeReceive.body, warmup);
    type Run = Awaited<ReturnType<typeof rawLoop>>;
    const runs = {
      echo: [] as Run[],
      stream: [] as Run[],
      receive: [] as Run[],
      health: [] as Run[],
      client: [] as Run[],
      node: [] as Run[],
    };
    for (let round = 0; round < rounds; round += 1) {
      runs.echo.push(await rawLoop(echoUrl, echoBody, perRound));
      runs.stream.push(await rawLoop(echoStreamUrl, echoBody, perRound));
      runs.receive.push(await rawLoop(relayUrl, receiveBody, perRound));
      if (nodeReceive !== undefined) runs.node.push(await rawLoop(nodeReceive.url, nodeReceive.body, perRound));
      runs.health.push(await rawLoop(relayUrl, healthBody, perRound));
      runs.client.push(await clientLoop(session, perRound));
    }
    const result = {
      echo: combine(runs.echo),
      echoStreamBody: combine(runs.stream),
      relayReceive: combine(runs.receive),
      relayHealth: combine(runs.health),
      clientReceive: combine(runs.client),
    };
    // Each round measures the echo and the relay back to back: the ratio of a round is immune to
    // drift between rounds, and the median of the rounds to one disturbed round.
    const rate = (run: { seconds: number; latencies: number[] }) => run.latencies.length / run.seconds;
    const medianRatio = (list: { seconds: number; latencies: number[] }[], base = runs.echo) => {
      const ratios = list.map((run, index) => rate(run) / rate(base[index]!)).sort((a, b) => a - b);
      return Math.round(ratios[Math.floor(ratios.length / 2)]! * 1000) / 1000;
    };
    return {
      concurrency: CONCURRENCY,
      requestsPerRound: perRound,
      rounds,
      requestBytes: { echo: echoBody.length, receive: receiveBody.length, health: healthBody.length },
      ...result,
      ratio: medianRatio(runs.receive),
      roundRatios: runs.receive.map((run, index) => Math.round((rate(run) / rate(runs.echo[index]!)) * 1000) / 1000),
      healthRatio: medianRatio(runs.health),
      clientRatio: medianRatio(runs.client, runs.receive),
      streamBodyRatio: medianRatio(runs.stream),
      ...(node === undefined
        ? {}
        : { nodeRelayReceive: combine(runs.node), nodeRelayRatio: medianRatio(runs.node, runs.receive), nodeVersion: node.version }),
    };
  } finally {
    session.close();
    await relay.stop().catch(() => undefined);
    await nodeRelay?.stop().catch(() => undefined);
    await echo.stop().catch(() => undefined);
    await echoStream.stop().catch(() => undefined);
  }
}
