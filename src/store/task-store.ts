/**
 * The RAM TaskStore: everything one endpoint lifetime knows about its tasks, kept as immutable
 * encoded rows with indexes, synchronous transactions with full rollback, post-commit change
 * notification and lower-only bounds (16,384 records / 32 MiB encoded per endpoint).
 *
 * There is no persistence: a new lifetime starts empty. Values returned are deep-frozen and
 * shared between reads; snapshots are fresh top-level objects around those frozen values.
 */
import { endpointKey } from "../protocol/endpoint.ts";
import { TaskError } from "../protocol/errors.ts";
import { maxCursorDigits, maxStoreEncodedBytes, maxStoreRecords } from "../protocol/limits.ts";
import type {
  EnvelopeKind,
  TaskEndpoint,
  TaskEnvelope,
  TaskEvent,
  TaskIntent,
  TaskRecord,
  TaskStatus,
  TerminalDelivery,
} from "../protocol/schemas.ts";
import { createRowEngine, type RowStats, type TableName } from "./rows.ts";

// ---------------------------------------------------------------------------------------------
// Row shapes
// ---------------------------------------------------------------------------------------------

export type TaskRole = "origin" | "target";

export interface StoredTask {
  readonly record: TaskRecord;
  readonly role: TaskRole;
}

export interface TaskSnapshot extends TaskRecord {
  readonly role: TaskRole;
  readonly events: readonly TaskEvent[];
  readonly terminalDelivery: TerminalDelivery;
}

export type OutboxState = "pending" | "accepted";

export interface Acceptance {
  readonly acceptanceId: string;
  readonly acceptedAt: number;
  readonly duplicate: boolean;
}

export interface OutboxEntry {
  readonly envelopeId: string;
  readonly taskId: string;
  readonly target: TaskEndpoint;
  readonly targetKey: string;
  readonly kind: EnvelopeKind;
  /** What the envelope is for (assignment, intent, receipt, fanout, …); chosen by the core. */
  readonly purpose: string;
  /** The immutable envelope; every retry sends exactly this (same id, same `createdAt`). */
  readonly envelope: TaskEnvelope;
  /** Creation order, global and strictly increasing. */
  readonly seq: number;
  readonly state: OutboxState;
  /** True once a request carrying it was admitted: it can no longer be withdrawn. */
  readonly attempted: boolean;
  readonly acceptance?: Acceptance;
}

export type NewOutboxEntry = Pick<OutboxEntry, "envelopeId" | "taskId" | "target" | "kind" | "purpose" | "envelope">;

export interface QuarantineEntry extends Omit<OutboxEntry, "state" | "acceptance"> {
  readonly priorState: OutboxState;
  readonly errorCode: string;
  readonly details: Readonly<Record<string, unknown>>;
  readonly quarantinedAt: number;
}

export interface OperationReservation {
  readonly taskId: string;
  readonly operation: string;
  readonly logicalId: string;
  readonly logicalType: string;
  readonly envelopeIds: readonly string[];
  readonly createdAt: number;
}

export interface StoredIntent {
  readonly intent: TaskIntent;
  readonly envelopeId: string;
}

