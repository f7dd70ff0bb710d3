/**
 * The operations of the side that assigned a task (the origin): create it, message the worker,
 * finish it itself, cancel it, acknowledge its outcome. The origin owns the task's canonical status:
 * every event it authors is canonical at once and fanned out to the worker.
 */
import { sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError, toTaskError, type DeferralCause, deferralCause } from "../protocol/errors.ts";
import { eventTypeRow, isTerminalStatus } from "../protocol/events.ts";
import { narrowGrant } from "../protocol/grant.ts";
import { defaultTaskTimeoutMs } from "../protocol/limits.ts";
import { TASK_PROTOCOL_VERSION } from "../protocol/names.ts";
import type {
  CancelParams,
  Grant,
  MessageParams,
  SendParams,
  TaskEndpoint,
  TaskEvent,
  TaskEventType,
  TaskRecord,
  TerminalStatus,
} from "../protocol/schemas.ts";
import { COOLDOWN, OPERATION } from "./bookkeeping.ts";
import { appendCanonical } from "./canonical.ts";
import { type CoreContext, isClosed } from "./context.ts";
import { makeEvent } from "./envelopes.ts";
import { checkChoiceAnswer, choiceFields } from "./choices.ts";
import { correctionFields } from "./corrections.ts";
import { lineageFor } from "./lineage.ts";
import { fanOut, queueEnvelope } from "./outbox.ts";
import { provenAt, untrustedDecision } from "./proofs.ts";
import type { AckResult, CancelResult, CreateOptions, CreateResult, DoneResult, MessageResult } from "./results.ts";
import { askFirst, deliveryOf, requireAccepted, requireOrigin, requireSettled, reserveAndShip, shipOwn } from "./ship.ts";
import { lossEvidence } from "./reassign.ts";
import { terminalDelivery } from "./views.ts";

/** Appends an origin-authored canonical event and fans it out to the worker (no local echo). */
function originEvent(
  context: CoreContext,
  task: TaskRecord,
  type: TaskEventType,
  payload: Record<string, unknown>,
): { event: TaskEvent; envelopeId: string } {
  const event = appendCanonical(context.store, task, type, payload, context.clock());
  return { event, envelopeId: fanOut(context, undefined, task, event, false) };
}

/**
 * An assignment the relay refused for good (unknown target, too large, …): no task
 * exists then, so it is forgotten — with its envelope and any cooldown of it.
 */
function discardRefused(context: CoreContext, taskId: string, envelopeId: string): void {
  const { store } = context;
  store.transaction(() => {
    store.clearCooldown(COOLDOWN.envelope(envelopeId));
    store.discardTask(taskId);
  });
}

/**
 * What a sub-task may take from its parent task: the parent's grant with its wall time, turns and
 * cost cut to what is left of them now (`spent`: what this session's model used on the parent), and
 * the parent's end — a sub-task draws from its parent's budget, it does not start a new one. A
 * parent whose budget is spent sends nothing (BUDGET_EXHAUSTED).
 */
function parentBudget(
  context: CoreContext,
  lineage: TaskRecord["lineage"],
  now: number,
  spentOn: CreateOptions["spentOn"],
): { grant?: Grant; endsAt?: number } {
  const parentId = lineage?.parentTaskId;
  const parent = parentId === undefined ? undefined : context.store.getStoredTask(parentId)?.record;
  if (parent === undefined) return {};
  if (parent.grant === undefined) return { endsAt: parent.expiresAt };
  const spent = spentOn?.(parent.taskId);
  const { maxWallMs, maxTurns, maxCostUsd } = parent.grant;
  const left = {
    ...(maxWallMs === undefined ? {} : { maxWallMs: maxWallMs - (now - parent.createdAt) }),
    ...(maxTurns === undefined ? {} : { maxTurns: maxTurns - (spent?.turns ?? 0) }),
    ...(maxCostUsd === undefined ? {} : { maxCostUsd: maxCostUsd - (spent?.costUsd ?? 0) }),
  };
  const spentOut = Object.entries(left).find(([, value]) => value <= 0);
  if (spentOut !== undefined)
    throw new TaskError("BUDGET_EXHAUSTED", {
      message: `the ${spentOut[0]} granted to the task this one is delegated from is spent; nothing was sent`,
      details: { parentTaskId: parent.taskId, budget: spentOut[0], granted: parent.grant[spentOut[0] as keyof typeof left] },
    });
  return { grant: { ...parent.grant, ...left }, endsAt: parent.expiresAt };
}

