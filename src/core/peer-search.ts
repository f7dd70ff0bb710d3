/**
 * The origin's and the worker's search for a task's peer: which tasks may be looking for their peer
 * after a relay restart, and how often each kind of search may ask the relay. A task's meta
 * (`reconnectingSince`) decides whether it is looking; the set here is a superset kept beside it so
 * a pass never walks the whole store (a move inside a transaction that rolls back leaves the task
 * looking; the set only shrinks once the meta says a task stopped). Changed only through these
 * functions: reconnect.ts and orphans.ts read and mark, the core's rehome starts a new search.
 */
import { orphanProbeIntervalMs } from "../protocol/limits.ts";
import { createPacer, type Pacer } from "./pacer.ts";
import type { TaskTimers } from "./timers.ts";

export interface PeerSearch {
  /** A task starts looking for its peer (after a relay restart). */
  startLooking(taskId: string): void;
  /** Whether a task may be looking (its meta decides). */
  mayBeLooking(taskId: string): boolean;
  /** The tasks that may be looking, as a copy (safe to change the search while walking it). */
  mayBeLookingIds(): string[];
  /** The meta says the task stopped looking. */
  stopLooking(taskId: string): void;
  /** Registration probes of worker endpoints (orphans.ts), keyed by endpoint key. */
  readonly probes: Pacer;
  /** Name lookups of a reconnecting task's peer (reconnect.ts), keyed by task id. */
  readonly lookups: Pacer;
  /** Automatic reassignment attempts of an orphaned task (orphans.ts), keyed by task id. */
  readonly reassignments: Pacer;
  /** A new binding: every pace starts over (what was asked of the old relay says nothing now). */
  rebound(): void;
}

export function createPeerSearch(timers: TaskTimers): PeerSearch {
  const looking = new Set<string>();
  const probes = createPacer(timers, orphanProbeIntervalMs);
  const lookups = createPacer(timers, orphanProbeIntervalMs);
  const reassignments = createPacer(timers, orphanProbeIntervalMs);
  return {
    startLooking: (taskId) => void looking.add(taskId),
    mayBeLooking: (taskId) => looking.has(taskId),
    mayBeLookingIds: () => [...looking],
    stopLooking: (taskId) => void looking.delete(taskId),
    probes,
    lookups,
    reassignments,
    rebound() {
      probes.clear();
      lookups.clear();
      reassignments.clear();
    },
  };
}
