/**
 * `npm run faults`: the fault matrix. Each fault runs the same small workload — the origin sends
 * tasks and a message per task, the worker finishes each task — between TaskCores with in-memory
 * Pi hosts, on the real relay (CLI child process) behind the fault proxy, then heals the fault and
 * drains. Per fault it reports what was offered (createTask, message and done calls), accepted by
 * the relay, presented to a model (inserted), presented twice, lost, and the relay requests made.
 *
 * - presented: the worker inserted the task's `task.created` and each message; the origin inserted
 *   the task's terminal event.
 * - reported (two columns): not presented, but the sender's model was told — lost to relay reset
 *   (kept at 0 since both Pis keep their tasks and re-send after a restart; a memory-only
 *   relay), or ended with a lifetime that was shut down (`task.timed_out` at the origin, or the
 *   failed call).
 * - refused: the operation failed definitively and created nothing (the caller was told).
 * - lost = offered − presented − reported − refused. Any loss, or any event inserted twice within
 *   a lifetime, fails the run (exit code 1).
 *
 * Capacity cooldowns and the worker's busy minute run on jump timers (delivery-budget time moves
 * forward between passes without waiting); request deadlines are short so timeouts are quick.
 * `docs/reliability.md` gets the table and how each fault is injected.
 *
 * This file is the runner: the list of faults, the loop that runs them on one relay, and the entry
 * `npm run faults` starts. Each fault is a scenario of its own in `bench/faults/<scenario>.ts`, its
 * header saying the fault and what it proves; the pieces they share (the rig of parties behind the
 * fault proxy, the ledger of offers, the accounting, the standard workload, the outcome rows'
 * steps, and the report) are in `bench/faults/shared/`.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startRelayProcess } from "../src/demo/relay-process.ts";
import { keptSections } from "./lib/doc.ts";
import { capacityRetryAfter } from "./faults/capacity-retry-after.ts";
import { completionAfterTimeout } from "./faults/completion-after-timeout.ts";
import { duplicateDelivery } from "./faults/duplicate-delivery.ts";
import { lostAckReply } from "./faults/lost-ack-reply.ts";
import { lostSendReply } from "./faults/lost-send-reply.ts";
import { malformedPage } from "./faults/malformed-page.ts";
import { oversizedReply } from "./faults/oversized-reply.ts";
import { rateLimitBurst } from "./faults/rate-limit-burst.ts";
import { relayRestart } from "./faults/relay-restart.ts";
import type { FaultRow } from "./faults/shared/accounting.ts";
import { type FaultMatrix, reliabilityMarkdown, rowLine } from "./faults/shared/report.ts";
import type { FaultSpec } from "./faults/shared/scenario.ts";
import { shutdownMidPass } from "./faults/shutdown-mid-pass.ts";
import { slowRelay } from "./faults/slow-relay.ts";
import { BUSY_MS, QUICK_BUSY_MS, workerBusy } from "./faults/worker-busy.ts";
import { workerKilled } from "./faults/worker-killed.ts";
import { zombieWorker } from "./faults/zombie-worker.ts";

export type { FaultRow } from "./faults/shared/accounting.ts";
export { type FaultMatrix, reliabilityMarkdown } from "./faults/shared/report.ts";

/** Tasks per fault (each: a createTask, a message, a done). */
const TASKS = 10;
const QUICK_TASKS = 2;

/** The faults in the order the matrix runs and reports them. */
export function faultSpecs(quick: boolean): FaultSpec[] {
  return [
    relayRestart,
    lostSendReply,
    lostAckReply,
    rateLimitBurst,
    capacityRetryAfter,
    slowRelay,
    malformedPage,
    oversizedReply,
    duplicateDelivery,
    workerBusy(quick ? QUICK_BUSY_MS : BUSY_MS),
    shutdownMidPass,
    workerKilled,
    zombieWorker,
    completionAfterTimeout,
  ];
}

/** The row of a fault whose run threw: nothing counted, one failed check naming the error. */
function failedRow(spec: FaultSpec, error: unknown): FaultRow {
  return {
    fault: spec.name,
    injection: spec.injection,
    offered: 0,
    accepted: 0,
    presented: 0,
    duplicated: 0,
    reported: 0,
    lostToRelayReset: 0,
    endedWithLifetime: 0,
    refused: 0,
    lost: 0,
    requests: 0,
    faulted: 0,
    checks: [{ name: `ran without throwing: ${error instanceof Error ? error.message : String(error)}`, ok: false }],
    note: "",
    ok: false,
  };
}

export async function runFaults(options: { quick?: boolean; progress?: (line: string) => void } = {}): Promise<FaultMatrix> {
  const quick = options.quick === true;
  const tasks = quick ? QUICK_TASKS : TASKS;
  const started = performance.now();
  const relay = await startRelayProcess();
  const rows: FaultRow[] = [];
  try {
    for (const spec of faultSpecs(quick)) {
      const at = performance.now();
      let row: FaultRow;
      try {
        row = await spec.run({ relay, tasks, quick });
      } catch (error) {
        row = failedRow(spec, error);
      }
      rows.push(row);
      options.progress?.(`${row.ok ? "ok    " : "FAILED"} ${spec.name} (${Math.round(performance.now() - at)} ms)`);
    }
  } finally {
    await relay.stop().catch(() => undefined);
  }
  return {
    date: new Date().toISOString(),
    quick,
    tasksPerFault: tasks,
    durationSeconds: Math.round((performance.now() - started) / 100) / 10,
    rows,
    ok: rows.every((row) => row.ok),
  };
}

export const RELIABILITY_DOC = join(import.meta.dir, "..", "docs", "reliability.md");
/** The doc's sections from this heading on are written by hand (the multi-host tests' figures) and kept. */
const KEPT_HEADING = "## Across machines";

if (import.meta.main) {
  const quick = process.argv.includes("--quick");
  const matrix = await runFaults({ quick, progress: (line) => process.stderr.write(`faults: ${line}\n`) });
  if (!quick) writeFileSync(RELIABILITY_DOC, reliabilityMarkdown(matrix) + keptSections(RELIABILITY_DOC, KEPT_HEADING));
  for (const row of matrix.rows) process.stdout.write(rowLine(row));
  process.stdout.write(`faults: ${matrix.durationSeconds} s${quick ? " (quick: nothing written)" : `; wrote ${RELIABILITY_DOC}`}\n`);
  if (!matrix.ok) process.exitCode = 1;
}
