/**
 * Delivery latency: relay acceptance of an assignment (the origin's `createTask` returned) → the
 * worker's relay ACK of it (the acknowledge reply returned), with both sides on the real extension
 * stack (`bench/lib/fake-pi.ts`: lifecycle, configured core, Pi presenter, scheduler, watch) and
 * real passes at their real cadence. Also accepted → `pi-tasks-event` inserted at the worker.
 *
 * Two relays: the real one, which advertises `watch-v1` (the worker's doorbell triggers a pass as
 * soon as mail waits), and the same relay behind the fault proxy rewriting the profile reply to
 * drop `features` (a plain Wolfpack relay: the worker polls at the 1 s active cadence). Sends are
 * spaced 100 ms apart, so their phase against the poll is spread evenly.
 *
 * Task content goes only to an endpoint that proved which key holds it (src/core/proofs.ts): before
 * the warm-up the worker proves itself to the origin (the origin's hello, answered by the worker's
 * pass, taken in by the origin's; untimed), so every timed assignment leaves with its `createTask`
 * (`delivery: "accepted"`, checked) and the figure stays accepted → ACK between parties that know
 * each other. A first assignment to a new worker adds that hello round trip before its acceptance.
 */
import { coreInternals } from "../../src/core/task-core.ts";
import { KiB, msPerSecond } from "../../src/protocol/limits.ts";
import { eventually } from "../../testkit/async.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { createFaultProxy } from "../../testkit/fault-proxy.ts";
import { boundEndpoint, type FakePi, startFakePi } from "../lib/fake-pi.ts";
import { now, roundSummary, sleepUntil, type Summary, summarize } from "../lib/stats.ts";
import { introduceFakePis, requireSentAtOnce } from "../lib/proofs.ts";
import { filler } from "../lib/wire.ts";
import { ackRequestOf, type LoggedRequest } from "../lib/request-log.ts";
import { join } from "node:path";
import { type Subprocess, spawn } from "bun";
import { readJsonLines } from "../../src/demo/pi-rpc.ts";
import { within } from "../../src/platform/waits.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { proveEndpoint } from "../lib/proofs.ts";

const RATE_PER_SECOND = 10;
const WATCH_SAMPLES = 60;
const POLL_SAMPLES = 60;
const QUICK_SAMPLES = 6;
const TASK_TEXT_CHARS = KiB;
/** How long to wait for the last ACKs after the last send. */
const DRAIN_TIMEOUT_MS = 10_000;
const WARMUP_TIMEOUT_MS = 15_000;
/** How often a wait re-checks its condition. */
const POLL_MS = 2;
const WORKER_SCRIPT = join(import.meta.dir, "..", "scenarios", "delivery-worker.ts");
/** Wall-clock milliseconds with sub-millisecond resolution, comparable with the worker process's. */
const wallNow = () => performance.timeOrigin + performance.now();

export interface DeliveryRun {
  readonly mode: "watch-v1" | "poll";
  readonly featuresSeen: readonly string[];
  readonly samples: number;
  readonly ackMs: Summary;
  readonly insertMs: Summary;
  /** Accepted → the worker's acknowledging request started, and that request's own time (its reply read). */
  readonly ackStartMs: Summary;
  readonly ackRequestMs: Summary;
  /** The worker's relay requests per delivery while sampling, by operation. */
  readonly workerRequestsPerDelivery: Readonly<Record<string, number>>;
  /** Accepted assignments never ACKed within the drain timeout. */
  readonly unacknowledged: number;
  /** Insertions of the same event more than once. */
  readonly duplicateInsertions: number;
}

export interface DeliveryResult {
  readonly watch: DeliveryRun;
  readonly poll: DeliveryRun;
  /** `watch-v1` with the worker in a process of its own, as in use. */
  readonly watchProcesses: ProcessesRun;
}

/** The cross-process run: accepted → ACK and accepted → inserted, wall clock across the processes. */
export interface ProcessesRun {
  readonly samples: number;
  readonly ackMs: Summary;
  readonly insertMs: Summary;
  readonly unacknowledged: number;
}

