/**
 * The TaskStore's contract, as types only: what the core keeps per row (`Bookkeeping`), the row
 * shapes the store hands out, its options and stats, the `TaskStore` interface itself and the
 * canonical form of its indexes (`IndexSnapshot`, for invariant tests).
 *
 * It lives apart from task-store.ts (which re-exports it and wires the parts) so every part can
 * name these types without importing the factory that composes it: this file imports no part.
 */
import type { EnvelopeKind, RelayedEnvelope, TaskEndpoint, TaskEvent, TaskIntent, TaskRecord, TaskStatus } from "../protocol/schemas.ts";
import type { RowStats } from "./rows.ts";

// ---------------------------------------------------------------------------------------------
// What the core keeps per row (typed by the core, opaque to the store)
// ---------------------------------------------------------------------------------------------

export interface Bookkeeping {
  /** What an outbox envelope is for. */
  readonly purpose: string;
  /** A tracked delivery's processing stage. */
  readonly stage: string;
  /** A tracked delivery's core data. */
  readonly data: unknown;
  /** The key of an idempotent operation of a task. */
  readonly operation: string;
  /** What the core keeps per task beside its record (e.g. the keys bound to it). */
  readonly meta: unknown;
}

// ---------------------------------------------------------------------------------------------
// Row shapes
// ---------------------------------------------------------------------------------------------

export type TaskRole = "origin" | "worker";

/** The fields of a task record that may change after it was created. */
export type TaskRecordPatch = Partial<
  Pick<TaskRecord, "origin" | "target" | "lineage" | "generation" | "revision" | "expiresAt" | "grant">
>;

export interface StoredTask {
  readonly record: TaskRecord;
  readonly role: TaskRole;
}

/** A task as this endpoint knows it: its record, its role and its events in sequence order. */
export interface TaskSnapshot extends TaskRecord {
  readonly role: TaskRole;
  readonly events: readonly TaskEvent[];
}

export type OutboxState = "pending" | "accepted";

export interface OutboxAcceptance {
  readonly acceptanceId: string;
  readonly acceptedAt: number;
  readonly duplicate: boolean;
}

/** An outbox envelope's tracking row; the envelope itself is stored once as its wire text. */
export interface OutboxEntry<Purpose extends string = string> {
  readonly envelopeId: string;
  readonly taskId: string;
  readonly target: TaskEndpoint;
  readonly targetKey: string;
  readonly kind: EnvelopeKind;
  readonly purpose: Purpose;
  /** Creation order, global and strictly increasing. */
  readonly seq: number;
  readonly state: OutboxState;
  /** True once a request carrying it was admitted: it can no longer be withdrawn. */
  readonly attempted: boolean;
  readonly acceptance?: OutboxAcceptance;
  /** Not sendable yet: it waits for something the core must learn first (its envelope is never sent as stored). */
  readonly awaiting?: true;
}

export interface NewOutboxEntry<Purpose extends string = string> {
  readonly envelopeId: string;
  readonly taskId: string;
  readonly target: TaskEndpoint;
  readonly kind: EnvelopeKind;
  readonly purpose: Purpose;
  /** The envelope's canonical JSON: exactly what every attempt sends (same id, same `createdAt`). */
  readonly envelopeText: string;
  /** Stored to be re-encoded before it may be sent (`reencodeOutbox` releases it). */
  readonly awaiting?: boolean;
}

export interface QuarantineEntry<Purpose extends string = string> extends Omit<OutboxEntry<Purpose>, "state" | "acceptance"> {
  readonly priorState: OutboxState;
  readonly errorCode: string;
  readonly details: Readonly<Record<string, unknown>>;
  readonly quarantinedAt: number;
}

export interface OperationReservation<Operation extends string = string> {
  readonly taskId: string;
  readonly operation: Operation;
  readonly logicalId: string;
  readonly logicalType: string;
  readonly envelopeIds: readonly string[];
  readonly createdAt: number;
}

export interface StoredIntent {
  readonly intent: TaskIntent;
  readonly envelopeId: string;
}

