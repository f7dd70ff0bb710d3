/**
 * Reassignment (origin only): move an active task off a target that is gone — a send refused with
 * `TARGET_NOT_REGISTERED`, or the task declared orphaned (orphans.ts) — to another endpoint (`to`),
 * or by default to the lost target's live successor (`successor-v1`: a respawned worker of the same
 * session), carrying the task's history (the newest events that fit `maxRelayPayloadBytes`;
 * `historyTruncated` when some did not). The task gets a new generation: mail of the previous
 * executor is refused from then on (`STALE_GENERATION`). The loss and the target are re-checked
 * inside the commit: one loss allows one reassignment.
 */
import { endpointKey, sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { eventTypeRow } from "../protocol/events.ts";
import { maxRelayPayloadBytes } from "../protocol/limits.ts";
import type { TaskEndpoint, TaskEvent, TaskRecord } from "../protocol/schemas.ts";
import { OPERATION } from "./bookkeeping.ts";
import { appendCanonical } from "./canonical.ts";
import { assertOpen, type CoreContext } from "./context.ts";
import { assignmentBytes } from "./envelopes.ts";
import { forgetWorker } from "./liveness.ts";
import { queueEnvelope } from "./outbox.ts";
import type { ReassignResult } from "./results.ts";
import { askFirst, requireAccepted, requireOrigin, shipOwn } from "./ship.ts";

function refuse(taskId: string, reason: string, details: Record<string, unknown> = {}): TaskError {
  return new TaskError("REASSIGNMENT_REFUSED", {
    message: `The task cannot be reassigned: ${reason}.`,
    details: { taskId, reason, ...details },
  });
}

/** Whether the task's worker is known lost: the task was orphaned, or a send to its endpoint was refused as not registered. */
export function lossEvidence(context: CoreContext, task: TaskRecord): boolean {
  if (context.store.getTaskMeta(task.taskId)?.orphanedAt !== undefined) return true;
  const lostKey = endpointKey(task.target);
  return context.store.listQuarantine().some((entry) => entry.targetKey === lostKey && entry.errorCode === "TARGET_NOT_REGISTERED");
}

/** The newest history events that fit beside `base` in one assignment payload. */
function fitHistory(
  taskId: string,
  base: Record<string, unknown>,
  history: readonly TaskEvent[],
): { kept: TaskEvent[]; truncated: boolean } {
  if (assignmentBytes(taskId, base) > maxRelayPayloadBytes)
    throw new TaskError("PAYLOAD_TOO_LARGE", { details: { taskId, maxBytes: maxRelayPayloadBytes } });
  let kept: TaskEvent[] = [];
  for (let index = history.length - 1; index >= 0; index -= 1) {
    const candidate = [history[index]!, ...kept];
    if (assignmentBytes(taskId, { ...base, history: candidate, historyTruncated: index > 0 }) > maxRelayPayloadBytes) break;
    kept = candidate;
  }
  return { kept, truncated: kept.length < history.length };
}

/** The endpoint a task moves to: the one named (it must be live), else the lost target's live successor. */
async function newTarget(
  context: CoreContext,
  taskId: string,
  lost: TaskEndpoint,
  self: TaskEndpoint,
  to: TaskEndpoint | undefined,
  signal: AbortSignal | undefined,
): Promise<TaskEndpoint> {
  let successor: TaskEndpoint;
  try {
    const options = { ...(to === undefined ? { followSuccessor: true } : {}), ...(signal === undefined ? {} : { signal }) };
    successor = (await context.session.resolve(to ?? lost, options)).endpoint;
  } catch (error) {
    const failure = toTaskError(error);
    if (failure.spec.relayLoss) throw failure;
    throw refuse(taskId, to === undefined ? "the lost target has no live successor" : "the named target is not registered", {
      cause: failure.code,
    });
  }
  assertOpen(context, "reassignTask");
  if (sameEndpoint(successor, self)) throw refuse(taskId, "the target resolves to this endpoint itself");
  if (sameEndpoint(successor, lost)) {
    // Orphaned by silence, a dead Pi's registration lives until its lease ends: it is its own "successor".
    const orphaned = context.store.getTaskMeta(taskId)?.orphanedAt !== undefined;
    throw refuse(
      taskId,
      orphaned
        ? "the lost worker's endpoint is still registered and has no successor yet — name the worker to take it over (to)"
        : "the target is not lost",
    );
  }
  return successor;
}

export async function reassignTask(
  context: CoreContext,
  self: TaskEndpoint,
  taskId: string,
  to: TaskEndpoint | undefined,
  signal: AbortSignal | undefined,
): Promise<ReassignResult> {
  const { store } = context;
  const before = requireOrigin(context, taskId, self);
  if (before.status !== "active") throw refuse(taskId, "the task is not active", { status: before.status });
  if (!lossEvidence(context, before))
    throw refuse(taskId, "its target is not known to be lost (no TARGET_NOT_REGISTERED refusal, not orphaned)");
  const successor = await newTarget(context, taskId, before.target, self, to, signal);
  const { event, envelopeId, truncated } = store.transaction(() => {
    // Re-checked inside the commit: one loss allows one reassignment, even when calls race.
    const current = store.getStoredTask(taskId)!.record;
    if (current.status !== "active" || !sameEndpoint(current.target, before.target) || !lossEvidence(context, current)) {
      throw refuse(taskId, "the task was already reassigned or is no longer active");
    }
    const history = store.getEvents(taskId).filter((item) => !eventTypeRow(item.type).originLocal);
    const lineage =
      current.lineage === undefined ? undefined : { ...current.lineage, chain: [...current.lineage.chain.slice(0, -1), successor] };
    // A new generation: mail of the previous executor is refused from now on.
    store.updateTask(taskId, {
      target: successor,
      generation: (current.generation ?? 1) + 1,
      ...(lineage === undefined ? {} : { lineage }),
    });
    // A new executor binds its own key (and session) once it proved it (proofs.ts). A successor of
    // the lost worker must prove the lost worker's key: a stranger who took its name gets nothing.
    // Nothing of the lost worker's life carries over: the new one is judged from its own mail (liveness.ts).
    const {
      workerKey,
      expectedWorkerKey: _earlier,
      peerSession: _session,
      activity: _done,
      ...meta
    } = forgetWorker(store.getTaskMeta(taskId) ?? {});
    store.setTaskMeta(taskId, { ...meta, ...(to === undefined && workerKey !== undefined ? { expectedWorkerKey: workerKey } : {}) });
    const moved = store.getStoredTask(taskId)!.record;
    const reassigned = appendCanonical(
      store,
      moved,
      "task.reassigned",
      { task: moved.task, previousTarget: before.target },
      context.clock(),
    );
    const base = { task: moved, event: reassigned };
    const fit = fitHistory(taskId, base, history);
    const queued = queueEnvelope(context, {
      taskId,
      from: self,
      to: successor,
      kind: "assignment",
      inner: { ...base, history: fit.kept, ...(fit.truncated ? { historyTruncated: true } : {}) },
      purpose: "assignment",
      operation: { key: OPERATION.assignment(reassigned.eventId), logicalId: reassigned.eventId, logicalType: reassigned.type },
    });
    store.enqueueLocalPresentation(reassigned);
    return { event: reassigned, envelopeId: queued, truncated: fit.truncated };
  });
  const result = {
    taskId,
    previousTarget: before.target,
    target: successor,
    eventId: event.eventId,
    envelopeId,
    historyTruncated: truncated,
  };
  // The new target gets the task's content once it proved the key the task expects (asked now).
  if (store.getOutbox(envelopeId)?.awaiting === true) {
    await askFirst(context, signal, successor);
    return { ...result, delivery: "pending" };
  }
  requireAccepted(await shipOwn(context, signal, envelopeId), taskId);
  return { ...result, delivery: "accepted" };
}
