/**
 * The RAM TaskStore: everything one endpoint lifetime knows about its tasks, kept as immutable
 * encoded rows with indexes, synchronous transactions with full rollback, post-commit change
 * notification and lower-only bounds (16,384 records / 32 MiB per endpoint; see rows.ts for what
 * the byte bound counts).
 *
 * The store is generic storage: what the core keeps per row (outbox purposes, delivery stages and
 * data, operation keys) is the core's typed `Bookkeeping`, opaque here; the store holds no core
 * policy. Envelopes are stored once, as the exact text that goes on the wire, beside the small
 * rows that track them.
 *
 * There is no persistence: a new lifetime starts empty. Values returned are deep-frozen and
 * shared between reads; snapshots are fresh top-level objects around those frozen values.
 */
import { endpointKey } from "../protocol/endpoint.ts";
import { TaskError } from "../protocol/errors.ts";
import { maxCursorDigits, maxStoreEncodedBytes, maxStoreRecords } from "../protocol/limits.ts";
import type { EnvelopeKind, RelayedEnvelope, TaskEndpoint, TaskEvent, TaskIntent, TaskRecord, TaskStatus } from "../protocol/schemas.ts";
import { emptyIndexes, INDEXED_TABLES, type IndexSnapshot, indexRow, STORE_TABLES, type StoreTable, snapshotIndexes } from "./indexes.ts";
import { createRowEngine, invariant, type RowStats } from "./rows.ts";

export type { IndexSnapshot } from "./indexes.ts";

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

export type TaskRole = "origin" | "target";

/** The fields of a task record that may change after it was created. */
export type TaskRecordPatch = Partial<Pick<TaskRecord, "origin" | "target" | "lineage" | "generation">>;

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
  /** Lower the record bound (never above 16,384). */
  readonly maxRecords?: number;
  /** Lower the byte bound (never above 32 MiB). */
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

const PERSISTENCE_OPTIONS = new Set([
  "path",
  "file",
  "filename",
  "dir",
  "directory",
  "database",
  "db",
  "persist",
  "persistence",
  "sqlite",
  "storage",
]);
const KNOWN_OPTIONS = new Set(["maxRecords", "maxEncodedBytes"]);
const CURSOR_PATTERN = new RegExp(`^(0|[1-9][0-9]{0,${maxCursorDigits - 1}})$`);
const CHECKPOINT_KEY = "relay";

function lowerOnlyBound(name: string, value: unknown, ceiling: number): number {
  if (value === undefined) return ceiling;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1 || value > ceiling) {
    throw new TaskError("INVALID_CONFIGURATION", {
      message: `${name} must be an integer from 1 to ${ceiling} (bounds can only be lowered)`,
      details: { option: name, value, maximum: ceiling },
    });
  }
  return value;
}

function resolveOptions(options: TaskStoreOptions | undefined): { maxRecords: number; maxEncodedBytes: number } {
  const given = (options ?? {}) as Record<string, unknown>;
  for (const name of Object.keys(given)) {
    if (PERSISTENCE_OPTIONS.has(name)) throw new TaskError("PERSISTENCE_UNSUPPORTED", { details: { option: name } });
    if (!KNOWN_OPTIONS.has(name))
      throw new TaskError("INVALID_CONFIGURATION", { message: `unknown TaskStore option ${name}`, details: { option: name } });
  }
  return {
    maxRecords: lowerOnlyBound("maxRecords", given.maxRecords, maxStoreRecords),
    maxEncodedBytes: lowerOnlyBound("maxEncodedBytes", given.maxEncodedBytes, maxStoreEncodedBytes),
  };
}

function assertCursor(cursor: string): bigint {
  if (typeof cursor !== "string" || !CURSOR_PATTERN.test(cursor)) throw new TaskError("INVALID_CURSOR", { details: { cursor } });
  return BigInt(cursor);
}

function operationKey(taskId: string, operation: string): string {
  return `${taskId}\u0000${operation}`;
}