/** A tracked relay delivery; what the relay delivered is kept as its own row (`deliveryEnvelope`). */
export interface DeliveryRow<Stage extends string = string, Data = unknown> {
  readonly envelopeId: string;
  readonly cursor: string;
  /** The cursor tracked just before this one: the frontier while this is the oldest pending. */
  readonly prevCursor: string;
  readonly receivedAt: number;
  /** Intake order shared with local presentation items. */
  readonly order: number;
  /** Processing stage (the core's). */
  readonly stage: Stage;
  /** The ACK is authorised and may be (re)sent by the repair pass. */
  readonly ackRequested: boolean;
  /** The core's data for this delivery. */
  readonly data: Data;
}

export interface LocalPresentation {
  readonly eventId: string;
  readonly taskId: string;
  readonly order: number;
  readonly event: TaskEvent;
}

export interface Checkpoint {
  /** Highest cursor such that every tracked cursor at or below it is acknowledged. */
  readonly frontier: string;
  /** Highest cursor ever tracked; the next receive fetches after it. */
  readonly highWater: string;
}

export type Evidence = Readonly<Record<string, string | number | boolean>>;

export interface Cooldown {
  readonly until: number;
  readonly code: string;
}

export type TrackResult = "tracked" | "duplicate";

export interface TaskStoreOptions {
  /** Lower the record bound (never above `maxStoreRecords`). */
  readonly maxRecords?: number;
  /** Lower the byte bound (never above `maxStoreEncodedBytes`). */
  readonly maxEncodedBytes?: number;
}

export interface TaskStoreStats extends RowStats {
  readonly tasks: number;
  readonly activeTasks: number;
  readonly events: number;
  readonly pendingOutbox: number;
  readonly quarantined: number;
  readonly pendingDeliveries: number;
  readonly localPresentations: number;
}

export interface TaskStore<B extends Bookkeeping = Bookkeeping> {
  /** Runs `fn` atomically. It must be synchronous; on a throw everything it did is undone. */
  transaction<T>(fn: () => T): T;
  /** Called after each commit that changed something, never inside a transaction. */
  onChange(listener: () => void): () => void;
  /** Drops all state (not inside a transaction). */
  clear(): void;
  stats(): TaskStoreStats;

  // tasks and events
  putTask(record: TaskRecord, role: TaskRole): boolean;
  getStoredTask(taskId: string): StoredTask | undefined;
  setStatus(taskId: string, status: TaskStatus): void;
  /** Changes where a task lives: its endpoints, lineage or generation (reassignment, relay restart). */
  updateTask(taskId: string, patch: TaskRecordPatch): void;
  appendEvent(event: TaskEvent): boolean;
  getEvent(eventId: string): TaskEvent | undefined;
  getEvents(taskId: string): readonly TaskEvent[];
  eventCount(taskId: string): number;
  getTask(taskId: string): TaskSnapshot | undefined;
  listTasks(): TaskSnapshot[];
  /** Ids of the active tasks; with `role`, only those this endpoint is the origin or the target of. */
  activeTaskIds(role?: TaskRole): string[];
  hasActiveTasks(): boolean;

  // outbox
  putOutbox(entry: NewOutboxEntry<B["purpose"]>): boolean;
  getOutbox(envelopeId: string): OutboxEntry<B["purpose"]> | undefined;
  /** An outbox (or quarantined) envelope as it travels, parsed: sealed mail stays sealed (open it with `outboxEnvelope` in src/core/outbox.ts). */
  getEnvelope(envelopeId: string): RelayedEnvelope | undefined;
  /** An outbox (or quarantined) envelope's wire text, as stored. */
  envelopeText(envelopeId: string): string | undefined;
  pendingOutboxCount(): number;
  /** Older pending envelopes to the same target, oldest first (empty when it is the head). */
  pendingOutboxAhead(envelopeId: string): string[];
  /** The pending envelopes to one target (by endpoint key), oldest first. */
  pendingOutboxFor(targetKey: string): OutboxEntry<B["purpose"]>[];
  /** Each target's oldest pending envelope, in fair rotation order (least recently rotated first). */
  retryHeads(): OutboxEntry<B["purpose"]>[];
  /** Moves a target to the back of the retry rotation. */
  rotateRetry(targetKey: string): void;
  markOutboxAttempted(envelopeId: string): void;
  markOutboxAccepted(envelopeId: string, acceptance: OutboxAcceptance): void;
  quarantineOutbox(
    envelopeId: string,
    reason: { errorCode: string; details: Record<string, unknown>; quarantinedAt: number },
  ): QuarantineEntry<B["purpose"]>;
  getQuarantine(envelopeId: string): QuarantineEntry<B["purpose"]> | undefined;
  listQuarantine(): QuarantineEntry<B["purpose"]>[];
  /** Withdraws a pending envelope that never reached the wire, and any reservation naming it. */
  discardUnsentOperation(envelopeId: string): boolean;
  /**
   * Forgets a task as if it had never been created — its record, events, meta, evidence, local
   * presentations, intents, reservations and every outbox or quarantined envelope of it (an
   * assignment the relay refused for good: seed 004 says no task exists then). Returns whether it
   * existed.
   */
  discardTask(taskId: string): boolean;
  /** A task's outbox envelopes (pending and accepted), oldest first. */
  outboxOf(taskId: string): OutboxEntry<B["purpose"]>[];
  /**
   * Re-addresses an outbox envelope under the same id (after a relay restart: the new relay never
   * saw the id): its new wire text and target; it is pending and unattempted again.
   */
  reencodeOutbox(envelopeId: string, target: TaskEndpoint, envelopeText: string, options?: { readonly awaiting?: boolean }): void;

