/**
 * What an idle Pi pays for pi-tasks (issue 41, bench/measure/idle.ts): CPU per minute with ÷
 * without, the extra peak memory and the extra start-up to ready, all from Pis of both kinds
 * running side by side in one run. Skipped where /proc or Node 22 is missing.
 */
import type { IdleResult } from "../measure/idle.ts";
import { GOALS } from "../goals.ts";
import { round } from "../lib/stats.ts";
import type { Figure } from "../report.ts";

/** The CPU a bare idle Pi is counted with at least (s/min): the figure's own resolution, so the ratio stays finite. */
const CPU_FLOOR_SECONDS_PER_MINUTE = 0.001;

const HOW =
  "Pi 1.6 on Node 22 (RPC, scripted model, offline), with and without `-e <this package>`, the same number of each started at once on one relay already running (`PI_TASKS_RELAY_URL`), nothing delegated; both kinds make the one HTTP request of a Pi's first model call (bench/scenarios/model-fetch.ts: Node's `fetch` initialized, as in every real user's Pi); CPU is user + system time of each Pi process (/proc/<pid>/stat) over the window after a quiet settle, peak memory its VmHWM, start-up the time from spawn to Pi's answer to a `get_state` sent at spawn; medians per kind.";

export function idleFigures(idle: IdleResult): Figure[] {
  if ("skipped" in idle) return [];
  const { with: on, without: off } = idle;
  const detail = `with pi-tasks: ${on.cpuSecondsPerMinute} CPU s/min, ${on.peakMiB} MiB peak, ${on.startupMs} ms to ready; without: ${off.cpuSecondsPerMinute} CPU s/min, ${off.peakMiB} MiB, ${off.startupMs} ms (${idle.pis} Pis of each kind, ${idle.windowMs / 1000} s window)`;
  return [
    {
      id: "idle-cpu",
      label: "Idle Pi's CPU per minute, with pi-tasks ÷ without (a bare Pi's under 1 ms counted as 1 ms)",
      measured: round(on.cpuSecondsPerMinute / Math.max(off.cpuSecondsPerMinute, CPU_FLOOR_SECONDS_PER_MINUTE), 2),
      unit: "×",
      detail,
      goal: { op: "<=", value: GOALS.idleCpuWithPerWithout },
      anchor: "—",
      how: HOW,
      evidence: `with pi-tasks ${on.cpuSecondsPerMinute} CPU s/min against ${off.cpuSecondsPerMinute} for the bare Pi, which makes no wake-up at all once idle.`,
      reason:
        "An idle Pi with pi-tasks stays addressable: it holds a `watch-v1` watch (one request every `watchClientWaitMs`, which also keeps its lease) and makes one safety-net pass a lease; each request through Node's fetch (with Pi's proxy agent) and the relay client costs milliseconds, and a bare Pi's zero makes any ratio goal need no request at all. Applied: no pass every 5 s while a watch is held, no spawn-record timer. Proposed: watches of `maxWatchWaitMs`, and a cheaper request path.",
    },
    {
      id: "idle-memory",
      label: "Idle Pi's extra peak memory with pi-tasks",
      measured: round(on.peakMiB - off.peakMiB, 1),
      unit: "MiB",
      detail,
      goal: { op: "<=", value: GOALS.idleExtraPeakMiB },
      anchor: "—",
      how: HOW,
      evidence: `peak ${on.peakMiB} MiB with pi-tasks against ${off.peakMiB} MiB without.`,
      reason:
        "Pi loads the extension through jiti, module by module (176 of ours at start, each from jiti's cache): about 8 MiB at ready, profiled one Pi at a time. The rest is the session's start — its first relay requests, trust and store — as a peak: resident memory settles about 10 MiB above a bare Pi's, and a Pi whose relay does not answer peaks no higher than at ready. The session's start needs 138 of the modules (the lifecycle's import closure); the tools and /tasks add 24. Proposed: load on first use what a session's start does not need (tool bodies, /tasks, workspaces and the sandbox, specialists, workflows, traces), and profile the start's peak allocation.",
    },
    {
      id: "idle-startup",
      label: "Pi's extra start-up to ready with pi-tasks",
      measured: on.startupMs - off.startupMs,
      unit: "ms",
      detail,
      goal: { op: "<=", value: GOALS.idleExtraStartupMs },
      anchor: "—",
      how: HOW,
      evidence: `${on.startupMs} ms to ready with pi-tasks against ${off.startupMs} ms without.`,
      reason:
        "The same module loading as the memory figure: jiti evaluates each module of the extension at start. A bundle of one file is slower under jiti (it transforms it whole). Proposed: lazy loading, as for memory.",
    },
  ];
}
