/**
 * Intake: validate and record what arrives, and canonicalize at the origin — without sending.
 *
 * - assignments (origin → me): validated against their task, recorded like any task I work on;
 * - intents (my task's target → me, the origin): canonicalized once per intent id: the first
 *   terminal wins, later terminals become `task.late_terminal`; the canonical event is fanned out
 *   to the target and queued for local presentation (never a self-addressed envelope);
 * - canonical events (origin → me): appended once, status follows terminal events;
 * - expired active tasks I originated become `task.timed_out`.
 * A delivery that fails validation is rejected (reported, then ACKed): it never stalls the inbox.
 */
import { sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { eventTypeRow, isAssignmentType, isTerminalStatus, validateTaskEvent } from "../protocol/events.ts";
import { type AssignmentPayload, type TaskEndpoint, TaskEnvelope, type TaskEvent, TaskIntent, type TaskRecord } from "../protocol/schemas.ts";
import { assertValid } from "../protocol/validate.ts";
import type { DeliveryRow, TaskStore } from "../store/task-store.ts";
import { type CoreContext, me } from "./context.ts";
import { makeEnvelope, makeEvent, nextSequence } from "./envelopes.ts";
import type { WorkScope } from "./scope.ts";

/** Delivery stages owned by the core. */
export const STAGE = {
  tracked: "tracked",
  /** Recorded; waiting for presentation (assignments and canonical events). */
  recorded: "recorded",
  /** Presented or archived; waiting for its receipts to ship. */
  presented: "presented",
  /** A raw intent canonicalized; waiting for its fan-out. */
  canonicalized: "canonicalized",
  /** Invalid; reported and ACKed without processing. */
  rejected: "rejected",
} as const;

export interface DeliveryData {
  readonly kind?: string;
  readonly taskId?: string;
  readonly eventId?: string;
  readonly visible?: boolean;
  readonly reassigned?: boolean;
  /** Envelopes that must be accepted (or, for receipts, blocked for good) before the ACK. */
  readonly requires?: readonly string[];
  readonly error?: { readonly code: string; readonly message: string };
}

export function deliveryData(row: DeliveryRow): DeliveryData {
  return row.data as DeliveryData;
}

function invalid(code: string, problem: string, details: Record<string, unknown> = {}): TaskError {
  return new TaskError(code, { message: `${code}: ${problem}`, details: { problem, ...details } });
}

function ensure(condition: boolean, code: string, problem: string, details: Record<string, unknown> = {}): void {
  if (!condition) throw invalid(code, problem, details);
}

/** Canonical fan-out of an event the origin created: to the target, plus local presentation. */
export function fanOut(context: CoreContext, scope: WorkScope | undefined, task: TaskRecord, event: TaskEvent, present: boolean): string {
  const { store } = context;
  const envelope = makeEnvelope(task.origin, task.target, task.taskId, "canonical_event", event, context.clock());
  store.putOutbox({ envelopeId: envelope.envelopeId, taskId: task.taskId, target: task.target, kind: "canonical_event", purpose: "fanout", envelope });
  if (present) store.enqueueLocalPresentation(event);
  scope?.required.push(envelope.envelopeId);
  return envelope.envelopeId;
}

/** Origin: every expired active task becomes `task.timed_out` (canonical, fanned out, presented). */
export function canonicalizeTimeouts(context: CoreContext, scope: WorkScope): number {
  const { store } = context;
  const now = context.clock();
  let count = 0;
  for (const taskId of store.activeTaskIds()) {
    const stored = store.getStoredTask(taskId);
    if (stored === undefined || stored.role !== "origin" || stored.record.expiresAt > now) continue;
    store.transaction(() => {
      const event = makeEvent(stored.record, "task.timed_out", nextSequence(store, taskId), now, { expiresAt: stored.record.expiresAt });
      store.appendEvent(event);
      store.setStatus(taskId, "timed_out");
      fanOut(context, scope, stored.record, event, true);
    });
    count += 1;
  }
  return count;
}

function validateHistory(task: TaskRecord, history: readonly unknown[]): TaskEvent[] {
  return history.map((raw, index) => {
    const event = validateTaskEvent(raw, { code: "INVALID_ASSIGNMENT", pathPrefix: `/payload/payload/history/${index}` });
    ensure(event.taskId === task.taskId, "INVALID_ASSIGNMENT", "history event belongs to another task", { index });
    ensure(sameEndpoint(event.source, task.origin), "INVALID_ASSIGNMENT", "history event is not from the task's origin", { index });
    ensure(!eventTypeRow(event.type).originLocal, "INVALID_ASSIGNMENT", "history carries an origin-local event", { index });
    return event;
  });
}

function recordAssignment(context: CoreContext, envelope: TaskEnvelope, payload: AssignmentPayload): DeliveryData {
  const { store } = context;
  const self = me(context);
  const task = payload.task;
  const event = validateTaskEvent(payload.event, { code: "INVALID_ASSIGNMENT", pathPrefix: "/payload/payload/event" });
  ensure(envelope.payload.taskId === task.taskId && event.taskId === task.taskId, "INVALID_ASSIGNMENT", "task ids disagree");
  ensure(sameEndpoint(task.target, self), "INVALID_ASSIGNMENT", "the task is not addressed to this endpoint");
  ensure(sameEndpoint(task.origin, envelope.source), "INVALID_ASSIGNMENT", "the envelope does not come from the task's origin");
  ensure(isAssignmentType(event.type), "INVALID_ASSIGNMENT", "assignment event is not task.created or task.reassigned");
  ensure(sameEndpoint(event.source, task.origin) && sameEndpoint(event.target, task.target), "INVALID_ASSIGNMENT", "event endpoints disagree with the task");
  ensure((event.payload as { task?: unknown }).task === task.task, "INVALID_ASSIGNMENT", "event and task text disagree");
  ensure(task.status === "active", "INVALID_ASSIGNMENT", "the assigned task is not active");
  ensure(event.type === "task.reassigned" || payload.history === undefined, "INVALID_ASSIGNMENT", "only a reassignment carries history");
  const history = validateHistory(task, payload.history ?? []);
  store.transaction(() => {
    const known = store.getStoredTask(task.taskId);
    if (known === undefined) store.putTask(task, "target");
    else {
      ensure(known.role === "target" && sameEndpoint(known.record.origin, task.origin), "INVALID_ASSIGNMENT", "a known task with another origin");
      // Only a new assignment event (a reassignment) moves a known task; a re-served copy of an
      // assignment already recorded is no news and must not reopen a task that ended since.
      if (store.getEvent(event.eventId) === undefined) {
        store.setTarget(task.taskId, task.target);
        if (known.record.status !== task.status) store.setStatus(task.taskId, task.status);
      }
    }
    for (const carried of history) store.appendEvent(carried);
    store.appendEvent(event);
  });
  return { kind: "assignment", taskId: task.taskId, eventId: event.eventId, visible: true, reassigned: event.type === "task.reassigned", requires: [] };
}

function canonicalizeIntent(context: CoreContext, scope: WorkScope, envelope: TaskEnvelope): DeliveryData {
  const { store } = context;
  const intent = assertValid(TaskIntent, envelope.payload.payload, { code: "INVALID_INTENT", pathPrefix: "/payload/payload" });
  ensure(intent.taskId === envelope.payload.taskId, "INVALID_INTENT", "task ids disagree");
  const stored = store.getStoredTask(intent.taskId);
  if (stored === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId: intent.taskId } });
  const task = stored.record;
  const authorised = stored.role === "origin" && sameEndpoint(envelope.source, task.target) && sameEndpoint(envelope.target, task.origin);
  if (!authorised) throw new TaskError("UNAUTHORIZED_INTENT", { details: { taskId: intent.taskId, source: envelope.source } });
  const row = eventTypeRow(intent.type);
  ensure(row.receiverIntent, "INVALID_INTENT", `${intent.type} is not a receiver intent`);
  ensure(!("intentId" in intent.payload), "INVALID_INTENT", "intent payload must not carry intentId");
  assertValid(row.payload, intent.payload, { code: "INVALID_INTENT", pathPrefix: "/payload/payload/payload" });

  const operation = `intent:${intent.intentId}`;
  const existing = store.getOperation(intent.taskId, operation);
  if (existing !== undefined) {
    for (const id of existing.envelopeIds) if (store.getOutbox(id)?.state === "pending") scope.required.push(id);
    return { kind: "intent", taskId: intent.taskId, eventId: existing.logicalId, requires: existing.envelopeIds };
  }
  return store.transaction(() => {
    const now = context.clock();
    const sequence = nextSequence(store, task.taskId);
    const canonicalPayload = { intentId: intent.intentId, ...intent.payload };
    let event: TaskEvent;
    let fanout: string | undefined;
    if (row.originLocal) {
      event = makeEvent(task, intent.type, sequence, now, canonicalPayload);
      store.appendEvent(event);
    } else if (row.terminalStatus !== null && isTerminalStatus(store.getStoredTask(task.taskId)!.record.status)) {
      event = makeEvent(task, "task.late_terminal", sequence, now, { ...canonicalPayload, lateType: intent.type });
      store.appendEvent(event);
      fanout = fanOut(context, scope, task, event, true);
    } else {
      if (intent.type === "task.answer") {
        const question = store.getEvent(String(intent.payload.inReplyTo));
        ensure(question !== undefined && question.taskId === task.taskId && question.type === "task.question", "INVALID_INTENT", "inReplyTo does not name a question of this task");
      }
      event = makeEvent(task, intent.type, sequence, now, canonicalPayload);
      store.appendEvent(event);
      if (row.terminalStatus !== null) store.setStatus(task.taskId, row.terminalStatus);
      fanout = fanOut(context, scope, task, event, true);
    }
    const requires = fanout === undefined ? [] : [fanout];
    store.reserveOperation(task.taskId, operation, () => ({ logicalId: event.eventId, logicalType: event.type, envelopeIds: requires, createdAt: now }));
    return { kind: "intent", taskId: task.taskId, eventId: event.eventId, requires };
  });
}

