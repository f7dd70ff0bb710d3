/**
 * What this endpoint knows of a task, as callers read it (`TaskView`): the stored snapshot plus
 * two facts derived from the core's bookkeeping —
 * - `terminalDelivery` (worker side): whether its terminal intent is `not_submitted`, `pending`,
 *   `accepted` or `delivery_blocked` (with the refusal);
 * - `deliveryEvidence`: how far the current assignment got (relay acceptance, receipt, Pi
 *   insertion, wake). None of it proves model execution: `modelExecution` is always `not_evidenced`.
 */
import { latestAssignment } from "../protocol/events.ts";
import type { CancelOutcome, DeliveryReceiptPayload, TaskEvent, TerminalDelivery } from "../protocol/schemas.ts";
import { openQuestions } from "./attention.ts";
import { supersededBy } from "./corrections.ts";
import type { TaskSnapshot } from "../store/task-store.ts";
import { type CoreStore, OPERATION, type TaskMeta, terminalIntentOf, type WorkerActivity } from "./bookkeeping.ts";
import { hasEvidence } from "./presentation.ts";
import { peerOfTask, type Signer, type TrustState } from "./trust.ts";

export interface DeliveryEvidence {
  /** The assignment envelope at the relay (origin view). */
  readonly relayAcceptance: "accepted" | "pending" | "blocked" | "not_applicable";
  readonly receiverReceipt: "not_confirmed" | "confirmed";
  readonly piInsertion: "not_confirmed" | "blocked" | "confirmed";
  readonly wakeAcceptance: "not_confirmed" | "pending" | "confirmed";
  readonly modelExecution: "not_evidenced";
}

/**
 * Why a task needs someone's attention: `orphaned` (its worker is lost: reassign or cancel),
 * `needs_input` (a question waits for this side's answer), `indeterminate` (its outcome is unknown:
 * it timed out without a late result, or it is reconnecting after a relay restart).
 */
export type Attention = "orphaned" | "needs_input" | "indeterminate";

/** What is known of a task's effect, beside its canonical status (first terminal wins). */
export type Outcome = "unknown" | "succeeded" | "failed" | "cancelled" | "no_effect";

const OUTCOME_OF_TYPE: Readonly<Record<string, Outcome>> = {
  "task.completed": "succeeded",
  "task.failed": "failed",
  "task.cancelled": "cancelled",
};

/** The worker's result that arrived after the task timed out (it settles the outcome). */
export function lateResult(task: TaskSnapshot): TaskEvent | undefined {
  if (task.status !== "timed_out") return undefined;
  return task.events.find((event) => event.type === "task.late_terminal" && typeof event.payload.intentId === "string");
}

export function outcomeOf(task: TaskSnapshot): Outcome {
  switch (task.status) {
    case "active":
      return "unknown";
    case "completed":
      return "succeeded";
    case "cancelled":
      return "cancelled";
    case "failed":
      return task.events.some((event) => event.type === "task.failed" && event.payload.noEffect === true) ? "no_effect" : "failed";
    case "timed_out": {
      const late = lateResult(task);
      return late === undefined ? "unknown" : (OUTCOME_OF_TYPE[String(late.payload.lateType)] ?? "unknown");
    }
  }
}

function attentionOf(task: TaskSnapshot, meta: TaskMeta | undefined): Attention | undefined {
  if (task.status === "active" && meta?.orphanedAt !== undefined) return "orphaned";
  if (openQuestions(task).length > 0) return "needs_input";
  if (meta?.reconnectingSince !== undefined || (task.status === "timed_out" && outcomeOf(task) === "unknown")) return "indeterminate";
  return undefined;
}

/** The newest progress a worker reported. */
export interface ProgressView {
  readonly message: string;
  readonly percent?: number;
  readonly at: number;
  readonly eventId: string;
}

export interface TaskView extends TaskSnapshot {
  readonly terminalDelivery: TerminalDelivery;
  readonly deliveryEvidence: DeliveryEvidence;
  readonly outcome: Outcome;
  readonly attention?: Attention;
  readonly progress?: ProgressView;
  /** What the worker's Pi did with this task's cancel (origin side, once reported). */
  readonly cancelOutcome?: CancelOutcome;
  /** Answers and results their author corrected or withdrew: event id → the correction's event id. */
  readonly superseded: Readonly<Record<string, string>>;
  /** The other party as the trust gate knows it: its key, fingerprint and peer name, or unverified. */
  readonly peer?: Signer;
  /** Origin side, while the task is active: what the worker's model is doing, as it last reported (activity.ts). */
  readonly activity?: WorkerActivity;
  /** Origin side: taken back from the session history after a restart, its worker has yet to confirm it holds it (resume.ts). */
  readonly resuming?: true;
}

/** Where an outbox envelope stands at the relay. */
export function relayState(store: CoreStore, envelopeId: string | undefined): "accepted" | "pending" | "blocked" | "not_applicable" {
  if (envelopeId === undefined) return "not_applicable";
  if (store.getQuarantine(envelopeId) !== undefined) return "blocked";
  return store.getOutbox(envelopeId)?.state === "accepted" ? "accepted" : "pending";
}

