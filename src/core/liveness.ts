/**
 * Liveness (origin side): whether the worker of an active task is still there, judged from signed
 * facts, and the one place a task becomes orphaned or stops being orphaned.
 *
 *   heard (intake) → silence (peers phase) → orphan → heard again, signed after the orphan
 *
 * - **Heard.** Every genuine intent of the task's worker — one that passed the trust gate, so never
 *   a replay, a forgery or another key's mail — is a signed fact: the worker was alive when it
 *   signed it. Its signing time (the worker's clock) is mapped to this side's clock by the smallest
 *   delay seen for that worker (arrival − signing: the relay can delay a report, never make it
 *   newer), so `aliveAt = newest signing time + smallest delay`. A report the relay withheld and
 *   released later, or mail signed before a newer one, renews nothing.
 * - **Silence.** A worker that heartbeats (it sent an activity report: activity.ts) and then is
 *   silent for `heartbeatSilenceMs` (by `aliveAt`), while this side's pass read its whole mailbox,
 *   is gone: its task is orphaned. Mail this side rejected never suspends the check — anyone can
 *   send junk. A worker that never reported (an older pi-tasks, a plain Wolfpack worker) may work
 *   quietly: it is judged by its registration only (orphans.ts).
 * - **Orphan.** Declared once per loss: one `task.orphaned` record, one wake. A registration probe
 *   that finds the endpoint alive does not undo it (orphans.ts): a dead Pi's registration outlives
 *   it until its lease ends. Only mail the worker signed after the orphan was declared ends it.
 * - A reassignment or a reconnection starts over: what the previous worker (or endpoint) was last
 *   heard saying says nothing of the next (`forgetWorker`).
 */
import { sameEndpoint } from "../protocol/endpoint.ts";
import { heartbeatSilenceMs } from "../protocol/limits.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import type { StoredTask } from "../store/task-store.ts";
import type { TaskMeta, WorkerLiveness } from "./bookkeeping.ts";
import { appendCanonical } from "./canonical.ts";
import type { CoreContext } from "./context.ts";

/** When the worker was last known alive, on this side's clock. */
export function aliveAt(liveness: WorkerLiveness): number {
  return liveness.signedAt + liveness.minDelayMs;
}

/**
 * Intake, inside its transaction: genuine mail of the task's worker, signed at `signedAt` (its
 * clock), arrived now. Renews liveness when it is the newest the worker signed, and ends an orphan
 * when it was signed after the orphan was declared.
 */
export function heardFromWorker(context: CoreContext, taskId: string, signedAt: number): void {
  const { store } = context;
  const meta = store.getTaskMeta(taskId) ?? {};
  const delay = context.clock() - signedAt;
  const before = meta.liveness;
  const liveness: WorkerLiveness = {
    signedAt: Math.max(before?.signedAt ?? signedAt, signedAt),
    minDelayMs: Math.min(before?.minDelayMs ?? delay, delay),
  };
  let next: TaskMeta = { ...meta, liveness };
  if (meta.orphanedAt !== undefined && signedAt + liveness.minDelayMs > meta.orphanedAt) {
    const { orphanedAt: _back, lostSince: _seen, ...rest } = next;
    next = rest;
  }
  if (before?.signedAt === liveness.signedAt && before.minDelayMs === liveness.minDelayMs && next.orphanedAt === meta.orphanedAt) return;
  store.setTaskMeta(taskId, next);
}

/**
 * At the origin, after a pass read its whole mailbox: orphans every active task whose worker
 * heartbeats and then fell silent for `heartbeatSilenceMs`. Returns how many it orphaned.
 */
export function orphanSilentWorkers(context: CoreContext): number {
  const { store } = context;
  const now = context.clock();
  let orphaned = 0;
  for (const taskId of store.activeTaskIds("origin")) {
    const meta = store.getTaskMeta(taskId);
    // Only a worker that heartbeats (it sent an activity report) can be judged by its silence.
    if (meta?.liveness === undefined || meta.activity === undefined) continue;
    if (meta.orphanedAt !== undefined || meta.reconnectingSince !== undefined) continue;
    const lastAlive = aliveAt(meta.liveness);
    if (now - lastAlive < heartbeatSilenceMs) continue;
    store.transaction(() => orphan(context, store.getStoredTask(taskId)!, lastAlive));
    orphaned += 1;
  }
  return orphaned;
}

/**
 * At the origin: the worker at `endpoint` is known gone (the process this Pi spawned for it
 * exited), so its active tasks are orphaned now. Returns how many.
 */
export function orphanWorkerTasks(context: CoreContext, endpoint: TaskEndpoint): number {
  const { store } = context;
  let orphaned = 0;
  for (const taskId of store.activeTaskIds("origin")) {
    const stored = store.getStoredTask(taskId)!;
    if (!sameEndpoint(stored.record.target, endpoint) || store.getTaskMeta(taskId)?.orphanedAt !== undefined) continue;
    store.transaction(() => orphan(context, stored, context.clock()));
    orphaned += 1;
  }
  return orphaned;
}

/**
 * Declares a task orphaned (inside the caller's transaction), its worker unheard since `since`: one
 * `task.orphaned` record, one wake. A task already orphaned stays as it is (one report per loss).
 */
export function orphan(context: CoreContext, stored: StoredTask, since: number): void {
  const { store } = context;
  const taskId = stored.record.taskId;
  const before = store.getTaskMeta(taskId) ?? {};
  // It waits for nobody any more: not for a reconnection, nor for a resumed worker's word.
  const { reconnectingSince: _stop, resuming: _lost, ...meta } = before;
  if (meta.orphanedAt !== undefined) {
    if (before.reconnectingSince !== undefined || before.resuming !== undefined) store.setTaskMeta(taskId, meta);
    return;
  }
  const now = context.clock();
  const lostSince = meta.lostSince ?? since;
  store.setTaskMeta(taskId, { ...meta, lostSince, orphanedAt: now });
  store.enqueueLocalPresentation(
    appendCanonical(store, stored.record, "task.orphaned", { since: lostSince, target: stored.record.target }, now),
  );
}

/**
 * What a task knew of its worker's life, without it: a reassignment (another worker) or a found
 * peer (another endpoint) starts over — the new one is judged from its own mail.
 */
export function forgetWorker(meta: TaskMeta): TaskMeta {
  const { lostSince: _lost, orphanedAt: _orphaned, liveness: _heard, peerSince: _placed, ...rest } = meta;
  return rest;
}