/** The grant a new task carries: the one asked for, narrowed to what its parent task has left (a sub-delegation never widens). */
function grantField(requested: Grant | undefined, parent: Grant | undefined): { grant?: Grant } {
  const grant = narrowGrant(requested, parent);
  return grant === undefined ? {} : { grant };
}

/** Refuses a new task while this session holds as many active tasks as it may (`FANOUT_LIMIT`). */
function checkFanOut(context: CoreContext): void {
  const cap = context.settings.maxActiveTasks;
  const active = cap === undefined ? 0 : context.store.activeTaskIds("origin").length;
  if (cap !== undefined && active >= cap) throw new TaskError("FANOUT_LIMIT", { details: { active, maxActiveTasks: cap } });
}

export async function createTask(
  context: CoreContext,
  self: TaskEndpoint,
  params: SendParams,
  options: CreateOptions,
): Promise<CreateResult> {
  const signal = options.signal;
  const { store } = context;
  if (sameEndpoint(params.to, self))
    throw new TaskError("INVALID_TARGET", { message: "a task cannot be sent to this endpoint itself", details: { target: params.to } });
  checkFanOut(context);
  const taskId = crypto.randomUUID();
  // Refused here (cycle, depth, fan-out) means no relay request, nothing created or sent.
  const lineage = lineageFor(context, self, params.to, taskId, options.lineage);
  // One round trip: the send's own target check is the resolve. Accepted → the task exists; refused
  // for good → it is forgotten (no task); an uncertain outcome keeps it, its assignment pending.
  const target = params.to;
  const createdAt = context.clock();
  const parent = parentBudget(context, lineage, createdAt, options.spentOn);
  const asked = createdAt + (params.timeoutMs ?? defaultTaskTimeoutMs);
  const task: TaskRecord = {
    taskId,
    protocolVersion: TASK_PROTOCOL_VERSION,
    origin: self,
    target,
    task: params.task,
    createdAt,
    expiresAt: parent.endsAt === undefined ? asked : Math.min(asked, parent.endsAt),
    status: "active",
    lineage,
    ...grantField(options.grant, parent.grant),
  };
  const created = makeEvent(task, "task.created", "1", createdAt, { task: task.task });
  const envelopeId = store.transaction(() => {
    store.putTask(task, "origin");
    if (options.quietResult === true) store.setTaskMeta(taskId, { quietResult: true });
    store.appendEvent(created);
    return queueEnvelope(context, {
      taskId: task.taskId,
      from: self,
      to: target,
      kind: "assignment",
      inner: { task, event: created },
      purpose: "assignment",
      operation: { key: OPERATION.assignment(created.eventId), logicalId: created.eventId, logicalType: created.type },
    });
  });
  // A worker that has not proven who it is gets no content yet: it is asked (a hello, sent now); the
  // assignment follows its proof (proofs.ts). A target the relay does not know means no task.
  if (store.getOutbox(envelopeId)?.awaiting === true) {
    // Proven already, yet not by a key the task may go to: a worker this identity does not trust.
    const proof = provenAt(context, target);
    if (proof !== undefined && untrustedDecision(context, task.taskId, target, proof.key) === "refuse") {
      if (!isClosed(context)) discardRefused(context, task.taskId, envelopeId);
      throw new TaskError("UNKNOWN_PEER", {
        message: `The worker at this endpoint is signed by key ${proof.key}, which this identity has not paired with; nothing was sent to it (pairing is your operator's decision).`,
        details: { target, key: proof.key, created: false },
      });
    }
    if (proof !== undefined) return { taskId: task.taskId, envelopeId, target, delivery: "pending" };
    try {
      await askFirst(context, signal, target);
    } catch (raw) {
      const error = toTaskError(raw);
      if (error.code !== "TARGET_NOT_REGISTERED") throw error.withDetails({ taskId: task.taskId, envelopeId, delivery: "pending" });
      if (!isClosed(context)) discardRefused(context, task.taskId, envelopeId);
      throw error.withDetails({ envelopeId, delivery: "blocked", created: false });
    }
    return { taskId: task.taskId, envelopeId, target, delivery: "pending" };
  }
  const outcome = await shipOwn(context, signal, envelopeId);
  if (outcome.state === "quarantined") {
    if (!isClosed(context)) discardRefused(context, task.taskId, envelopeId);
    // No task exists: the error names none.
    throw outcome.error.withDetails({ envelopeId, delivery: "blocked", created: false });
  }
  requireAccepted(outcome, task.taskId);
  return { taskId: task.taskId, envelopeId, target, delivery: "accepted" };
}

