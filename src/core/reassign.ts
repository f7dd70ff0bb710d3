/**
 * Reassignment (origin only): move an active task off a target the relay says is gone
 * (`TARGET_NOT_REGISTERED`) to that target's live successor (`successor-v1`), carrying the task's
 * history (the newest events that fit the 48 KiB payload; `historyTruncated` when some did not).
 * The loss and the target are re-checked inside the commit: one loss allows one reassignment.
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
import { queueEnvelope } from "./outbox.ts";
import type { ReassignResult } from "./results.ts";
import { requireAccepted, requireOrigin, shipOwn } from "./ship.ts";

function refuse(taskId: string, reason: string, details: Record<string, unknown> = {}): TaskError {
  return new TaskError("REASSIGNMENT_REFUSED", { message: `The task cannot be reassigned: ${reason}.`, details: { taskId, reason, ...details } });
}

function lossEvidence(context: CoreContext, task: TaskRecord): boolean {
  const lostKey = endpointKey(task.target);
  return context.store.listQuarantine().some((entry) => entry.targetKey === lostKey && entry.errorCode === "TARGET_NOT_REGISTERED");
}

/** The newest history events that fit beside `base` in one assignment payload. */
function fitHistory(taskId: string, base: Record<string, unknown>, history: readonly TaskEvent[]): { kept: TaskEvent[]; truncated: boolean } {
  if (assignmentBytes(taskId, base) > maxRelayPayloadBytes) throw new TaskError("PAYLOAD_TOO_LARGE", { details: { taskId, maxBytes: maxRelayPayloadBytes } });
  let kept: TaskEvent[] = [];
  for (let index = history.length - 1; index >= 0; index -= 1) {
    const candidate = [history[index]!, ...kept];
    if (assignmentBytes(taskId, { ...base, history: candidate, historyTruncated: index > 0 }) > maxRelayPayloadBytes) break;
    kept = candidate;
  }
  return { kept, truncated: kept.length < history.length };
}

async function liveSuccessor(context: CoreContext, taskId: string, lost: TaskEndpoint, self: TaskEndpoint, signal: AbortSignal | undefined): Promise<TaskEndpoint> {
  let successor: TaskEndpoint;
  try {
    successor = (await context.session.resolve(lost, { followSuccessor: true, ...(signal === undefined ? {} : { signal }) })).endpoint;
  } catch (error) {
    const failure = toTaskError(error);
    if (failure.spec.relayLoss) throw failure;
    throw refuse(taskId, "the lost target has no live successor", { cause: failure.code });
  }
  assertOpen(context, "reassignTask");
  if (sameEndpoint(successor, self)) throw refuse(taskId, "the target resolves to this endpoint itself");
  if (sameEndpoint(successor, lost)) throw refuse(taskId, "the target is not lost");
  return successor;
}

export async function reassignTask(context: CoreContext, self: TaskEndpoint, taskId: string, signal: AbortSignal | undefined): Promise<ReassignResult> {
  const { store } = context;
  const before = requireOrigin(context, taskId, self);
  if (before.status !== "active") throw refuse(taskId, "the task is not active", { status: before.status });
  if (!lossEvidence(context, before)) throw refuse(taskId, "no send to the current target was refused with TARGET_NOT_REGISTERED");
  const successor = await liveSuccessor(context, taskId, before.target, self, signal);
  const { event, envelopeId, truncated } = store.transaction(() => {
    // Re-checked inside the commit: one loss allows one reassignment, even when calls race.
    const current = store.getStoredTask(taskId)!.record;
    if (current.status !== "active" || !sameEndpoint(current.target, before.target) || !lossEvidence(context, current)) {
      throw refuse(taskId, "the task was already reassigned or is no longer active");
    }
    const history = store.getEvents(taskId).filter((item) => !eventTypeRow(item.type).originLocal);
    const lineage = current.lineage === undefined ? undefined : { ...current.lineage, chain: [...current.lineage.chain.slice(0, -1), successor] };
    store.setTarget(taskId, successor, lineage);
    // A new executor binds its own key with its first signed intent.
    const { workerKey: _previous, ...meta } = store.getTaskMeta(taskId) ?? {};
    store.setTaskMeta(taskId, meta);
    const moved = store.getStoredTask(taskId)!.record;
    const reassigned = appendCanonical(store, moved, "task.reassigned", { task: moved.task, previousTarget: before.target }, context.clock());
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
  requireAccepted(await shipOwn(context, signal, envelopeId), taskId);
  return { taskId, previousTarget: before.target, target: successor, eventId: event.eventId, envelopeId, historyTruncated: truncated };
}