export interface DeliveryRow {
  readonly envelopeId: string;
  readonly cursor: string;
  /** The cursor tracked just before this one: the frontier while this is the oldest pending. */
  readonly prevCursor: string;
  /** Exactly what the relay delivered (validated later by the core). */
  readonly envelope: unknown;
  readonly receivedAt: number;
  /** Intake order shared with local presentation items. */
  readonly order: number;
  /** Processing stage, owned by the core (e.g. tracked, recorded, presented). */
  readonly stage: string;
  /** The ACK is authorised and may be (re)sent by the repair pass. */
  readonly ackRequested: boolean;
  /** Core bookkeeping for this delivery (event id, error, …). */
  readonly data: Readonly<Record<string, unknown>>;
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
  /** Lower the encoded-bytes bound (never above 32 MiB). */
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

/** Index contents in a canonical form, for checking against a recomputation from rows. */
export interface IndexSnapshot {
  readonly eventsByTask: Record<string, string[]>;
  readonly activeTasks: string[];
  readonly pendingByTarget: Record<string, string[]>;
  readonly operationByEnvelope: Record<string, string>;
  readonly deliveriesByCursor: string[];
  readonly localQueue: string[];
  readonly rotation: Record<string, number>;
}

export interface TaskStore {
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
  setTarget(taskId: string, target: TaskEndpoint): void;
  appendEvent(event: TaskEvent): boolean;
  getEvent(eventId: string): TaskEvent | undefined;
  getEvents(taskId: string): readonly TaskEvent[];
  eventCount(taskId: string): number;
  lastEvent(taskId: string): TaskEvent | undefined;
  getTask(taskId: string): TaskSnapshot | undefined;
  listTasks(): TaskSnapshot[];
  taskIds(): string[];
  activeTaskIds(): string[];
  hasActiveTasks(): boolean;

  // outbox
  putOutbox(entry: NewOutboxEntry): boolean;
  getOutbox(envelopeId: string): OutboxEntry | undefined;
  pendingOutboxCount(): number;
  /** Older pending envelopes to the same target, oldest first (empty when it is the head). */
  pendingOutboxAhead(envelopeId: string): string[];
  /** Pending envelopes of one target in creation order. */
  pendingForTarget(targetKey: string): OutboxEntry[];
  /** Each target's oldest pending envelope, in fair rotation order (least recently rotated first). */
  retryHeads(): OutboxEntry[];
  /** Moves a target to the back of the retry rotation. */
  rotateRetry(targetKey: string): void;
  markOutboxAttempted(envelopeId: string): void;
  markOutboxAccepted(envelopeId: string, acceptance: Acceptance): void;
  quarantineOutbox(envelopeId: string, reason: { errorCode: string; details: Record<string, unknown>; quarantinedAt: number }): QuarantineEntry;
  getQuarantine(envelopeId: string): QuarantineEntry | undefined;
  listQuarantine(): QuarantineEntry[];
  /** Withdraws a pending envelope that never reached the wire, and any reservation naming it. */
  discardUnsentOperation(envelopeId: string): boolean;

  // cooldowns (per envelope, per target, per ACK: the key is the caller's)
  setCooldown(key: string, cooldown: Cooldown): void;
  getCooldown(key: string): Cooldown | undefined;
  clearCooldown(key: string): void;

  // idempotent operations and own intents
  reserveOperation(
    taskId: string,
    operation: string,
    create: () => Omit<OperationReservation, "taskId" | "operation">,
  ): { created: boolean; record: OperationReservation };
  getOperation(taskId: string, operation: string): OperationReservation | undefined;
  putIntent(intent: TaskIntent, envelopeId: string): boolean;
  getIntent(intentId: string): StoredIntent | undefined;

  // inbound deliveries and the ACK checkpoint
  trackDelivery(delivery: { cursor: string; envelopeId: string; envelope: unknown; receivedAt: number }): TrackResult;
  getDelivery(envelopeId: string): DeliveryRow | undefined;
  /** Unacknowledged deliveries in cursor order. */
  deliveries(): DeliveryRow[];
  updateDelivery(envelopeId: string, patch: { stage?: string; ackRequested?: boolean; data?: Record<string, unknown> }): DeliveryRow;
  /** Forgets an acknowledged delivery; the frontier advances over the contiguous acknowledged run. */
  acknowledgeDelivery(envelopeId: string): boolean;
  pendingDeliveryCount(): number;
  checkpoint(): Checkpoint;

  // local presentation queue (origin's own view of canonical events it creates)
  nextOrder(): number;
  enqueueLocalPresentation(event: TaskEvent): LocalPresentation;
  localPresentations(): LocalPresentation[];
  completeLocalPresentation(eventId: string): boolean;