export async function originMessage(
  context: CoreContext,
  task: TaskRecord,
  params: MessageParams,
  signal: AbortSignal | undefined,
): Promise<MessageResult> {
  if (params.type === "progress" || params.raisesQuestion !== undefined || params.percent !== undefined) {
    const path = params.type === "progress" ? "/type" : params.raisesQuestion !== undefined ? "/raisesQuestion" : "/percent";
    throw new TaskError("INVALID_REQUEST", {
      message: "progress and raised questions come from the session working on the task, not from its origin",
      details: { path, taskId: task.taskId },
    });
  }
  if (params.type === "answer") checkChoiceAnswer(context.store, params.inReplyTo, params.message);
  const payload = {
    message: params.message,
    ...(params.inReplyTo === undefined ? {} : { inReplyTo: params.inReplyTo }),
    ...choiceFields(params),
    ...correctionFields(params),
  };
  // A steer is information for the worker's running turn (presentation.ts hands it to Pi's steering queue).
  const type = params.type === "steer" ? "task.information" : (`task.${params.type}` as const);
  const steered = params.type === "steer" ? { ...payload, steer: true } : payload;
  const { event, envelopeId } = context.store.transaction(() => originEvent(context, task, type, steered));
  requireAccepted(await shipOwn(context, signal, envelopeId), task.taskId);
  return { taskId: task.taskId, eventId: event.eventId, envelopeId, authority: "origin" };
}

export async function originDone(
  context: CoreContext,
  task: TaskRecord,
  status: TerminalStatus,
  payload: Record<string, unknown>,
  signal: AbortSignal | undefined,
): Promise<DoneResult> {
  const type = `task.${status}` as const;
  const { record } = await reserveAndShip(context, signal, task.taskId, OPERATION.originTerminal, () => {
    const terminal = isTerminalStatus(context.store.getStoredTask(task.taskId)!.record.status);
    const { event, envelopeId } = terminal
      ? originEvent(context, task, "task.late_terminal", { ...payload, lateType: type })
      : originEvent(context, task, type, payload);
    return { logicalId: event.eventId, logicalType: event.type, envelopeId };
  });
  if (record.logicalType !== type && record.logicalType !== "task.late_terminal") {
    throw new TaskError("TERMINAL_INTENT_CONFLICT", {
      details: { taskId: task.taskId, existingType: record.logicalType, requestedType: type },
    });
  }
  const snapshot = context.store.getTask(task.taskId)!;
  return {
    taskId: task.taskId,
    requestedStatus: status,
    observedCanonicalStatus: snapshot.status,
    terminalDelivery: terminalDelivery(context.store, snapshot),
    authority: "origin",
    canonicalEvent: { type: record.logicalType, eventId: record.logicalId },
  };
}

