/**
 * Orphans (origin side): a task whose worker's registration is gone — its Pi died, its lease
 * expired, it disconnected — is not left waiting for its timeout. Every `orphanProbeIntervalMs` the
 * origin asks the relay to resolve the workers of its active tasks — one probe per worker endpoint
 * answers for all its tasks, at most `maxPeerProbesPerPass` per pass. `TARGET_NOT_REGISTERED` probe
 * after probe for `orphanAfterMs` makes the task orphaned (liveness.ts): its attention says so, and the model gets one
 * `task.orphaned` record (one wake) offering reassignment. A registration seen again before that
 * clears the suspicion; once orphaned, a registration seen proves nothing (a dead Pi's registration
 * outlives it until its lease ends): only the worker's own signed mail ends an orphan.
 *
 * With `autoReassign`, an orphaned task moves by itself to the lost worker's live successor (a
 * respawned worker of the same session name, `successor-v1`), carrying its history.
 */
import { endpointKey } from "../protocol/endpoint.ts";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { maxPeerProbesPerPass, orphanAfterMs } from "../protocol/limits.ts";
import type { StoredTask } from "../store/task-store.ts";
import { orphan } from "./liveness.ts";
import { latestAssignmentEnvelope } from "./bookkeeping.ts";
import { type CoreContext, isClosed, me, rethrowRelayLoss } from "./context.ts";
import { reassignTask } from "./reassign.ts";
import type { WorkScope } from "./scope.ts";

/**
 * Active tasks this origin assigned that are due a probe (not reconnecting, not orphaned already),
 * grouped by worker endpoint: one probe answers for every task of that worker.
 */
function due(context: CoreContext): Map<string, StoredTask[]> {
  const { store } = context;
  const byWorker = new Map<string, StoredTask[]>();
  for (const taskId of store.activeTaskIds("origin")) {
    if (context.search.mayBeLooking(taskId) && store.getTaskMeta(taskId)?.reconnectingSince !== undefined) continue;
    if (store.getTaskMeta(taskId)?.orphanedAt !== undefined) continue;
    const stored = store.getStoredTask(taskId)!;
    // A worker the assignment has not reached yet cannot be lost: its send says what happens to it.
    if (!assignmentAccepted(context, taskId)) continue;
    const key = probeKey(stored);
    if (!context.search.probes.due(key)) continue;
    const tasks = byWorker.get(key);
    if (tasks === undefined) byWorker.set(key, [stored]);
    else tasks.push(stored);
  }
  return byWorker;
}

/** Whether the relay accepted the task's current assignment. */
function assignmentAccepted(context: CoreContext, taskId: string): boolean {
  const envelopeId = latestAssignmentEnvelope(context.store, taskId);
  return envelopeId !== undefined && context.store.getOutbox(envelopeId)?.state === "accepted";
}

/** Probes are paced per worker endpoint. */
const probeKey = (stored: StoredTask) => endpointKey(stored.record.target);

/**
 * Records one probe's answer: a registration seen clears the suspicion (never an orphan); gone long
 * enough orphans.
 */
function noteProbe(context: CoreContext, stored: StoredTask, registered: boolean): void {
  const { store } = context;
  const taskId = stored.record.taskId;
  const now = context.clock();
  store.transaction(() => {
    const meta = store.getTaskMeta(taskId) ?? {};
    if (meta.orphanedAt !== undefined) return;
    if (registered) {
      if (meta.lostSince === undefined) return;
      const { lostSince: _cleared, ...rest } = meta;
      store.setTaskMeta(taskId, rest);
      return;
    }
    const lostSince = meta.lostSince ?? now;
    if (now - lostSince < orphanAfterMs) {
      if (meta.lostSince === undefined) store.setTaskMeta(taskId, { ...meta, lostSince });
      return;
    }
    orphan(context, stored, lostSince);
  });
}

/** The probe phase: asks the relay about the workers of due tasks. Returns how many were probed. */
export async function probeWorkers(context: CoreContext, scope: WorkScope): Promise<number> {
  let probed = 0;
  for (const [key, tasks] of due(context)) {
    if (probed >= maxPeerProbesPerPass || scope.expired() || isClosed(context)) break;
    context.search.probes.mark(key);
    probed += 1;
    let registered: boolean;
    try {
      await context.session.resolve(tasks[0]!.record.target, { signal: scope.signal });
      registered = true;
    } catch (raw) {
      rethrowRelayLoss(raw);
      const error = toTaskError(raw);
      if (error.code !== "TARGET_NOT_REGISTERED") {
        scope.fail("peers", error.withDetails({ taskId: tasks[0]!.record.taskId }));
        continue;
      }
      registered = false;
    }
    if (isClosed(context)) break;
    for (const stored of tasks) noteProbe(context, stored, registered);
  }
  return probed;
}

/** With `autoReassign`: each orphaned task whose lost worker has a live successor moves to it. */
export async function reassignOrphans(context: CoreContext, scope: WorkScope): Promise<number> {
  const { store } = context;
  let moved = 0;
  for (const taskId of store.activeTaskIds()) {
    if (scope.expired() || isClosed(context)) break;
    const stored = store.getStoredTask(taskId)!;
    if (stored.role !== "origin" || store.getTaskMeta(taskId)?.orphanedAt === undefined) continue;
    if (!context.search.reassignments.due(taskId)) continue;
    context.search.reassignments.mark(taskId);
    try {
      await reassignTask(context, me(context), taskId, undefined, scope.signal);
      moved += 1;
    } catch (raw) {
      rethrowRelayLoss(raw);
      const error = toTaskError(raw);
      // No live successor yet is the normal case while a respawned worker starts: try later.
      if (!(error instanceof TaskError && error.code === "REASSIGNMENT_REFUSED")) scope.fail("peers", error.withDetails({ taskId }));
    }
  }
  return moved;
}
