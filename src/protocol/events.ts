/**
 * `TASK_EVENT_TYPES`: one row per task event type with everything the core, the inbox and the
 * extension need to know about it. Unknown types are rejected with `UNKNOWN_EVENT`.
 */
import type { TSchema } from "@sinclair/typebox";
import { TaskError } from "./errors.ts";
import {
  ActivityPayload,
  AnswerPayload,
  ConversationPayload,
  CreatedPayload,
  DeliveryReceiptPayload,
  LateTerminalPayload,
  ParentAcknowledgedPayload,
  AuditRequestedPayload,
  AuditViewPayload,
  CancelOutcomePayload,
  CorrectionPayload,
  OrphanedPayload,
  ProgressPayload,
  ReassignedPayload,
  RefusedPayload,
  RevisionPayload,
  GrantDecidedPayload,
  GrantRequestedPayload,
  TASK_EVENT_TYPE_NAMES,
  TaskEvent,
  type TaskEventType,
  type TaskStatus,
  TerminalPayload,
  TimedOutPayload,
  UnreportedPayload,
} from "./schemas.ts";
import { assertValid, type ValueModule } from "./validate.ts";

export interface EventTypeRow {
  readonly type: TaskEventType;
  /** Presented to the receiving side's model (inserted) rather than archived. */
  readonly modelVisible: boolean;
  /** A visible event also wakes the model (starts a turn); progress and cancel outcomes do not. */
  readonly wakes: boolean;
  /** The canonical status this event sets, or null when it is not terminal. */
  readonly terminalStatus: Exclude<TaskStatus, "active"> | null;
  /** Question / answer / information: either participant may author it. */
  readonly conversational: boolean;
  /** Kept in the origin's own log only; never forwarded to the target. */
  readonly originLocal: boolean;
  /** A target may submit it as an intent for the origin to canonicalize. */
  readonly receiverIntent: boolean;
  /** Schema of the canonical payload. */
  readonly payload: TSchema;
}

function row(type: TaskEventType, flags: Omit<EventTypeRow, "type" | "wakes"> & { wakes?: boolean }): EventTypeRow {
  return Object.freeze({ type, ...flags, wakes: flags.wakes ?? flags.modelVisible });
}

const conversation = { modelVisible: true, terminalStatus: null, conversational: true, originLocal: false, receiverIntent: true } as const;
const terminal = { modelVisible: true, conversational: false, originLocal: false, receiverIntent: true, payload: TerminalPayload } as const;
const archived = { modelVisible: false, terminalStatus: null, conversational: false, originLocal: false, receiverIntent: false } as const;

