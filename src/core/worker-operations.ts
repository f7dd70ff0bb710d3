/**
 * The operations of the side that works on a task (the worker): ask, answer or inform the origin,
 * and report the terminal outcome. Whatever the worker sends is an *intent*: the origin decides
 * what becomes canonical. A worker reports one terminal outcome per task; a retry with the same
 * status reuses it, another status is refused.
 */
import { TaskError } from "../protocol/errors.ts";
import { maxProgressChars } from "../protocol/limits.ts";
import type { MessageParams, MessageType, ReceiverIntentType, TaskEndpoint, TaskRecord, TerminalStatus } from "../protocol/schemas.ts";
import { openQuestions } from "./attention.ts";
import { checkChoiceAnswer, choiceFields } from "./choices.ts";
import { correctionFields } from "./corrections.ts";
import { type OperationKey, terminalIntentOf } from "./bookkeeping.ts";
import type { CoreContext } from "./context.ts";
import { makeIntent } from "./envelopes.ts";
import { queueEnvelope } from "./outbox.ts";
import type { DoneResult, MessageResult } from "./results.ts";
import { requireAccepted, requireSettled, reserveAndShip, shipOwn } from "./ship.ts";
import { terminalDelivery } from "./views.ts";

/**
 * A question raised on this (parent) task for a question a sub-task's worker asked here: it must be
 * an open question of a task this session delegated from `parent`. Its answer goes back down.
 */
function raisedFrom(context: CoreContext, parent: TaskRecord, questionId: string): { taskId: string; eventId: string } {
  const { store } = context;
  const question = store.getEvent(questionId);
  const child = question === undefined ? undefined : store.getTask(question.taskId);
  const refuse = (problem: string) =>
    new TaskError("INVALID_REQUEST", {
      message: `raisesQuestion: ${problem}`,
      details: { path: "/raisesQuestion", raisesQuestion: questionId },
    });
  if (question === undefined || child === undefined || question.type !== "task.question") throw refuse("no such question");
  if (child.role !== "origin" || child.lineage?.parentTaskId !== parent.taskId)
    throw refuse("the question's task was not delegated from this task");
  if (!openQuestions(child).some((open) => open.eventId === questionId)) throw refuse("the question is answered or its task ended");
  return { taskId: child.taskId, eventId: questionId };
}

/** A raised question offers its sub-task question's choices unless it names its own (the answer goes back down). */
function raisedChoices(context: CoreContext, params: MessageParams): MessageParams {
  if (params.raisesQuestion === undefined || params.choices !== undefined) return params;
  const below = context.store.getEvent(params.raisesQuestion)?.payload;
  if (!Array.isArray(below?.choices)) return params;
  return {
    ...params,
    choices: below.choices as string[],
    ...(typeof below.defaultChoice === "string" ? { defaultChoice: below.defaultChoice } : {}),
  };
}

/** The intent payload of a worker message (question, answer, information or progress). */
function messagePayload(context: CoreContext, task: TaskRecord, params: MessageParams): Record<string, unknown> {
  if (params.percent !== undefined && params.type !== "progress") {
    throw new TaskError("INVALID_REQUEST", { message: "percent belongs to a progress report", details: { path: "/percent" } });
  }
  if (params.type === "steer") {
    throw new TaskError("INVALID_REQUEST", {
      message: "a steer comes from the task's origin; tell the origin with type information",
      details: { path: "/type", taskId: task.taskId },
    });
  }
  if (params.raisesQuestion !== undefined && params.type !== "question") {
    throw new TaskError("INVALID_REQUEST", {
      message: "only a question raises a sub-task's question",
      details: { path: "/raisesQuestion" },
    });
  }
  if (params.type === "progress") {
    if (params.message.length > maxProgressChars)
      throw new TaskError("INVALID_REQUEST", {
        message: `a progress message is at most ${maxProgressChars} characters`,
        details: { path: "/message" },
      });
    return { message: params.message, ...(params.percent === undefined ? {} : { percent: params.percent }) };
  }
  if (params.type === "answer") checkChoiceAnswer(context.store, params.inReplyTo, params.message);
  return {
    message: params.message,
    ...(params.inReplyTo === undefined ? {} : { inReplyTo: params.inReplyTo }),
    ...(params.raisesQuestion === undefined ? {} : { raises: raisedFrom(context, task, params.raisesQuestion) }),
    ...choiceFields(raisedChoices(context, params)),
    ...correctionFields(params),
  };
}