/** Whether a canonical event this endpoint receives is model-visible here. */
export function visibleAtTarget(store: TaskStore, event: TaskEvent): boolean {
  const row = eventTypeRow(event.type);
  if (!row.modelVisible || row.originLocal) return false;
  const intentId = (event.payload as { intentId?: unknown }).intentId;
  // Echoes of my own intents are canonical replicas: archive them, don't wake the model.
  return !(typeof intentId === "string" && store.getIntent(intentId) !== undefined);
}

function recordCanonical(context: CoreContext, envelope: TaskEnvelope): DeliveryData {
  const { store } = context;
  const event = validateTaskEvent(envelope.payload.payload, { code: "INVALID_EVENT", pathPrefix: "/payload/payload" });
  ensure(event.taskId === envelope.payload.taskId, "INVALID_EVENT", "task ids disagree");
  const stored = store.getStoredTask(event.taskId);
  if (stored === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId: event.taskId } });
  if (stored.role === "origin") {
    // An origin-targeted echo of its own canonical event (older peers): nothing to learn.
    ensure(sameEndpoint(envelope.source, stored.record.origin), "UNAUTHORIZED_INTENT", "canonical events come only from the task's origin");
    return { kind: "canonical_event", taskId: event.taskId, eventId: event.eventId, visible: false };
  }
  ensure(sameEndpoint(envelope.source, stored.record.origin) && sameEndpoint(event.source, stored.record.origin), "INVALID_EVENT", "canonical events come only from the task's origin");
  const row = eventTypeRow(event.type);
  ensure(event.type !== "task.created" && event.type !== "task.reassigned", "INVALID_EVENT", "assignment events travel as assignments");
  store.transaction(() => {
    store.appendEvent(event);
    if (row.terminalStatus !== null && stored.record.status === "active") store.setStatus(event.taskId, row.terminalStatus);
  });
  return { kind: "canonical_event", taskId: event.taskId, eventId: event.eventId, visible: visibleAtTarget(store, event) };
}