export function terminalDelivery(store: CoreStore, task: TaskSnapshot): TerminalDelivery {
  const reservation = store.getOperation(task.taskId, terminalIntentOf(task));
  const envelopeId = reservation?.envelopeIds[0];
  if (reservation === undefined || envelopeId === undefined) return { state: "not_submitted" };
  const base = { intentId: reservation.logicalId, intentType: reservation.logicalType, envelopeId, origin: task.origin };
  const quarantined = store.getQuarantine(envelopeId);
  if (quarantined !== undefined) {
    return {
      state: "delivery_blocked",
      ...base,
      blockedAt: quarantined.quarantinedAt,
      error: { code: quarantined.errorCode, retryable: false, details: quarantined.details },
    };
  }
  return { state: relayState(store, envelopeId) === "accepted" ? "accepted" : "pending", ...base };
}

const INSERTED_STAGES: ReadonlySet<string> = new Set(["pi_inserted", "wake_requested", "wake_accepted"]);
const NOTHING: DeliveryEvidence = {
  relayAcceptance: "not_applicable",
  receiverReceipt: "not_confirmed",
  piInsertion: "not_confirmed",
  wakeAcceptance: "not_confirmed",
  modelExecution: "not_evidenced",
};

export function deliveryEvidence(store: CoreStore, task: TaskSnapshot): DeliveryEvidence {
  const assignment = latestAssignment(task.events);
  if (assignment === undefined) return NOTHING;
  if (task.role === "worker") {
    return {
      ...NOTHING,
      receiverReceipt: "confirmed",
      piInsertion: hasEvidence(store, assignment.eventId, "inserted") ? "confirmed" : "not_confirmed",
      wakeAcceptance: hasEvidence(store, assignment.eventId, "woken") ? "confirmed" : "not_confirmed",
    };
  }
  const receipts = task.events
    .filter((event) => event.type === "task.delivery_receipt")
    .map((event) => event.payload as unknown as DeliveryReceiptPayload)
    .filter((receipt) => receipt.eventId === assignment.eventId);
  const confirmed = receipts.filter((receipt) => receipt.state === "confirmed").map((receipt) => receipt.stage);
  const inserted = confirmed.some((stage) => INSERTED_STAGES.has(stage));
  const blocked = receipts.some((receipt) => receipt.stage === "pi_insertion" && receipt.state === "blocked");
  return {
    relayAcceptance: relayState(store, store.getOperation(task.taskId, OPERATION.assignment(assignment.eventId))?.envelopeIds[0]),
    receiverReceipt: confirmed.length > 0 ? "confirmed" : "not_confirmed",
    // A later confirmation wins over an earlier blocked insertion.
    piInsertion: inserted ? "confirmed" : blocked ? "blocked" : "not_confirmed",
    wakeAcceptance: confirmed.includes("wake_accepted") ? "confirmed" : confirmed.includes("wake_requested") ? "pending" : "not_confirmed",
    modelExecution: "not_evidenced",
  };
}

function withAttention(attention: Attention | undefined): { attention?: Attention } {
  return attention === undefined ? {} : { attention };
}

function latestOf(task: TaskSnapshot, type: TaskEvent["type"]): TaskEvent | undefined {
  for (let index = task.events.length - 1; index >= 0; index -= 1) if (task.events[index]!.type === type) return task.events[index];
  return undefined;
}

function progressOf(task: TaskSnapshot): ProgressView | undefined {
  const event = latestOf(task, "task.progress");
  if (event === undefined) return undefined;
  const percent = event.payload.percent;
  return {
    message: String(event.payload.message),
    ...(typeof percent === "number" ? { percent } : {}),
    at: event.occurredAt,
    eventId: event.eventId,
  };
}

export function viewTask(store: CoreStore, task: TaskSnapshot, trust: TrustState): TaskView {
  const peer = peerOfTask(store, trust, task.taskId, task.role);
  const meta = store.getTaskMeta(task.taskId);
  const activity = task.status === "active" ? meta?.activity : undefined;
  const progress = progressOf(task);
  const outcome = latestOf(task, "task.cancel_outcome")?.payload.outcome as CancelOutcome | undefined;
  return {
    ...task,
    terminalDelivery: terminalDelivery(store, task),
    deliveryEvidence: deliveryEvidence(store, task),
    ...(peer === undefined ? {} : { peer }),
    outcome: outcomeOf(task),
    superseded: supersededBy(task.events),
    ...withAttention(attentionOf(task, meta)),
    ...(activity === undefined ? {} : { activity }),
    ...(meta?.resuming === true ? { resuming: true as const } : {}),
    ...(progress === undefined ? {} : { progress }),
    ...(outcome === undefined ? {} : { cancelOutcome: outcome }),
  };
}