export function createTaskStore<B extends Bookkeeping = Bookkeeping>(options?: TaskStoreOptions): TaskStore<B> {
  type Entry = OutboxEntry<B["purpose"]>;
  type Quarantined = QuarantineEntry<B["purpose"]>;
  type Reservation = OperationReservation<B["operation"]>;
  type Delivery = DeliveryRow<B["stage"], B["data"]>;

  const limits = resolveOptions(options);
  let indexes = emptyIndexes();
  const rows = createRowEngine<StoreTable>({
    tables: STORE_TABLES,
    indexed: INDEXED_TABLES,
    ...limits,
    apply: (table, key, previous, next) => indexRow(indexes, table, key, previous, next),
  });

  // Counters live outside rows; their changes are undone through the row engine's log.
  let outboxSeq = 0;
  let intakeOrder = 0;
  let rotationStamp = 0;
  function bump(read: () => number, set: (value: number) => void): number {
    const previous = read();
    set(previous + 1);
    rows.logUndo(() => set(previous));
    return previous + 1;
  }

  const mutate = <T>(fn: () => T): T => rows.transaction(fn);

  function requireTask(taskId: string): StoredTask {
    const stored = rows.read<StoredTask>("task", taskId);
    if (stored === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId } });
    return stored;
  }

  function requireOutbox(envelopeId: string): Entry {
    const entry = rows.read<Entry>("outbox", envelopeId);
    if (entry === undefined) throw new TaskError("INVALID_ENVELOPE", { message: `no outbox entry ${envelopeId}`, details: { envelopeId } });
    return entry;
  }

  const readCheckpointRow = () => rows.peek<{ highWater: string }>("checkpoint", CHECKPOINT_KEY) ?? { highWater: "0" };

  function eventsOf(taskId: string): TaskEvent[] {
    return (indexes.eventsByTask.get(taskId) ?? []).map((item) => rows.read<TaskEvent>("event", item.eventId)!);
  }

  function snapshot(taskId: string): TaskSnapshot | undefined {
    const stored = rows.read<StoredTask>("task", taskId);
    if (stored === undefined) return undefined;
    return { ...stored.record, role: stored.role, events: Object.freeze(eventsOf(taskId)) };
  }

  function dropRotationIfIdle(targetKey: string): void {
    if (!indexes.pendingByTarget.has(targetKey) && rows.has("rotation", targetKey)) rows.remove("rotation", targetKey);
  }

  function nextOrder(): number {
    return bump(
      () => intakeOrder,
      (value) => (intakeOrder = value),
    );
  }

  const store: TaskStore<B> = {
    transaction: (fn) => rows.transaction(fn),
    onChange: (listener) => rows.onCommit(listener),

    clear() {
      if (rows.inTransaction()) throw new TaskError("INVALID_TRANSACTION", { message: "clear() is not allowed inside a transaction" });
      indexes = emptyIndexes();
      outboxSeq = 0;
      intakeOrder = 0;
      rotationStamp = 0;
      rows.clear();
    },

    stats() {
      return {
        ...rows.stats(),
        tasks: rows.size("task"),
        activeTasks: indexes.activeTasks.size,
        events: rows.size("event"),
        pendingOutbox: indexes.pendingTargetOf.size,
        quarantined: rows.size("quarantine"),
        pendingDeliveries: indexes.deliveriesByCursor.length,
        localPresentations: indexes.localQueue.length,
      };
    },

    // -- tasks and events ------------------------------------------------------------------------

    putTask(record, role) {
      return mutate(() => {
        if (rows.has("task", record.taskId)) return false;
        rows.write("task", record.taskId, { record, role } satisfies StoredTask);
        return true;
      });
    },
    getStoredTask: (taskId) => rows.read<StoredTask>("task", taskId),
    setStatus(taskId, status) {
      mutate(() => {
        const stored = requireTask(taskId);
        if (stored.record.status !== status) rows.write("task", taskId, { ...stored, record: { ...stored.record, status } });
      });
    },
    updateTask(taskId, patch) {
      mutate(() => {
        const stored = requireTask(taskId);
        rows.write("task", taskId, { ...stored, record: { ...stored.record, ...patch } });
      });
    },
    appendEvent(event) {
      return mutate(() => {
        // Only its existence: reading the task would parse the row just written.
        if (!rows.has("task", event.taskId)) throw new TaskError("UNKNOWN_TASK", { details: { taskId: event.taskId } });
        if (rows.has("event", event.eventId)) return false;
        rows.write("event", event.eventId, event);
        return true;
      });
    },
    getEvent: (eventId) => rows.read<TaskEvent>("event", eventId),
    getEvents: (taskId) => Object.freeze(eventsOf(taskId)),
    eventCount: (taskId) => indexes.eventsByTask.get(taskId)?.length ?? 0,
    getTask: (taskId) => snapshot(taskId),
    listTasks() {
      return [...rows.keys("task")]
        .map((taskId) => snapshot(taskId)!)
        .sort((a, b) => a.createdAt - b.createdAt || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
    },
    activeTaskIds(role) {
      if (role === "target") return [...indexes.activeWorking];
      if (role === "origin") return [...indexes.activeTasks].filter((taskId) => !indexes.activeWorking.has(taskId));
      return [...indexes.activeTasks];
    },
    hasActiveTasks: () => indexes.activeTasks.size > 0,

    // -- outbox ----------------------------------------------------------------------------------

    putOutbox(entry) {
      return mutate(() => {
        if (rows.has("outbox", entry.envelopeId) || rows.has("quarantine", entry.envelopeId)) return false;
        const seq = bump(
          () => outboxSeq,
          (value) => (outboxSeq = value),
        );
        const { envelopeText, awaiting, ...tracking } = entry;
        rows.writeText("envelope", entry.envelopeId, envelopeText);
        rows.write("outbox", entry.envelopeId, {
          ...tracking,
          targetKey: endpointKey(entry.target),
          seq,
          state: "pending",
          attempted: false,
          ...(awaiting === true ? { awaiting: true } : {}),
        } satisfies Entry);
        return true;
      });
    },
    getOutbox: (envelopeId) => rows.read<Entry>("outbox", envelopeId),
    getEnvelope: (envelopeId) => rows.read<RelayedEnvelope>("envelope", envelopeId),
    envelopeText: (envelopeId) => rows.text("envelope", envelopeId),
    pendingOutboxCount: () => indexes.pendingTargetOf.size,
    pendingOutboxAhead(envelopeId) {
      const targetKey = indexes.pendingTargetOf.get(envelopeId);
      if (targetKey === undefined) return [];
      const ahead: string[] = [];
      for (const item of indexes.pendingByTarget.get(targetKey) ?? []) {
        if (item.envelopeId === envelopeId) break;
        ahead.push(item.envelopeId);
      }
      return ahead;
    },
    pendingOutboxFor(targetKey) {
      return (indexes.pendingByTarget.get(targetKey) ?? []).map((item) => rows.read<Entry>("outbox", item.envelopeId)!);
    },
    retryHeads() {
      const heads: { entry: Entry; stamp: number }[] = [];
      for (const [targetKey, list] of indexes.pendingByTarget) {
        const head = list[0];
        if (head !== undefined)
          heads.push({ entry: rows.read<Entry>("outbox", head.envelopeId)!, stamp: indexes.rotation.get(targetKey) ?? 0 });
      }
      heads.sort((a, b) => a.stamp - b.stamp || a.entry.seq - b.entry.seq);
      return heads.map((item) => item.entry);
    },
    rotateRetry(targetKey) {
      mutate(() => {
        const stamp = bump(
          () => rotationStamp,
          (value) => (rotationStamp = value),
        );
        rows.write("rotation", targetKey, { stamp });
      });
    },
    markOutboxAttempted(envelopeId) {
      mutate(() => {
        const entry = requireOutbox(envelopeId);
        if (!entry.attempted) rows.write("outbox", envelopeId, { ...entry, attempted: true });
      });
    },
    outboxOf(taskId) {
      const entries: Entry[] = [];
      for (const envelopeId of rows.keys("outbox")) {
        const entry = rows.peek<Entry>("outbox", envelopeId)!;
        if (entry.taskId === taskId) entries.push(entry);
      }
      return entries.sort((a, b) => a.seq - b.seq);
    },
    reencodeOutbox(envelopeId, target, envelopeText, options = {}) {
      mutate(() => {
        const { acceptance: _dropped, awaiting: _released, ...entry } = requireOutbox(envelopeId);
        const targetKey = endpointKey(target);
        rows.writeText("envelope", envelopeId, envelopeText);
        rows.write("outbox", envelopeId, {
          ...entry,
          target,
          targetKey,
          state: "pending",
          attempted: false,
          ...(options.awaiting === true ? { awaiting: true } : {}),
        } satisfies Entry);
        dropRotationIfIdle(entry.targetKey);
      });
    },
    markOutboxAccepted(envelopeId, acceptance) {
      mutate(() => {
        const entry = requireOutbox(envelopeId);
        if (entry.state === "accepted") return;
        rows.write("outbox", envelopeId, { ...entry, state: "accepted", attempted: true, acceptance });
        dropRotationIfIdle(entry.targetKey);
      });
    },
    quarantineOutbox(envelopeId, reason) {
      return mutate(() => {
        const entry = requireOutbox(envelopeId);
        const { state, acceptance: _acceptance, ...rest } = entry;
        rows.remove("outbox", envelopeId);
        rows.write("quarantine", envelopeId, { ...rest, priorState: state, ...reason } satisfies Quarantined);
        dropRotationIfIdle(entry.targetKey);
        return rows.peek<Quarantined>("quarantine", envelopeId)!;
      });
    },
    getQuarantine: (envelopeId) => rows.read<Quarantined>("quarantine", envelopeId),
    listQuarantine: () => [...rows.keys("quarantine")].map((key) => rows.read<Quarantined>("quarantine", key)!),
    discardUnsentOperation(envelopeId) {
      return mutate(() => {
        const entry = rows.read<Entry>("outbox", envelopeId);
        if (entry === undefined || entry.state !== "pending" || entry.attempted) return false;
        rows.remove("outbox", envelopeId);
        rows.remove("envelope", envelopeId);
        const opKey = indexes.operationByEnvelope.get(envelopeId);
        if (opKey !== undefined) rows.remove("operation", opKey);
        dropRotationIfIdle(entry.targetKey);
        return true;
      });
    },

    discardTask(taskId) {
      return mutate(() => {
        if (!rows.has("task", taskId)) return false;
        for (const eventId of (indexes.eventsByTask.get(taskId) ?? []).map((item) => item.eventId)) {
          rows.remove("event", eventId);
          rows.remove("evidence", eventId);
          rows.remove("local", eventId);
        }
        for (const table of ["outbox", "quarantine"] as const) {
          for (const envelopeId of [...rows.keys(table)]) {
            const entry = rows.peek<{ taskId: string; targetKey: string }>(table, envelopeId)!;
            if (entry.taskId !== taskId) continue;
            rows.remove(table, envelopeId);
            rows.remove("envelope", envelopeId);
            dropRotationIfIdle(entry.targetKey);
          }
        }
        const prefix = operationKey(taskId, "");
        for (const key of [...rows.keys("operation")]) if (key.startsWith(prefix)) rows.remove("operation", key);
        for (const intentId of [...rows.keys("intent")])
          if (rows.peek<StoredIntent>("intent", intentId)!.intent.taskId === taskId) rows.remove("intent", intentId);
        rows.remove("meta", taskId);
        rows.remove("task", taskId);
        return true;
      });
    },

    // -- cooldowns -------------------------------------------------------------------------------

    setCooldown: (key, cooldown) => rows.write("cooldown", key, cooldown),
    getCooldown: (key) => rows.read<Cooldown>("cooldown", key),
    clearCooldown(key) {
      rows.remove("cooldown", key);
    },

    // -- operations and intents ------------------------------------------------------------------

    reserveOperation(taskId, operation, create) {
      return mutate(() => {
        const key = operationKey(taskId, operation);
        const existing = rows.read<Reservation>("operation", key);
        if (existing !== undefined) return { created: false, record: existing };
        rows.write("operation", key, { taskId, operation, ...create() } satisfies Reservation);
        return { created: true, record: rows.peek<Reservation>("operation", key)! };
      });
    },
    getOperation: (taskId, operation) => rows.read<Reservation>("operation", operationKey(taskId, operation)),
    putIntent(intent, envelopeId) {
      return mutate(() => {
        if (rows.has("intent", intent.intentId)) return false;
        rows.write("intent", intent.intentId, { intent, envelopeId } satisfies StoredIntent);
        return true;
      });
    },
    getIntent: (intentId) => rows.read<StoredIntent>("intent", intentId),

    // -- inbound deliveries ------------------------------------------------------------------------

    trackDelivery(delivery) {
      return mutate(() => {
        const cursor = assertCursor(delivery.cursor);
        const { highWater } = readCheckpointRow();
        if (rows.has("delivery", delivery.envelopeId)) {
          // The same envelope again: never a second delivery. Move past a higher cursor.
          if (cursor > BigInt(highWater)) rows.write("checkpoint", CHECKPOINT_KEY, { highWater: delivery.cursor });
          return "duplicate";
        }
        if (cursor <= BigInt(highWater)) {
          throw new TaskError("INVALID_CURSOR", {
            message: `cursor ${delivery.cursor} is not after the highest tracked cursor ${highWater}`,
            details: { cursor: delivery.cursor, highWater, envelopeId: delivery.envelopeId },
          });
        }
        rows.write("inbound", delivery.envelopeId, delivery.envelope);
        rows.write("delivery", delivery.envelopeId, {
          envelopeId: delivery.envelopeId,
          cursor: delivery.cursor,
          prevCursor: highWater,
          receivedAt: delivery.receivedAt,
          order: nextOrder(),
          stage: delivery.stage,
          ackRequested: false,
          data: delivery.data,
        } satisfies Delivery);
        rows.write("checkpoint", CHECKPOINT_KEY, { highWater: delivery.cursor });
        return "tracked";
      });
    },
    getDelivery: (envelopeId) => rows.read<Delivery>("delivery", envelopeId),
    deliveryEnvelope: (envelopeId) => rows.read<unknown>("inbound", envelopeId),
    deliveries: () => indexes.deliveriesByCursor.map((item) => rows.read<Delivery>("delivery", item.envelopeId)!),
    updateDelivery(envelopeId, patch) {
      return mutate(() => {
        const row = rows.read<Delivery>("delivery", envelopeId);
        if (row === undefined)
          throw new TaskError("INVALID_DELIVERY", { message: `no tracked delivery ${envelopeId}`, details: { envelopeId } });
        rows.write("delivery", envelopeId, {
          ...row,
          ...(patch.stage === undefined ? {} : { stage: patch.stage }),
          ...(patch.ackRequested === undefined ? {} : { ackRequested: patch.ackRequested }),
          ...(patch.data === undefined ? {} : { data: patch.data }),
        });
        return rows.peek<Delivery>("delivery", envelopeId)!;
      });
    },
    acknowledgeDelivery(envelopeId) {
      return mutate(() => {
        const removed = rows.remove("delivery", envelopeId);
        if (removed) rows.remove("inbound", envelopeId);
        return removed;
      });
    },
    resetInbox() {
      mutate(() => {
        for (const envelopeId of [...rows.keys("delivery")]) {
          rows.remove("delivery", envelopeId);
          rows.remove("inbound", envelopeId);
        }
        rows.remove("checkpoint", CHECKPOINT_KEY);
      });
    },
    pendingDeliveryCount: () => indexes.deliveriesByCursor.length,
    checkpoint() {
      const { highWater } = readCheckpointRow();
      const oldest = indexes.deliveriesByCursor[0];
      if (oldest === undefined) return { frontier: highWater, highWater };
      const frontier = rows.peek<Delivery>("delivery", oldest.envelopeId)!.prevCursor;
      invariant(BigInt(frontier) < oldest.cursor, "the ACK frontier stays below the oldest unacknowledged delivery", {
        frontier,
        oldest: String(oldest.cursor),
      });
      return { frontier, highWater };
    },

    // -- local presentation --------------------------------------------------------------------------

    enqueueLocalPresentation(event) {
      return mutate(() => {
        if (!rows.has("local", event.eventId)) {
          if (!rows.has("event", event.eventId))
            throw new TaskError("INVALID_EVENT", { message: `event ${event.eventId} is not stored`, details: { eventId: event.eventId } });
          rows.write("local", event.eventId, { order: nextOrder(), taskId: event.taskId });
        }
        const row = rows.peek<{ order: number; taskId: string }>("local", event.eventId)!;
        return { eventId: event.eventId, taskId: row.taskId, order: row.order, event: rows.read<TaskEvent>("event", event.eventId)! };
      });
    },
    localPresentations() {
      return indexes.localQueue.map((item) => {
        const row = rows.read<{ order: number; taskId: string }>("local", item.eventId)!;
        return { eventId: item.eventId, taskId: row.taskId, order: row.order, event: rows.read<TaskEvent>("event", item.eventId)! };
      });
    },
    completeLocalPresentation: (eventId) => rows.remove("local", eventId),

    // -- evidence ----------------------------------------------------------------------------------

    getTaskMeta: (taskId) => rows.read<B["meta"]>("meta", taskId),
    setTaskMeta(taskId, meta) {
      rows.write("meta", taskId, meta);
    },
    getEvidence: (eventId) => rows.read<Evidence>("evidence", eventId),
    recordEvidence(eventId, patch) {
      return mutate(() => {
        const current = rows.read<Evidence>("evidence", eventId) ?? {};
        rows.write("evidence", eventId, { ...current, ...patch });
        return rows.peek<Evidence>("evidence", eventId)!;
      });
    },

    debugIndexes() {
      const recomputed = emptyIndexes();
      for (const table of INDEXED_TABLES) {
        for (const key of rows.keys(table)) indexRow(recomputed, table, key, undefined, rows.peek(table, key));
      }
      return { actual: snapshotIndexes(indexes), recomputed: snapshotIndexes(recomputed) };
    },
  };

  return store;
}