/**
 * Cancels a task this origin assigned. The cancel is the origin's decision and canonical here at once
 * (`task.cancelled`, before anything is sent): its delivery to the worker is best effort and never
 * makes the cancel fail. A delivery the relay did not take now stays queued (`pending`, sent by a
 * later pass); to a worker known lost — orphaned, or its endpoint refused as not registered — it is
 * not required (`workerLost`), whatever the relay did with it, so the answer is the same every time.
 */
export async function cancel(
  context: CoreContext,
  self: TaskEndpoint,
  params: CancelParams,
  signal: AbortSignal | undefined,
): Promise<CancelResult> {
  const task = requireOrigin(context, params.taskId, self);
  // Judged before the cancel: a cancelled task is no longer orphaned.
  const lostBefore = lossEvidence(context, task);
  const { record, outcome } = await reserveAndShip(
    context,
    signal,
    task.taskId,
    OPERATION.originCancellation,
    () => {
      const { event, envelopeId } = originEvent(context, task, "task.cancelled", { summary: params.reason ?? "Cancelled by the origin." });
      return { logicalId: event.eventId, logicalType: event.type, envelopeId };
    },
    (existing) => {
      const status = context.store.getStoredTask(task.taskId)!.record.status;
      if (existing === undefined && isTerminalStatus(status))
        throw new TaskError("TASK_TERMINAL", { details: { taskId: task.taskId, status } });
    },
  );
  const workerLost = lostBefore || (outcome.state === "quarantined" && outcome.error.code === "TARGET_NOT_REGISTERED");
  // A refusal is news only about a worker not known lost before (for an orphaned task it is expected).
  const warnings =
    outcome.state === "quarantined" && !lostBefore
      ? [
          {
            code: outcome.error.code,
            message: outcome.error.message,
            retryable: false as const,
            delivery: "blocked" as const,
            target: task.target,
          },
        ]
      : [];
  const waiting = outcome.state === "failed" || outcome.state === "deferred" ? { pending: pendingWhy(outcome.error) } : {};
  return {
    taskId: task.taskId,
    status: "cancelled",
    eventId: record.logicalId,
    delivery: deliveryOf(outcome),
    workerLost,
    ...waiting,
    warnings,
  };
}

/** Why a cancel's delivery waits: the deferral's reason, else the code of what the relay answered. */
function pendingWhy(error: TaskError): { readonly code: string; readonly reason: string; readonly cause?: DeferralCause } {
  const reason = error.details.reason;
  // A send the relay did not answer, or refused for capacity, waits for that to pass.
  const cause =
    deferralCause(error.details) ??
    (error.code === "RELAY_CAPACITY"
      ? "capacity"
      : error.spec.class === "unavailable" || error.spec.class === "timeout"
        ? "outage"
        : undefined);
  return { code: error.code, reason: typeof reason === "string" ? reason : error.message, ...(cause === undefined ? {} : { cause }) };
}

export async function acknowledge(
  context: CoreContext,
  self: TaskEndpoint,
  taskId: string,
  signal: AbortSignal | undefined,
): Promise<AckResult> {
  const task = requireOrigin(context, taskId, self);
  const { record, outcome } = await reserveAndShip(
    context,
    signal,
    taskId,
    OPERATION.parentAcknowledgment,
    () => {
      const terminal = [...context.store.getEvents(taskId)].reverse().find((event) => eventTypeRow(event.type).terminalStatus !== null)!;
      const { event, envelopeId } = originEvent(context, task, "task.parent_acknowledged", { acknowledgedEventId: terminal.eventId });
      return { logicalId: event.eventId, logicalType: event.type, envelopeId };
    },
    () => {
      const current = context.store.getStoredTask(taskId)!.record;
      if (!isTerminalStatus(current.status)) throw new TaskError("TASK_NOT_TERMINAL", { details: { taskId, status: current.status } });
    },
  );
  requireSettled(outcome, { taskId });
  return { taskId, eventId: record.logicalId, delivery: deliveryOf(outcome) };
}