export async function workerMessage(
  context: CoreContext,
  self: TaskEndpoint,
  task: TaskRecord,
  params: MessageParams,
  signal: AbortSignal | undefined,
): Promise<MessageResult> {
  const payload = messagePayload(context, task, params);
  return workerIntent(context, self, task, `task.${params.type as Exclude<MessageType, "steer">}`, payload, signal);
}

/** An intent a task may send only once: its operation key, and the refusal of a second one. */
export interface OnceOnly {
  readonly key: OperationKey;
  refused(): TaskError;
}

/** Queues one intent to the origin and ships it (older mail to the origin first); a `once` intent only once per task. */
export async function workerIntent(
  context: CoreContext,
  self: TaskEndpoint,
  task: TaskRecord,
  type: ReceiverIntentType,
  payload: Record<string, unknown>,
  signal: AbortSignal | undefined,
  once?: OnceOnly,
): Promise<MessageResult> {
  const { store } = context;
  const intent = makeIntent(task.taskId, type, payload, task.generation);
  const envelopeId = store.transaction(() => {
    if (once !== undefined && store.getOperation(task.taskId, once.key) !== undefined) throw once.refused();
    const queued = queueEnvelope(context, {
      taskId: task.taskId,
      from: self,
      to: task.origin,
      kind: "intent",
      inner: intent,
      purpose: "intent",
    });
    store.putIntent(intent, queued);
    if (once !== undefined)
      store.reserveOperation(task.taskId, once.key, () => ({
        logicalId: intent.intentId,
        logicalType: type,
        envelopeIds: [queued],
        createdAt: context.clock(),
      }));
    return queued;
  });
  requireAccepted(await shipOwn(context, signal, envelopeId), task.taskId);
  return { taskId: task.taskId, intentId: intent.intentId, envelopeId, authority: "receiver" };
}

export async function workerDone(
  context: CoreContext,
  self: TaskEndpoint,
  task: TaskRecord,
  status: TerminalStatus,
  payload: Record<string, unknown>,
  signal: AbortSignal | undefined,
): Promise<DoneResult> {
  const { store } = context;
  const type = `task.${status}` as const;
  const { outcome } = await reserveAndShip(
    context,
    signal,
    task.taskId,
    terminalIntentOf(task),
    () => {
      const intent = makeIntent(task.taskId, type, payload, task.generation);
      const envelopeId = queueEnvelope(context, {
        taskId: task.taskId,
        from: self,
        to: task.origin,
        kind: "intent",
        inner: intent,
        purpose: "terminal",
      });
      store.putIntent(intent, envelopeId);
      return { logicalId: intent.intentId, logicalType: type, envelopeId };
    },
    (existing) => {
      if (existing !== undefined && existing.logicalType !== type) {
        throw new TaskError("TERMINAL_INTENT_CONFLICT", {
          details: { taskId: task.taskId, existingType: existing.logicalType, requestedType: type },
        });
      }
    },
  );
  const snapshot = store.getTask(task.taskId)!;
  const delivery = terminalDelivery(store, snapshot);
  // Retryable: the intent and envelope ids are kept for the retry.
  requireSettled(outcome, { taskId: task.taskId, terminalDelivery: delivery });
  return {
    taskId: task.taskId,
    requestedStatus: status,
    observedCanonicalStatus: snapshot.status,
    terminalDelivery: delivery,
    authority: "receiver",
  };
}