/**
 * Validates and records one tracked delivery in its own transaction, setting its stage. Never
 * throws for a bad delivery (it is rejected and reported); relay-loss errors propagate; a full
 * store (`TASK_CAPACITY`) leaves the delivery tracked and unACKed.
 */
export function recordDelivery(context: CoreContext, scope: WorkScope, row: DeliveryRow): void {
  const { store } = context;
  const required = scope.required.length;
  try {
    store.transaction(() => {
      const envelope = assertValid(TaskEnvelope, row.envelope, { code: "INVALID_DELIVERY" });
      const self: TaskEndpoint = me(context);
      ensure(sameEndpoint(envelope.target, self), "INVALID_DELIVERY", "envelope is addressed to another endpoint");
      let data: DeliveryData;
      let stage: string;
      switch (envelope.payload.kind) {
        case "assignment":
          data = recordAssignment(context, envelope, envelope.payload.payload);
          stage = STAGE.recorded;
          break;
        case "intent":
          data = canonicalizeIntent(context, scope, envelope);
          stage = STAGE.canonicalized;
          break;
        case "canonical_event":
          data = recordCanonical(context, envelope);
          stage = STAGE.recorded;
          break;
      }
      store.updateDelivery(row.envelopeId, { stage, data: data as Record<string, unknown> });
    });
  } catch (raw) {
    const error = toTaskError(raw);
    if (error.spec.relayLoss) throw error;
    scope.required.length = required;
    scope.fail("intake", error.withDetails({ envelopeId: row.envelopeId, cursor: row.cursor }));
    // Full local memory is not the delivery's fault: it stays tracked and unACKed (the relay keeps
    // it) and is re-driven when there is room, instead of being rejected, ACKed and lost.
    if (error.code === "TASK_CAPACITY") return;
    try {
      store.updateDelivery(row.envelopeId, { stage: STAGE.rejected, ackRequested: true, data: { error: { code: error.code, message: error.message } } });
    } catch (full) {
      // No room even to mark it rejected: it stays tracked and is judged again when there is room.
      scope.fail("intake", toTaskError(full).withDetails({ envelopeId: row.envelopeId }));
    }
  }
}
