/**
 * What a warm worker weighs against a bare Pi (issue 41, bench/measure/worker-weight.ts): resident
 * memory of the worker's processes ÷ a bare Pi's, and spawn to registered ÷ a bare Pi's start to
 * ready, on Node in one run. Skipped where /proc or Node 22 is missing.
 */
import type { WorkerWeightResult } from "../measure/worker-weight.ts";
import { GOALS } from "../goals.ts";
import { round } from "../lib/stats.ts";
import type { Figure } from "../report.ts";

const HOW =
  "Pi 1.6 and pi-tasks on Node 22, one run, started one at a time and alternating: a worker by `pi-tasks spawn --task-worker` (the built command on Node: the worker holder and a Pi in RPC mode with the scripted model, registered on a relay already running), a bare Pi with the same scripted model and no pi-tasks (it makes a model's first HTTP request, bench/scenarios/model-fetch.ts); memory is the resident set (VmRSS) of all of each one's processes after a quiet wait, start-up is the spawn command's run (its own start included) against the bare Pi's spawn to its answer to a `get_state`; medians per kind.";

export function workerWeightFigures(weight: WorkerWeightResult): Figure[] {
  if ("skipped" in weight) return [];
  const { worker, bare } = weight;
  const detail = `worker: ${worker.residentMiB} MiB in ${worker.processes} processes, ${worker.startupMs} ms spawn to registered; bare Pi: ${bare.residentMiB} MiB, ${bare.startupMs} ms to ready (${weight.pairs} of each, read after ${weight.settleMs / 1000} s idle)`;
  return [
    {
      id: "worker-memory",
      label: "A warm worker's memory ÷ a bare Pi's",
      measured: round(worker.residentMiB / bare.residentMiB, 2),
      unit: "×",
      detail,
      goal: { op: "<=", value: GOALS.workerMemoryPerBarePi },
      anchor: "—",
      how: HOW,
      evidence: `${worker.residentMiB} MiB for a worker (holder and Pi) against ${bare.residentMiB} MiB for a bare Pi.`,
      reason:
        "A worker is two processes: the holder (src/host/worker-host.ts, a Node process of its own that keeps Pi's RPC stdin open and writes the readable transcript), about 45 MiB resident, and the worker's Pi, which carries pi-tasks like any Pi (bench/measure/idle.ts: a few MiB once settled). Proposed: no holder process — the worker's Pi keeps its own stdin open (a pipe whose writing end it holds) and the transcript is written from the RPC log when read — which leaves the Pi alone, about 1.05× a bare one.",
    },
    {
      id: "worker-startup",
      label: "Spawning a worker to registered ÷ a bare Pi's start to ready",
      measured: round(worker.startupMs / bare.startupMs, 2),
      unit: "×",
      detail,
      goal: { op: "<=", value: GOALS.workerStartupPerBarePi },
      anchor: "—",
      how: HOW,
      evidence: `${worker.startupMs} ms from the spawn command to the worker's registration against ${bare.startupMs} ms for a bare Pi to answer.`,
      reason:
        "Spawning is three starts in a row: the `pi-tasks` command's own (about 0.15 s on Node), the holder's, then the worker's Pi, whose session then registers on the relay and proves its endpoint before the spawn returns. A spawn from inside Pi (`agent_task_spawn`, a specialist) skips the command's start. Proposed: no holder process (see the memory figure), and readiness from the worker's registration as it lands instead of the spawner's poll of the relay.",
    },
  ];
}