async function runMode(mode: DeliveryRun["mode"], samples: number): Promise<DeliveryRun> {
  const relay = await startRelayProcess();
  const proxy = mode === "poll" ? createFaultProxy({ target: relay.url }) : undefined;
  proxy?.push({
    operation: "profile",
    kind: "rewrite",
    times: Number.POSITIVE_INFINITY,
    rewrite: (body: Record<string, unknown>) => {
      delete body.features;
      return body;
    },
  });
  const url = proxy?.url ?? relay.url;
  try {
    return await deliveryBetween({ origin: url, worker: url }, mode, samples);
  } finally {
    await proxy?.stop().catch(() => undefined);
    await relay.stop().catch(() => undefined);
  }
}

/** The measurement itself, with the origin on one relay URL and the worker on another (or the same). */
export async function deliveryBetween(
  urls: { readonly origin: string; readonly worker: string },
  mode: DeliveryRun["mode"],
  samples: number,
): Promise<DeliveryRun> {
  const insertedAt = new Map<string, number>();
  let origin: FakePi | undefined;
  let worker: FakePi | undefined;
  try {
    worker = startFakePi({ url: urls.worker, worker: true, onInsert: (insertion) => insertedAt.set(insertion.taskId, insertion.at) });
    origin = startFakePi({ url: urls.origin });
    const to = await boundEndpoint(worker);
    await boundEndpoint(origin);
    const featuresSeen = [...coreInternals(worker.core()).session.features()];
    const text = filler(TASK_TEXT_CHARS);
    const send = async () => {
      const created = await origin!.lifecycle.run((core) => core.createTask({ to, task: text }));
      const acceptedAt = now();
      return { ...requireSentAtOnce(created, `delivery (${mode})`), acceptedAt };
    };
    // The worker proves itself to the origin first (untimed): every assignment below leaves at once.
    await introduceFakePis(origin, worker, to);
    // Warm-up: one task, so the worker has an active task (the 1 s cadence) and every path is hot.
    const first = await send();
    if (!(await eventually(() => worker!.log.ackedAt(first.envelopeId) !== undefined, WARMUP_TIMEOUT_MS, POLL_MS)))
      throw new Error(`${mode}: warm-up task never acknowledged`);
    const sent: { taskId: string; envelopeId: string; acceptedAt: number }[] = [];
    const intervalMs = msPerSecond / RATE_PER_SECOND;
    const start = now() + intervalMs;
    const sampling = worker.log.entries.length;
    for (let index = 0; index < samples; index += 1) {
      await sleepUntil(start + index * intervalMs);
      sent.push(await send());
    }
    await eventually(() => sent.every((item) => worker!.log.ackedAt(item.envelopeId) !== undefined), DRAIN_TIMEOUT_MS, POLL_MS);
    const ack: number[] = [];
    const insert: number[] = [];
    const ackStart: number[] = [];
    const ackRequest: number[] = [];
    let unacknowledged = 0;
    for (const item of sent) {
      const ackedAt = worker.log.ackedAt(item.envelopeId);
      if (ackedAt === undefined) unacknowledged += 1;
      else ack.push(ackedAt - item.acceptedAt);
      const request = ackRequestOf(worker.log, item.envelopeId);
      if (request !== undefined) {
        ackStart.push(request.startedAt - item.acceptedAt);
        ackRequest.push(request.endedAt - request.startedAt);
      }
      const at = insertedAt.get(item.taskId);
      if (at !== undefined) insert.push(at - item.acceptedAt);
    }
    const ids = worker.insertions.map((insertion) => insertion.eventId);
    return {
      mode,
      featuresSeen,
      samples,
      ackMs: roundSummary(summarize(ack), 1),
      insertMs: roundSummary(summarize(insert), 1),
      ackStartMs: roundSummary(summarize(ackStart), 1),
      ackRequestMs: roundSummary(summarize(ackRequest), 1),
      workerRequestsPerDelivery: perDelivery(worker.log.entries.slice(sampling), samples),
      unacknowledged,
      duplicateInsertions: ids.length - new Set(ids).size,
    };
  } finally {
    await origin?.stop().catch(() => undefined);
    await worker?.stop().catch(() => undefined);
  }
}

/** Requests per delivery by operation (two decimals). */
function perDelivery(entries: readonly LoggedRequest[], samples: number): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const entry of entries) counts[entry.operation] = (counts[entry.operation] ?? 0) + 1;
  return Object.fromEntries(Object.entries(counts).map(([operation, count]) => [operation, Math.round((count / samples) * 100) / 100]));
}

