/**
 * Real Pi: relay acceptance of an assignment → the worker's `pi-tasks-event` message. The worker is
 * a real Pi 1.6 CLI in RPC mode under Bun with this extension and the scripted model
 * (`bench/scenarios/bench-worker.ts`: answers every turn with text, so the worker is idle again
 * right after its wake); the origin is a TaskCore on the same relay (child process). Each task is
 * sent once the worker has settled from the previous one. Latency = arrival (on the bench's end of
 * Pi's RPC stdout) of the `message_end` record of the task's `pi-tasks-event` − the moment
 * `createTask` returned with the relay's acceptance; Pi's own message timestamp is reported too.
 *
 * Task content goes only to an endpoint that proved which key holds it (src/core/proofs.ts): once
 * the worker is registered, the origin asks it (a hello the worker Pi's own passes answer) and runs
 * its passes until the proof is in — untimed, before the warm-up tasks — so every task leaves with
 * its `createTask` (`delivery: "accepted"`, checked) and the figure stays accepted → inserted.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EVENT_MESSAGE } from "../../extensions/pi-tasks/presenter.ts";
import { type RpcRecord, startPiRpc } from "../../src/demo/pi-rpc.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { workerShutdownGraceMs } from "../../src/protocol/limits.ts";
import { homeTrust } from "../../src/core/home-trust.ts";
import { closeParties, createParty } from "../../testkit/party.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { proveEndpoint, requireSentAtOnce } from "../lib/proofs.ts";
import { roundSummary, type Summary, summarize } from "../lib/stats.ts";
import { benchName } from "../lib/wire.ts";

const TASKS = 24;
const QUICK_TASKS = 2;
const WARMUP_TASKS = 2;
const QUICK_WARMUP_TASKS = 1;
const REGISTRATION_TIMEOUT_MS = 30_000;
const INSERT_TIMEOUT_MS = 15_000;
const SETTLE_TIMEOUT_MS = 15_000;
/** Quiet time after the worker settled before the next task. */
const GAP_MS = 100;
const SCENARIO = join(import.meta.dir, "..", "scenarios", "bench-worker.ts");

export interface PiResult {
  readonly tasks: number;
  /** accepted → `message_end` record arrival at the bench. */
  readonly insertMs: Summary;
  /** accepted → Pi's own `timestamp` of the message. */
  readonly insertByPiTimestampMs: Summary;
  readonly duplicateInsertions: number;
  readonly missing: number;
  readonly piStartMs: number;
}

type Message = { role?: string; customType?: string; timestamp?: number; details?: { taskId?: string; eventId?: string } };

function eventMessage(record: RpcRecord, taskId: string): Message | undefined {
  if (record.type !== "message_end") return undefined;
  const message = record.message as Message | undefined;
  return message?.role === "custom" && message.customType === EVENT_MESSAGE && message.details?.taskId === taskId ? message : undefined;
}

export async function measurePi(options: { quick?: boolean } = {}): Promise<PiResult> {
  const quick = options.quick === true;
  const tasks = quick ? QUICK_TASKS : TASKS;
  const warmup = quick ? QUICK_WARMUP_TASKS : WARMUP_TASKS;
  const relay = await startRelayProcess();
  const cwd = mkdtempSync(join(tmpdir(), "pi-tasks-bench-"));
  const workerName = benchName("pi-worker");
  // Origin and worker share one pi-tasks home: one user, one identity, no pairing dialog.
  const home = join(cwd, "pi-tasks-home");
  const started = Date.now();
  const worker = startPiRpc({
    session: workerName,
    relayUrl: relay.url,
    worker: true,
    cwd,
    script: SCENARIO,
    env: { WOLFPACK_JWT_SECRET: "", PI_TASKS_HOME: home },
  });
  const originParty = await createParty({ url: relay.url, name: benchName("pi-origin"), connect: false, trust: homeTrust(home) });
  const origin = originParty.core;
  try {
    const to = await waitForEndpoint(relay.url, workerName, { timeoutMs: REGISTRATION_TIMEOUT_MS, pollMs: 20 });
    const piStartMs = Date.now() - started;
    await origin.connect();
    // The worker Pi proves its endpoint to the origin (its scheduler answers the hello; the
    // origin, which runs no passes of its own, takes the answer in with these).
    await proveEndpoint(() => origin, to, { pass: () => origin.refresh(), timeoutMs: REGISTRATION_TIMEOUT_MS, pollMs: 20 });
    const byRecord: number[] = [];
    const byTimestamp: number[] = [];
    for (let index = 0; index < warmup + tasks; index += 1) {
      const from = worker.records.length;
      const created = await origin.createTask({ to, task: `bench task ${index}: note it and wait` });
      const acceptedAt = Date.now();
      requireSentAtOnce(created, "pi");
      const record = await worker.waitFor((candidate) => eventMessage(candidate, created.taskId) !== undefined, INSERT_TIMEOUT_MS, from);
      const message = eventMessage(record, created.taskId)!;
      if (index >= warmup) {
        byRecord.push((record as RpcRecord & { receivedAt: number }).receivedAt - acceptedAt);
        if (typeof message.timestamp === "number") byTimestamp.push(message.timestamp - acceptedAt);
      }
      // The wake's turn ends; the worker is idle again before the next task.
      await worker.waitFor((candidate) => candidate.type === "agent_settled", SETTLE_TIMEOUT_MS, worker.records.indexOf(record as never));
      await Bun.sleep(GAP_MS);
    }
    const inserted = worker.records
      .filter((record) => record.type === "message_end" && (record.message as Message | undefined)?.customType === EVENT_MESSAGE)
      .map((record) => String((record.message as Message).details?.eventId));
    return {
      tasks,
      insertMs: roundSummary(summarize(byRecord), 1),
      insertByPiTimestampMs: roundSummary(summarize(byTimestamp), 1),
      duplicateInsertions: inserted.length - new Set(inserted).size,
      missing: warmup + tasks - new Set(inserted).size,
      piStartMs,
    };
  } finally {
    await closeParties([originParty]);
    await worker.stop(workerShutdownGraceMs).catch(() => undefined);
    await relay.stop().catch(() => undefined);
    rmSync(cwd, { recursive: true, force: true });
  }
}