  // presentation evidence per event (inserted, woken, archived, …) for this lifetime
  getEvidence(eventId: string): Evidence | undefined;
  recordEvidence(eventId: string, patch: Evidence): Evidence;

  /** Index contents and the same recomputed from rows (for invariant tests). */
  debugIndexes(): { actual: IndexSnapshot; recomputed: IndexSnapshot };
}

const PERSISTENCE_OPTIONS = new Set(["path", "file", "filename", "dir", "directory", "database", "db", "persist", "persistence", "sqlite", "storage"]);
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
    if (!KNOWN_OPTIONS.has(name)) throw new TaskError("INVALID_CONFIGURATION", { message: `unknown TaskStore option ${name}`, details: { option: name } });
  }
  return {
    maxRecords: lowerOnlyBound("maxRecords", given.maxRecords, maxStoreRecords),
    maxEncodedBytes: lowerOnlyBound("maxEncodedBytes", given.maxEncodedBytes, maxStoreEncodedBytes),
  };
}

function assertCursor(cursor: string): bigint {
  if (typeof cursor !== "string" || !CURSOR_PATTERN.test(cursor)) {
    throw new TaskError("INVALID_CURSOR", { details: { cursor } });
  }
  return BigInt(cursor);
}

function operationKey(taskId: string, operation: string): string {
  return `${taskId}\u0000${operation}`;
}

