/**
 * The core's bookkeeping, typed in one place: what it keeps in the store beside tasks and events.
 *
 * - outbox purposes: what an envelope is for;
 * - inbox stages and data: how far a relay delivery got, and what intake learned from it;
 * - operation keys: the idempotency key of each operation of a task (one reservation per key);
 * - cooldown keys: capacity cooldowns per envelope and per ACK.
 * The store treats all of these as opaque; only the core reads and writes them.
 */
import { latestAssignment } from "../protocol/events.ts";
import type { ActivityPayload, ReceiptStage, ReceiptState, TaskEndpoint } from "../protocol/schemas.ts";
import type { Bookkeeping, DeliveryRow, OperationReservation, OutboxEntry, TaskStore } from "../store/task-store.ts";

/** What an outbox envelope is for. */
export type OutboxPurpose = "assignment" | "intent" | "terminal" | "fanout" | "receipt" | "refusal";

/**
 * How far a tracked relay delivery got:
 * - `tracked`: stored as received, not classified yet;
 * - `recorded`: an assignment or canonical event recorded, waiting for presentation;
 * - `presented`: presented or archived, waiting for its receipts to ship;
 * - `canonicalized`: a worker's intent canonicalized, waiting for its fan-out;
 * - `rejected`: invalid; reported and ACKed without processing.
 */
export type InboxStage = "tracked" | "recorded" | "presented" | "canonicalized" | "rejected";

/** What intake learned from a delivery (by kind). */
export type InboxData =
  | { readonly kind: "unclassified" }
  | {
      readonly kind: "assignment" | "canonical_event";
      readonly taskId: string;
      readonly eventId: string;
      /** Model-visible here (insert and wake) rather than archived. */
      readonly visible: boolean;
      /** Envelopes that must be accepted (or, for receipts, blocked for good) before the ACK. */
      readonly requires: readonly string[];
    }
  | { readonly kind: "intent"; readonly taskId: string; readonly eventId: string; readonly requires: readonly string[] }
  /** A proof request or answer (proofs.ts): nothing to present or canonicalize. */
  | { readonly kind: "hello" }
  /** A worker's activity report (activity.ts): kept as the task's state; nothing to present. */
  | { readonly kind: "activity" }
  | { readonly kind: "rejected"; readonly error: { readonly code: string; readonly message: string } };

/** The data of a delivery that names a recorded event (assignment, canonical event or intent). */
export type RecordedData = Extract<InboxData, { readonly eventId: string }>;

export const UNCLASSIFIED: InboxData = { kind: "unclassified" };

/** Envelopes a delivery waits for before its ACK. */
export function requiredOf(data: InboxData): readonly string[] {
  return "requires" in data ? data.requires : [];
}

/** The idempotency key of one operation of a task. */
export type OperationKey =
  | `assignment:${string}`
  | `intent:${string}`
  | `receipt:${string}:${ReceiptStage}:${ReceiptState}`
  | "terminal_intent"
  | `terminal_intent:${number}`
  | "origin_terminal"
  | "origin_cancellation"
  | "parent_acknowledgment"
  | `cancel_outcome:${string}`
  | "grant_request";

export const OPERATION = {
  /** The envelope carrying an assignment event (`task.created` / `task.reassigned`). */
  assignment: (eventId: string): OperationKey => `assignment:${eventId}`,
  /** The canonicalization of one worker intent at the origin. */
  intent: (intentId: string): OperationKey => `intent:${intentId}`,
  /** One delivery receipt (per event, stage and state). */
  receipt: (eventId: string, stage: ReceiptStage, state: ReceiptState): OperationKey => `receipt:${eventId}:${stage}:${state}`,
  /** The worker's one terminal intent (of the first round; see `terminalIntentOf`). */
  terminalIntent: "terminal_intent",
  /** The origin's own terminal event. */
  originTerminal: "origin_terminal",
  originCancellation: "origin_cancellation",
  parentAcknowledgment: "parent_acknowledgment",
  /** The worker's one report of what its Pi did with a cancel event. */
  cancelOutcome: (eventId: string): OperationKey => `cancel_outcome:${eventId}`,
  /** The worker's one request for a wider grant (grant-requests.ts). */
  grantRequest: "grant_request",
} as const;