export const TASK_EVENT_TYPES: Readonly<Record<TaskEventType, EventTypeRow>> = Object.freeze({
  "task.created": row("task.created", {
    modelVisible: true,
    terminalStatus: null,
    conversational: false,
    originLocal: false,
    receiverIntent: false,
    payload: CreatedPayload,
  }),
  "task.information": row("task.information", { ...conversation, payload: ConversationPayload }),
  "task.question": row("task.question", { ...conversation, payload: ConversationPayload }),
  "task.answer": row("task.answer", { ...conversation, payload: AnswerPayload }),
  "task.completed": row("task.completed", { ...terminal, terminalStatus: "completed" }),
  "task.failed": row("task.failed", { ...terminal, terminalStatus: "failed" }),
  "task.cancelled": row("task.cancelled", { ...terminal, terminalStatus: "cancelled" }),
  "task.timed_out": row("task.timed_out", {
    modelVisible: true,
    terminalStatus: "timed_out",
    conversational: false,
    originLocal: false,
    receiverIntent: false,
    payload: TimedOutPayload,
  }),
  "task.delivery_receipt": row("task.delivery_receipt", {
    modelVisible: false,
    terminalStatus: null,
    conversational: false,
    originLocal: true,
    receiverIntent: true,
    payload: DeliveryReceiptPayload,
  }),
  "task.parent_acknowledged": row("task.parent_acknowledged", { ...archived, payload: ParentAcknowledgedPayload }),
  "task.late_terminal": row("task.late_terminal", { ...archived, payload: LateTerminalPayload }),
  "task.reassigned": row("task.reassigned", {
    modelVisible: true,
    terminalStatus: null,
    conversational: false,
    originLocal: false,
    receiverIntent: false,
    payload: ReassignedPayload,
  }),
  // A worker's refusal of an assignment (its trust gate refused the origin), shown at the origin;
  // never forwarded, since the worker holds no task. It is not terminal by itself: the origin fails
  // the task (a task.failed of its own) only when a key it trusts signed the refusal.
  "task.refused": row("task.refused", {
    modelVisible: true,
    terminalStatus: null,
    conversational: false,
    originLocal: true,
    receiverIntent: true,
    payload: RefusedPayload,
  }),
  // A worker's progress: shown at the origin without waking it (coalesced, rate-limited), never forwarded.
  "task.progress": row("task.progress", {
    modelVisible: true,
    wakes: false,
    terminalStatus: null,
    conversational: false,
    originLocal: true,
    receiverIntent: true,
    payload: ProgressPayload,
  }),
  // The origin's own record that the worker is gone: shown once, with one wake; never forwarded.
  "task.orphaned": row("task.orphaned", {
    modelVisible: true,
    terminalStatus: null,
    conversational: false,
    originLocal: true,
    receiverIntent: false,
    payload: OrphanedPayload,
  }),
  // An author's correction or withdrawal of an earlier answer or result; the original stays, superseded.
  "task.correction": row("task.correction", {
    modelVisible: true,
    terminalStatus: null,
    conversational: true,
    originLocal: false,
    receiverIntent: true,
    payload: CorrectionPayload,
  }),
  // The origin asks the worker for its view (archived at the worker, which answers at once).
  "task.audit_requested": row("task.audit_requested", { ...archived, payload: AuditRequestedPayload }),
  // The worker's view of the task, kept in the origin's log for `audit`; never forwarded, never shown.
  "task.audit_view": row("task.audit_view", {
    modelVisible: false,
    terminalStatus: null,
    conversational: false,
    originLocal: true,
    receiverIntent: true,
    payload: AuditViewPayload,
  }),
  // What the worker's Pi did with a cancel (aborted, idle, still busy): shown at the origin without waking it.
  "task.cancel_outcome": row("task.cancel_outcome", {
    modelVisible: true,
    wakes: false,
    terminalStatus: null,
    conversational: false,
    originLocal: true,
    receiverIntent: true,
    payload: CancelOutcomePayload,
  }),
  // A worker's activity report (running a tool, idle, waiting, stuck; usage): the origin keeps the
  // newest as the task's state (src/core/activity.ts). Never appended to the log, never shown as an event.
  "task.activity": row("task.activity", {
    modelVisible: false,
    terminalStatus: null,
    conversational: false,
    originLocal: true,
    receiverIntent: true,
    payload: ActivityPayload,
  }),
  // The worker's model ended its turns without reporting the task, reminded once: what it last said,
  // shown at the origin with a wake so that the origin decides. Never a result; never forwarded.
  "task.unreported": row("task.unreported", {
    modelVisible: true,
    terminalStatus: null,
    conversational: false,
    originLocal: true,
    receiverIntent: true,
    payload: UnreportedPayload,
  }),
  // The origin sends a completed result back to its worker with a reason: the task is active again
  // (one more round, at most maxRevisionRounds); shown to the worker's model, with a wake.
  "task.revision_requested": row("task.revision_requested", {
    modelVisible: true,
    terminalStatus: null,
    conversational: false,
    originLocal: false,
    receiverIntent: false,
    payload: RevisionPayload,
  }),
  // A worker asks for more than its grant (once per task): kept at the origin for its person to
  // decide (announced to them, never shown to the origin's model, which cannot decide); never forwarded.
  "task.grant_requested": row("task.grant_requested", {
    modelVisible: false,
    terminalStatus: null,
    conversational: false,
    originLocal: true,
    receiverIntent: true,
    payload: GrantRequestedPayload,
  }),
  // The origin's person decided a grant request: shown to the worker's model with a wake (approved:
  // its grant is wider from now on, src/core/grant-requests.ts).
  "task.grant_decided": row("task.grant_decided", {
    modelVisible: true,
    terminalStatus: null,
    conversational: false,
    originLocal: false,
    receiverIntent: false,
    payload: GrantDecidedPayload,
  }),
});

export function isKnownEventType(type: unknown): type is TaskEventType {
  return typeof type === "string" && (TASK_EVENT_TYPE_NAMES as readonly string[]).includes(type);
}

/** The row of a type; an unknown type is a typed `UNKNOWN_EVENT` error, never a stall. */
export function eventTypeRow(type: unknown): EventTypeRow {
  if (!isKnownEventType(type)) {
    throw new TaskError("UNKNOWN_EVENT", { details: { type: typeof type === "string" ? type : String(type) } });
  }
  return TASK_EVENT_TYPES[type];
}

export function isTerminalType(type: TaskEventType): boolean {
  return TASK_EVENT_TYPES[type].terminalStatus !== null;
}

/** `task.created` and `task.reassigned` carry an assignment (they travel as assignment envelopes). */
export function isAssignmentType(type: TaskEventType): boolean {
  return type === "task.created" || type === "task.reassigned";
}

/** A task's current assignment: its newest `task.created` or `task.reassigned` event. */
export function latestAssignment<E extends { readonly type: TaskEventType }>(events: readonly E[]): E | undefined {
  for (let index = events.length - 1; index >= 0; index -= 1) if (isAssignmentType(events[index]!.type)) return events[index];
  return undefined;
}

export const TERMINAL_STATUSES: ReadonlySet<TaskStatus> = new Set(["completed", "failed", "cancelled", "timed_out"]);

export function isTerminalStatus(status: TaskStatus): boolean {
  return TERMINAL_STATUSES.has(status);
}

/**
 * Validates a task event completely: the envelope of the event (strict), a known type (else
 * `UNKNOWN_EVENT`) and its per-type payload (else `code`, default `INVALID_EVENT`).
 */
export function validateTaskEvent(value: unknown, options: { code?: string; pathPrefix?: string; values?: ValueModule } = {}): TaskEvent {
  const code = options.code ?? "INVALID_EVENT";
  const prefix = options.pathPrefix ?? "";
  if (typeof value === "object" && value !== null && "type" in value) eventTypeRow((value as { type: unknown }).type);
  const event = assertValid(TaskEvent, value, { code, pathPrefix: prefix, values: options.values, subject: "task event" }) as TaskEvent;
  const typeRow = eventTypeRow(event.type);
  assertValid(typeRow.payload, event.payload, { code, pathPrefix: `${prefix}/payload`, values: options.values, subject: event.type });
  return event;
}