/** First index in a sorted array whose item is not less than `probe`. */
function lowerBound<T>(items: readonly T[], probe: T, compare: (a: T, b: T) => number): number {
  let low = 0;
  let high = items.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compare(items[middle]!, probe) < 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

function insertSorted<T>(items: T[], item: T, compare: (a: T, b: T) => number): void {
  items.splice(lowerBound(items, item, compare), 0, item);
}

function removeSorted<T>(items: T[], item: T, compare: (a: T, b: T) => number): void {
  const index = lowerBound(items, item, compare);
  if (index < items.length && compare(items[index]!, item) === 0) items.splice(index, 1);
}

interface EventKey {
  readonly sequence: bigint;
  readonly eventId: string;
}
interface SeqKey {
  readonly seq: number;
  readonly envelopeId: string;
}
interface CursorKey {
  readonly cursor: bigint;
  readonly envelopeId: string;
}
interface OrderKey {
  readonly order: number;
  readonly eventId: string;
}

const byEvent = (a: EventKey, b: EventKey) =>
  a.sequence < b.sequence ? -1 : a.sequence > b.sequence ? 1 : a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0;
const bySeq = (a: SeqKey, b: SeqKey) => a.seq - b.seq;
const byCursor = (a: CursorKey, b: CursorKey) => (a.cursor < b.cursor ? -1 : a.cursor > b.cursor ? 1 : 0);
const byOrder = (a: OrderKey, b: OrderKey) => a.order - b.order;

interface Indexes {
  eventsByTask: Map<string, EventKey[]>;
  activeTasks: Set<string>;
  pendingByTarget: Map<string, SeqKey[]>;
  pendingTargetOf: Map<string, string>;
  operationByEnvelope: Map<string, string>;
  deliveriesByCursor: CursorKey[];
  localQueue: OrderKey[];
  rotation: Map<string, number>;
}

function emptyIndexes(): Indexes {
  return {
    eventsByTask: new Map(),
    activeTasks: new Set(),
    pendingByTarget: new Map(),
    pendingTargetOf: new Map(),
    operationByEnvelope: new Map(),
    deliveriesByCursor: [],
    localQueue: [],
    rotation: new Map(),
  };
}

/** Applies one row change to the indexes (also used to recompute them from scratch). */
function indexRow(indexes: Indexes, table: TableName, key: string, previous: unknown, next: unknown): void {
  switch (table) {
    case "task": {
      const before = previous as StoredTask | undefined;
      const after = next as StoredTask | undefined;
      if (before !== undefined && before.record.status === "active") indexes.activeTasks.delete(key);
      if (after !== undefined && after.record.status === "active") indexes.activeTasks.add(key);
      return;
    }
    case "event": {
      const before = previous as TaskEvent | undefined;
      const after = next as TaskEvent | undefined;
      if (before !== undefined) {
        const list = indexes.eventsByTask.get(before.taskId);
        if (list !== undefined) {
          removeSorted(list, { sequence: BigInt(before.sequence), eventId: before.eventId }, byEvent);
          if (list.length === 0) indexes.eventsByTask.delete(before.taskId);
        }
      }
      if (after !== undefined) {
        let list = indexes.eventsByTask.get(after.taskId);
        if (list === undefined) indexes.eventsByTask.set(after.taskId, (list = []));
        insertSorted(list, { sequence: BigInt(after.sequence), eventId: after.eventId }, byEvent);
      }
      return;
    }
    case "outbox": {
      const before = previous as OutboxEntry | undefined;
      const after = next as OutboxEntry | undefined;
      if (before !== undefined && before.state === "pending") {
        const list = indexes.pendingByTarget.get(before.targetKey);
        if (list !== undefined) {
          removeSorted(list, { seq: before.seq, envelopeId: before.envelopeId }, bySeq);
          if (list.length === 0) indexes.pendingByTarget.delete(before.targetKey);
        }
        indexes.pendingTargetOf.delete(key);
      }
      if (after !== undefined && after.state === "pending") {
        let list = indexes.pendingByTarget.get(after.targetKey);
        if (list === undefined) indexes.pendingByTarget.set(after.targetKey, (list = []));
        insertSorted(list, { seq: after.seq, envelopeId: after.envelopeId }, bySeq);
        indexes.pendingTargetOf.set(key, after.targetKey);
      }
      return;
    }
    case "operation": {
      const before = previous as OperationReservation | undefined;
      const after = next as OperationReservation | undefined;
      if (before !== undefined) for (const id of before.envelopeIds) indexes.operationByEnvelope.delete(id);
      if (after !== undefined) for (const id of after.envelopeIds) indexes.operationByEnvelope.set(id, key);
      return;
    }
    case "delivery": {
      const before = previous as DeliveryRow | undefined;
      const after = next as DeliveryRow | undefined;
      if (before !== undefined) removeSorted(indexes.deliveriesByCursor, { cursor: BigInt(before.cursor), envelopeId: key }, byCursor);
      if (after !== undefined) insertSorted(indexes.deliveriesByCursor, { cursor: BigInt(after.cursor), envelopeId: key }, byCursor);
      return;
    }
    case "local": {
      const before = previous as { order: number } | undefined;
      const after = next as { order: number } | undefined;
      if (before !== undefined) removeSorted(indexes.localQueue, { order: before.order, eventId: key }, byOrder);
      if (after !== undefined) insertSorted(indexes.localQueue, { order: after.order, eventId: key }, byOrder);
      return;
    }
    case "rotation": {
      const after = next as { stamp: number } | undefined;
      if (after === undefined) indexes.rotation.delete(key);
      else indexes.rotation.set(key, after.stamp);
      return;
    }
    default:
      return;
  }
}

function snapshotIndexes(indexes: Indexes): IndexSnapshot {
  const sortedRecord = <V>(map: Map<string, V>, project: (value: V) => unknown) =>
    Object.fromEntries([...map.keys()].sort().map((key) => [key, project(map.get(key)!)])) as never;
  return {
    eventsByTask: sortedRecord(indexes.eventsByTask, (list: EventKey[]) => list.map((item) => item.eventId)),
    activeTasks: [...indexes.activeTasks].sort(),
    pendingByTarget: sortedRecord(indexes.pendingByTarget, (list: SeqKey[]) => list.map((item) => item.envelopeId)),
    operationByEnvelope: sortedRecord(indexes.operationByEnvelope, (value: string) => value),
    deliveriesByCursor: indexes.deliveriesByCursor.map((item) => item.envelopeId),
    localQueue: indexes.localQueue.map((item) => item.eventId),
    rotation: sortedRecord(indexes.rotation, (value: number) => value),
  };
}

export function createTaskStore(options?: TaskStoreOptions): TaskStore {
  const limits = resolveOptions(options);
  let indexes = emptyIndexes();
  const rows = createRowEngine({ ...limits, apply: (table, key, previous, next) => indexRow(indexes, table, key, previous, next) });

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

  function mutate<T>(fn: () => T): T {
    return rows.transaction(fn);
  }

  function requireTask(taskId: string): StoredTask {
    const stored = rows.read<StoredTask>("task", taskId);
    if (stored === undefined) throw new TaskError("TASK_NOT_FOUND", { details: { taskId } });
    return stored;
  }

  function requireOutbox(envelopeId: string): OutboxEntry {
    const entry = rows.read<OutboxEntry>("outbox", envelopeId);
    if (entry === undefined) throw new TaskError("INVALID_ENVELOPE", { message: `no outbox entry ${envelopeId}`, details: { envelopeId } });
    return entry;
  }

  function readCheckpointRow(): { highWater: string } {
    return rows.peek<{ highWater: string }>("checkpoint", CHECKPOINT_KEY) ?? { highWater: "0" };
  }

  function eventsOf(taskId: string): TaskEvent[] {
    const keys = indexes.eventsByTask.get(taskId) ?? [];
    return keys.map((item) => rows.read<TaskEvent>("event", item.eventId)!);
  }

  function terminalDeliveryOf(taskId: string, stored: StoredTask): TerminalDelivery {
    const reservation = rows.read<OperationReservation>("operation", operationKey(taskId, "terminal_intent"));
    const envelopeId = reservation?.envelopeIds[0];
    if (reservation === undefined || envelopeId === undefined) return { state: "not_submitted" };
    const base = {
      intentId: reservation.logicalId,
      intentType: reservation.logicalType,
      envelopeId,
      origin: stored.record.origin,
    };
    const quarantined = rows.read<QuarantineEntry>("quarantine", envelopeId);
    if (quarantined !== undefined) {
      return {
        state: "delivery_blocked",
        ...base,
        blockedAt: quarantined.quarantinedAt,
        error: { code: quarantined.errorCode, retryable: false, details: quarantined.details },
      };
    }
    const outbox = rows.read<OutboxEntry>("outbox", envelopeId);
    return { state: outbox?.state === "accepted" ? "accepted" : "pending", ...base };
  }

  function snapshot(taskId: string): TaskSnapshot | undefined {
    const stored = rows.read<StoredTask>("task", taskId);
    if (stored === undefined) return undefined;
    return {
      ...stored.record,
      role: stored.role,
      events: Object.freeze(eventsOf(taskId)),
      terminalDelivery: terminalDeliveryOf(taskId, stored),
    };
  }

  function dropRotationIfIdle(targetKey: string): void {
    if (!indexes.pendingByTarget.has(targetKey) && rows.has("rotation", targetKey)) rows.remove("rotation", targetKey);
  }

  const store: TaskStore = {
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
    setTarget(taskId, target) {
      mutate(() => {
        const stored = requireTask(taskId);
        rows.write("task", taskId, { ...stored, record: { ...stored.record, target } });
      });
    },
    appendEvent(event) {
      return mutate(() => {
        if (!rows.has("task", event.taskId)) throw new TaskError("TASK_NOT_FOUND", { details: { taskId: event.taskId } });
        if (rows.has("event", event.eventId)) return false;
        rows.write("event", event.eventId, event);
        return true;
      });
    },
    getEvent: (eventId) => rows.read<TaskEvent>("event", eventId),
    getEvents: (taskId) => Object.freeze(eventsOf(taskId)),
    eventCount: (taskId) => indexes.eventsByTask.get(taskId)?.length ?? 0,
    lastEvent(taskId) {
      const last = indexes.eventsByTask.get(taskId)?.at(-1);
      return last === undefined ? undefined : rows.read<TaskEvent>("event", last.eventId);
    },
    getTask: (taskId) => snapshot(taskId),
    listTasks() {
      return [...rows.keys("task")]
        .map((taskId) => snapshot(taskId)!)
        .sort((a, b) => a.createdAt - b.createdAt || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
    },
    taskIds: () => [...rows.keys("task")],
    activeTaskIds: () => [...indexes.activeTasks],
    hasActiveTasks: () => indexes.activeTasks.size > 0,

    // -- outbox ----------------------------------------------------------------------------------

    putOutbox(entry) {
      return mutate(() => {
        if (rows.has("outbox", entry.envelopeId) || rows.has("quarantine", entry.envelopeId)) return false;
        const seq = bump(() => outboxSeq, (value) => (outboxSeq = value));
        const row: OutboxEntry = { ...entry, targetKey: endpointKey(entry.target), seq, state: "pending", attempted: false };
        rows.write("outbox", entry.envelopeId, row);
        return true;
      });
    },
    getOutbox: (envelopeId) => rows.read<OutboxEntry>("outbox", envelopeId),
    pendingOutboxCount: () => indexes.pendingTargetOf.size,
    pendingOutboxAhead(envelopeId) {
      const targetKey = indexes.pendingTargetOf.get(envelopeId);
      if (targetKey === undefined) return [];
      const list = indexes.pendingByTarget.get(targetKey) ?? [];
      const ahead: string[] = [];
      for (const item of list) {
        if (item.envelopeId === envelopeId) break;
        ahead.push(item.envelopeId);
      }
      return ahead;
    },
    pendingForTarget(targetKey) {
      return (indexes.pendingByTarget.get(targetKey) ?? []).map((item) => rows.read<OutboxEntry>("outbox", item.envelopeId)!);
    },
    retryHeads() {
      const heads: { entry: OutboxEntry; stamp: number }[] = [];
      for (const [targetKey, list] of indexes.pendingByTarget) {
        const head = list[0];
        if (head === undefined) continue;
        heads.push({ entry: rows.read<OutboxEntry>("outbox", head.envelopeId)!, stamp: indexes.rotation.get(targetKey) ?? 0 });
      }
      heads.sort((a, b) => a.stamp - b.stamp || a.entry.seq - b.entry.seq);
      return heads.map((item) => item.entry);
    },
    rotateRetry(targetKey) {
      mutate(() => {
        const stamp = bump(() => rotationStamp, (value) => (rotationStamp = value));
        rows.write("rotation", targetKey, { stamp });
      });
    },
    markOutboxAttempted(envelopeId) {
      mutate(() => {
        const entry = requireOutbox(envelopeId);
        if (!entry.attempted) rows.write("outbox", envelopeId, { ...entry, attempted: true });
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
        const row: QuarantineEntry = { ...rest, priorState: state, errorCode: reason.errorCode, details: reason.details, quarantinedAt: reason.quarantinedAt };
        rows.remove("outbox", envelopeId);
        rows.write("quarantine", envelopeId, row);
        dropRotationIfIdle(entry.targetKey);
        return rows.peek<QuarantineEntry>("quarantine", envelopeId)!;
      });
    },
    getQuarantine: (envelopeId) => rows.read<QuarantineEntry>("quarantine", envelopeId),
    listQuarantine: () => [...rows.keys("quarantine")].map((key) => rows.read<QuarantineEntry>("quarantine", key)!),
    discardUnsentOperation(envelopeId) {
      return mutate(() => {
        const entry = rows.read<OutboxEntry>("outbox", envelopeId);
        if (entry === undefined || entry.state !== "pending" || entry.attempted) return false;
        rows.remove("outbox", envelopeId);
        rows.remove("cooldown", `envelope:${envelopeId}`);
        const opKey = indexes.operationByEnvelope.get(envelopeId);
        if (opKey !== undefined) rows.remove("operation", opKey);
        dropRotationIfIdle(entry.targetKey);
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
        const existing = rows.read<OperationReservation>("operation", key);
        if (existing !== undefined) return { created: false, record: existing };
        rows.write("operation", key, { taskId, operation, ...create() } satisfies OperationReservation);
        return { created: true, record: rows.peek<OperationReservation>("operation", key)! };
      });
    },
    getOperation: (taskId, operation) => rows.read<OperationReservation>("operation", operationKey(taskId, operation)),
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
        const existing = rows.read<DeliveryRow>("delivery", delivery.envelopeId);
        if (existing !== undefined) {
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
        const order = bump(() => intakeOrder, (value) => (intakeOrder = value));
        rows.write("delivery", delivery.envelopeId, {
          envelopeId: delivery.envelopeId,
          cursor: delivery.cursor,
          prevCursor: highWater,
          envelope: delivery.envelope,
          receivedAt: delivery.receivedAt,
          order,
          stage: "tracked",
          ackRequested: false,
          data: {},
        } satisfies DeliveryRow);
        rows.write("checkpoint", CHECKPOINT_KEY, { highWater: delivery.cursor });
        return "tracked";
      });
    },
    getDelivery: (envelopeId) => rows.read<DeliveryRow>("delivery", envelopeId),
    deliveries: () => indexes.deliveriesByCursor.map((item) => rows.read<DeliveryRow>("delivery", item.envelopeId)!),
    updateDelivery(envelopeId, patch) {
      return mutate(() => {
        const row = rows.read<DeliveryRow>("delivery", envelopeId);
        if (row === undefined) throw new TaskError("INVALID_DELIVERY", { message: `no tracked delivery ${envelopeId}`, details: { envelopeId } });
        rows.write("delivery", envelopeId, {
          ...row,
          ...(patch.stage === undefined ? {} : { stage: patch.stage }),
          ...(patch.ackRequested === undefined ? {} : { ackRequested: patch.ackRequested }),
          ...(patch.data === undefined ? {} : { data: { ...row.data, ...patch.data } }),
        });
        return rows.peek<DeliveryRow>("delivery", envelopeId)!;
      });
    },
    acknowledgeDelivery: (envelopeId) => rows.remove("delivery", envelopeId),
    pendingDeliveryCount: () => indexes.deliveriesByCursor.length,
    checkpoint() {
      const { highWater } = readCheckpointRow();
      const oldest = indexes.deliveriesByCursor[0];
      if (oldest === undefined) return { frontier: highWater, highWater };
      return { frontier: rows.peek<DeliveryRow>("delivery", oldest.envelopeId)!.prevCursor, highWater };
    },

    // -- local presentation --------------------------------------------------------------------------

    nextOrder: () => mutate(() => bump(() => intakeOrder, (value) => (intakeOrder = value))),
    enqueueLocalPresentation(event) {
      return mutate(() => {
        const existing = rows.read<{ order: number; taskId: string }>("local", event.eventId);
        if (existing === undefined) {
          if (!rows.has("event", event.eventId)) throw new TaskError("INVALID_EVENT", { message: `event ${event.eventId} is not stored`, details: { eventId: event.eventId } });
          const order = bump(() => intakeOrder, (value) => (intakeOrder = value));
          rows.write("local", event.eventId, { order, taskId: event.taskId });
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
      for (const table of ["task", "event", "outbox", "operation", "delivery", "local", "rotation"] as const) {
        for (const key of rows.keys(table)) indexRow(recomputed, table, key, undefined, rows.peek(table, key));
      }
      return { actual: snapshotIndexes(indexes), recomputed: snapshotIndexes(recomputed) };
    },
  };

  return store;
}