/** The envelope that carries the task's latest assignment (its creation or its latest reassignment), if one was made. */
export function latestAssignmentEnvelope(store: CoreStore, taskId: string): string | undefined {
  const assignment = latestAssignment(store.getEvents(taskId));
  return assignment === undefined ? undefined : store.getOperation(taskId, OPERATION.assignment(assignment.eventId))?.envelopeIds[0];
}

/** The worker's one terminal intent of the task's current round (a revision starts a round). */
export function terminalIntentOf(task: { readonly revision?: number }): OperationKey {
  return task.revision === undefined ? OPERATION.terminalIntent : `terminal_intent:${task.revision}`;
}

/**
 * What the core keeps per task beside its record:
 * - the keys bound by the trust gate: the origin's at assignment, the worker's at its first signed
 *   intent (reset by a reassignment); `unverified`: unsigned mail was accepted for it;
 * - `peerSession`: the other party's session name, as its verified mail claimed it (to find its
 *   new endpoint after a relay restart);
 * - `reconnectingSince`: after a relay restart, since when this task waits to find its peer again;
 * - `lostSince` / `orphanedAt` (origin): since when its worker is not registered, and when the
 *   task was declared orphaned (a reassignment clears both);
 * - `activity` (origin): the worker's newest activity report and when it arrived (activity.ts);
 * - `liveness` (origin): when the worker last signed genuine mail, and its smallest delay (liveness.ts).
 */
export interface TaskMeta {
  readonly originKey?: string;
  readonly workerKey?: string;
  /** A reassignment to the lost worker's successor: the key that successor must prove (proofs.ts). */
  readonly expectedWorkerKey?: string;
  /** A reconnecting task's peer, looked up by name: an endpoint that has yet to prove its key. */
  readonly candidate?: TaskEndpoint;
  readonly unverified?: true;
  readonly peerSession?: string;
  /**
   * The signing time (the peer's clock, ms) of the newest signed fact that placed the peer at its
   * current endpoint — the assignment, a resume question, verified mail from a moved peer: older
   * signed facts, however genuine (a relay replaying them), move nothing (reconnect.ts, resume.ts).
   */
  readonly peerSince?: number;
  readonly reconnectingSince?: number;
  /** A task a restarted origin took back from its session history: its worker has yet to confirm it (resume.ts). */
  readonly resuming?: true;
  readonly lostSince?: number;
  readonly orphanedAt?: number;
  readonly activity?: WorkerActivity;
  readonly liveness?: WorkerLiveness;
  /** A workflow's step (origin): its outcome is shown without a wake; the workflow wakes the model once. */
  readonly quietResult?: true;
}

/**
 * What the origin knows of its worker's life from signed mail (liveness.ts): the newest signing time
 * of its genuine mail (its clock, ms) and the smallest delay seen (arrival on this side's clock −
 * signing), which maps one clock onto the other.
 */
export interface WorkerLiveness {
  readonly signedAt: number;
  readonly minDelayMs: number;
}

/** A worker's newest activity report as the origin keeps it, with when it arrived (clock, ms). */
export interface WorkerActivity extends Omit<ActivityPayload, "intentId"> {
  readonly heardAt: number;
}

export interface CoreBook extends Bookkeeping {
  readonly purpose: OutboxPurpose;
  readonly stage: InboxStage;
  readonly data: InboxData;
  readonly operation: OperationKey;
  readonly meta: TaskMeta;
}

export type CoreStore = TaskStore<CoreBook>;
export type CoreDelivery = DeliveryRow<InboxStage, InboxData>;
export type CoreOutboxEntry = OutboxEntry<OutboxPurpose>;
export type CoreReservation = OperationReservation<OperationKey>;

/** Capacity cooldown keys (per envelope, per ACK). */
export const COOLDOWN = {
  envelope: (envelopeId: string) => `envelope:${envelopeId}`,
  ack: (envelopeId: string) => `ack:${envelopeId}`,
} as const;
