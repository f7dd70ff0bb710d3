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
  "Pi 1.6 on Node 22 (RPC, scripted model, offline), with and without `-e <this package>`, the same number of each started at once on one relay already running (`PI_TASKS_RELAY_URL`), nothing delegated; both kinds make the one HTTP request of a Pi's first model call (bench/scenarios/model-fetch.ts: Node's `fetch` initialized, as in every real user's Pi); CPU is the run time of all of each Pi process's threads (/proc/<pid>/task/<tid>/schedstat) over the window after a quiet settle, peak memory its VmHWM, start-up the time from spawn to Pi's answer to a `get_state` sent at spawn; medians per kind.";

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
        "An idle Pi with pi-tasks stays addressable: it holds a `watch-v1` watch (one request every `watchClientWaitMs`, 20 s: at most that far apart, one always falls in the window in which a request renews the lease), renews its lease once a lease, and makes one safety-net pass a lease — about 6 requests a minute, counted at the relay. Each costs about 20 ms of the Pi's main thread (its threads counted one by one: the main thread is all of it): the request path (ky, Node's fetch, the relay client) runs so rarely that it is never optimized, and the loopback socket's work is charged to the sender. A bare Pi makes no wake-up at all, so any ratio goal needs no request at all. Applied: no pass every 5 s while a watch is held, no spawn-record timer, and a relay on Bun now says how long it keeps an idle socket (`Keep-Alive`), so the Pi's requests share one connection instead of opening one each. Proposed: a watch that renews the lease at the relay (one request per `maxWatchWaitMs`), a relay feature of its own.",
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
        "Pi now loads the built extension (`dist/extension.js`, one file, with the runtime's own `require`) instead of 176 TypeScript modules through jiti: the extra peak went from 25.4 to about 17 MiB, and resident memory once idle settles about 6 MiB above a bare Pi's. The rest is a peak of the session's start — its first relay requests, trust and store, and the parse of 0.8 MB of JavaScript — gone once it settles. Proposed: load on first use what a session's start does not need (tool bodies, /tasks, workspaces and the sandbox, specialists, workflows, traces) as chunks of their own, and profile the start's peak allocation.",
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
        "Met since Pi loads the built extension with the runtime's own `require` (extensions/pi-tasks/index.ts): before, jiti resolved and evaluated 176 modules one by one, 204 ms more than a bare Pi in the same run (the sources still load that way with `PI_TASKS_FROM_SOURCE=1`).",
    },
  ];
}