  // cooldowns (the key is the caller's)
  setCooldown(key: string, cooldown: Cooldown): void;
  getCooldown(key: string): Cooldown | undefined;
  clearCooldown(key: string): void;

  // idempotent operations and own intents
  reserveOperation(
    taskId: string,
    operation: B["operation"],
    create: () => Omit<OperationReservation<B["operation"]>, "taskId" | "operation">,
  ): { created: boolean; record: OperationReservation<B["operation"]> };
  getOperation(taskId: string, operation: B["operation"]): OperationReservation<B["operation"]> | undefined;
  putIntent(intent: TaskIntent, envelopeId: string): boolean;
  getIntent(intentId: string): StoredIntent | undefined;

  // inbound deliveries and the ACK checkpoint
  trackDelivery(delivery: {
    cursor: string;
    envelopeId: string;
    envelope: unknown;
    receivedAt: number;
    stage: B["stage"];
    data: B["data"];
  }): TrackResult;
  getDelivery(envelopeId: string): DeliveryRow<B["stage"], B["data"]> | undefined;
  /** What the relay delivered for a tracked delivery, parsed. */
  deliveryEnvelope(envelopeId: string): unknown;
  /** Unacknowledged deliveries in cursor order. */
  deliveries(): DeliveryRow<B["stage"], B["data"]>[];
  updateDelivery(
    envelopeId: string,
    patch: { stage?: B["stage"]; ackRequested?: boolean; data?: B["data"] },
  ): DeliveryRow<B["stage"], B["data"]>;
  /** Forgets an acknowledged delivery; the frontier advances over the contiguous acknowledged run. */
  acknowledgeDelivery(envelopeId: string): boolean;
  /** Forgets every tracked delivery and resets the checkpoint to "0" (a new relay's mailbox). */
  resetInbox(): void;
  pendingDeliveryCount(): number;
  checkpoint(): Checkpoint;

  // local presentation queue (origin's own view of canonical events it creates)
  enqueueLocalPresentation(event: TaskEvent): LocalPresentation;
  localPresentations(): LocalPresentation[];
  completeLocalPresentation(eventId: string): boolean;

  // per-task core metadata (opaque to the store)
  getTaskMeta(taskId: string): B["meta"] | undefined;
  setTaskMeta(taskId: string, meta: B["meta"]): void;

  // presentation evidence per event (inserted, woken, archived, …) for this lifetime
  getEvidence(eventId: string): Evidence | undefined;
  recordEvidence(eventId: string, patch: Evidence): Evidence;

  /** Index contents and the same recomputed from rows (for invariant tests). */
  debugIndexes(): { actual: IndexSnapshot; recomputed: IndexSnapshot };
}

// ---------------------------------------------------------------------------------------------
// The indexes' canonical form
// ---------------------------------------------------------------------------------------------

/** Index contents in a canonical form, for checking against a recomputation from rows. */
export interface IndexSnapshot {
  readonly eventsByTask: Record<string, string[]>;
  readonly activeTasks: string[];
  readonly activeWorking: string[];
  readonly pendingByTarget: Record<string, string[]>;
  readonly operationByEnvelope: Record<string, string>;
  readonly deliveriesByCursor: string[];
  readonly localQueue: string[];
  readonly rotation: Record<string, number>;
}
