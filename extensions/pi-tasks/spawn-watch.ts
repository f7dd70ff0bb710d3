/**
 * Workers this Pi spawned to stop with it are known gone the moment their process exits: after
 * every background pass (pi-run.ts) the watch looks at this Pi's spawn records (src/host/spawned.ts),
 * and a worker whose holder process is gone, or whose record was removed (`agent_task_stop`), has its
 * active tasks orphaned at once (`TaskCore.workerGone`) — no heartbeat or lease to wait for.
 * It has no timer of its own: while tasks are active the passes come every `activePollIntervalMs`,
 * and while none is, a worker that goes has nothing to orphan (the next look still sees it gone).
 * Other workers are judged by their heartbeats and registrations (src/core/activity.ts, orphans.ts).
 */
import { listSpawned } from "../../src/host/spawned.ts";
import { isAlive } from "../../src/platform/processes.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import type { Env } from "../../src/relay-client/config.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";

export interface SpawnWatch {
  /** Looks at the spawn records: orphans the active tasks of workers gone since the last look. */
  check(): void;
}

/** The registered workers this Pi spawned without keeping them, by session name, while their holder runs. */
function ownLiveWorkers(env: Env): Map<string, TaskEndpoint> {
  const live = new Map<string, TaskEndpoint>();
  for (const worker of listSpawned(env)) {
    if (worker.owner !== process.pid || worker.taskEndpoint === undefined || !isAlive(worker.pid)) continue;
    live.set(worker.session, worker.taskEndpoint);
  }
  return live;
}

export function createSpawnWatch(env: Env, core: () => TaskCore | undefined): SpawnWatch {
  let known = new Map<string, TaskEndpoint>();
  const check = () => {
    const live = ownLiveWorkers(env);
    const current = core();
    for (const [session, endpoint] of known) {
      if (live.has(session)) continue;
      try {
        current?.workerGone(endpoint);
      } catch {
        // The core closed meanwhile: nothing to orphan.
      }
    }
    known = live;
  };
  return {
    check() {
      try {
        check();
      } catch {
        // An unreadable spawn directory is the board's to report; the next pass looks again.
      }
    },
  };
}
