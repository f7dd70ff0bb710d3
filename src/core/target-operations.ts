/**
 * The operations of the side that works on a task (the worker): ask, answer or inform the origin,
 * and report the terminal outcome. Whatever the worker sends is an *intent*: the origin decides
 * what becomes canonical. A worker reports one terminal outcome per task; a retry with the same
 * status reuses it, another status is refused.
 */
import { TaskError } from "../protocol/errors.ts";
import type { MessageParams, TaskEndpoint, TaskRecord, TerminalStatus } from "../protocol/schemas.ts";
import { OPERATION } from "./bookkeeping.ts";
import type { CoreContext } from "./context.ts";
import { makeIntent } from "./envelopes.ts";
import { queueEnvelope } from "./outbox.ts";
import type { DoneResult, MessageResult } from "./results.ts";
import { requireAccepted, requireSettled, reserveAndShip, shipOwn } from "./ship.ts";
import { terminalDelivery } from "./views.ts";

export async function targetMessage(context: CoreContext, self: TaskEndpoint, task: TaskRecord, params: MessageParams, signal: AbortSignal | undefined): Promise<MessageResult> {
  const { store } = context;
  const payload = { message: params.message, ...(params.inReplyTo === undefined ? {} : { inReplyTo: params.inReplyTo }) };
  const intent = makeIntent(task.taskId, `task.${params.type}`, payload);
  const envelopeId = store.transaction(() => {
    const queued = queueEnvelope(context, { taskId: task.taskId, from: self, to: task.origin, kind: "intent", inner: intent, purpose: "intent" });
    store.putIntent(intent, queued);
    return queued;
  });
  requireAccepted(await shipOwn(context, signal, envelopeId), task.taskId);
  return { taskId: task.taskId, intentId: intent.intentId, envelopeId, authority: "receiver" };
}

export async function targetDone(context: CoreContext, self: TaskEndpoint, task: TaskRecord, status: TerminalStatus, payload: Record<string, unknown>, signal: AbortSignal | undefined): Promise<DoneResult> {
  const { store } = context;
  const type = `task.${status}` as const;
  const { outcome } = await reserveAndShip(
    context,
    signal,
    task.taskId,
    OPERATION.terminalIntent,
    () => {
      const intent = makeIntent(task.taskId, type, payload);
      const envelopeId = queueEnvelope(context, { taskId: task.taskId, from: self, to: task.origin, kind: "intent", inner: intent, purpose: "terminal" });
      store.putIntent(intent, envelopeId);
      return { logicalId: intent.intentId, logicalType: type, envelopeId };
    },
    (existing) => {
      if (existing !== undefined && existing.logicalType !== type) {
        throw new TaskError("TERMINAL_INTENT_CONFLICT", { details: { taskId: task.taskId, existingType: existing.logicalType, requestedType: type } });
      }
    },
  );
  const snapshot = store.getTask(task.taskId)!;
  const delivery = terminalDelivery(store, snapshot);
  // Retryable: the intent and envelope ids are kept for the retry.
  requireSettled(outcome, { taskId: task.taskId, terminalDelivery: delivery });
  return { taskId: task.taskId, requestedStatus: status, observedCanonicalStatus: snapshot.status, terminalDelivery: delivery, authority: "receiver" };
}