/** The worker's lines (bench/scenarios/delivery-worker.ts), read as they come. */
interface WorkerLines {
  readonly endpoint: Promise<TaskEndpoint>;
  readonly acks: Map<string, number>;
  readonly inserts: Map<string, number>;
}

function readWorker(child: Subprocess<"pipe", "pipe", "pipe">): WorkerLines {
  const acks = new Map<string, number>();
  const inserts = new Map<string, number>();
  let ready: (endpoint: TaskEndpoint) => void = () => undefined;
  const endpoint = new Promise<TaskEndpoint>((resolve) => {
    ready = resolve;
  });
  void readJsonLines(child.stdout, (record) => {
    const line = record as Record<string, unknown>;
    if (line.ready === true) ready(line.endpoint as TaskEndpoint);
    if (line.ack === true) acks.set(String(line.envelopeId), Number(line.at));
    if (line.inserted === true && !inserts.has(String(line.taskId))) inserts.set(String(line.taskId), Number(line.at));
  });
  return {
    endpoint: within(endpoint, WARMUP_TIMEOUT_MS).then((found) => found ?? Promise.reject(new Error("the worker process never bound"))),
    acks,
    inserts,
  };
}

/**
 * `watch-v1` delivery with the worker in a process of its own (bench/scenarios/delivery-worker.ts),
 * the relay in another and the origin in the bench's: each party on its own thread, as in use.
 */
async function deliveryAcrossProcesses(samples: number): Promise<ProcessesRun> {
  const relay = await startRelayProcess();
  // `env: process.env`: Bun.spawn passes the process's environment as it started, not as it is now —
  // the worker must share the bench's Pi agent directory (bench/lib/fake-pi.ts), hence its identity.
  const child = spawn([process.execPath, WORKER_SCRIPT, relay.url], { env: process.env, stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  let origin: FakePi | undefined;
  try {
    const lines = readWorker(child);
    const to = await lines.endpoint;
    origin = startFakePi({ url: relay.url });
    await boundEndpoint(origin);
    await proveEndpoint(() => origin!.core(), to, { pass: () => origin!.core().refresh() });
    const text = filler(TASK_TEXT_CHARS);
    const send = async () => {
      const created = await origin!.lifecycle.run((core) => core.createTask({ to, task: text }));
      return { ...requireSentAtOnce(created, "delivery (processes)"), acceptedAt: wallNow() };
    };
    const first = await send();
    if (!(await eventually(() => lines.acks.has(first.envelopeId), WARMUP_TIMEOUT_MS, POLL_MS)))
      throw new Error("processes: warm-up task never acknowledged");
    const sent: { taskId: string; envelopeId: string; acceptedAt: number }[] = [];
    const intervalMs = msPerSecond / RATE_PER_SECOND;
    const start = now() + intervalMs;
    for (let index = 0; index < samples; index += 1) {
      await sleepUntil(start + index * intervalMs);
      sent.push(await send());
    }
    await eventually(() => sent.every((item) => lines.acks.has(item.envelopeId)), DRAIN_TIMEOUT_MS, POLL_MS);
    const ack = sent.flatMap((item) => (lines.acks.has(item.envelopeId) ? [lines.acks.get(item.envelopeId)! - item.acceptedAt] : []));
    const insert = sent.flatMap((item) => (lines.inserts.has(item.taskId) ? [lines.inserts.get(item.taskId)! - item.acceptedAt] : []));
    return {
      samples,
      ackMs: roundSummary(summarize(ack), 1),
      insertMs: roundSummary(summarize(insert), 1),
      unacknowledged: sent.length - ack.length,
    };
  } finally {
    await origin?.stop().catch(() => undefined);
    child.stdin.end();
    await within(child.exited, DRAIN_TIMEOUT_MS);
    child.kill("SIGKILL");
    await relay.stop().catch(() => undefined);
  }
}

export async function measureDelivery(options: { quick?: boolean } = {}): Promise<DeliveryResult> {
  const quick = options.quick === true;
  const watch = await runMode("watch-v1", quick ? QUICK_SAMPLES : WATCH_SAMPLES);
  const poll = await runMode("poll", quick ? QUICK_SAMPLES : POLL_SAMPLES);
  const watchProcesses = await deliveryAcrossProcesses(quick ? QUICK_SAMPLES : WATCH_SAMPLES);
  return { watch, poll, watchProcesses };
}
