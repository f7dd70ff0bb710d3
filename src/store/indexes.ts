/**
 * The TaskStore's indexes, kept in step with its rows by one `indexRow` function that the row
 * engine calls for every change (also on rollback), and recomputable from rows for invariant checks.
 * Sorted-list edits assert what they assume: an entry added is not there yet, one removed is there.
 */
import { invariant } from "./rows.ts";

export const STORE_TABLES = [
  "task",
  "event",
  "outbox",
  "envelope",
  "quarantine",
  "intent",
  "operation",
  "delivery",
  "inbound",
  "checkpoint",
  "local",
  "evidence",
  "meta",
  "cooldown",
  "rotation",
] as const;
export type StoreTable = (typeof STORE_TABLES)[number];

/** Tables `indexRow` reads; rows of the others (envelope text among them) are never parsed on write. */
export const INDEXED_TABLES: ReadonlySet<StoreTable> = new Set<StoreTable>([
  "task",
  "event",
  "outbox",
  "operation",
  "delivery",
  "local",
  "rotation",
]);

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

function insertSorted<T>(items: T[], item: T, compare: (a: T, b: T) => number, what: string): void {
  const index = lowerBound(items, item, compare);
  invariant(index >= items.length || compare(items[index]!, item) !== 0, `${what}: an entry added to the index is new`);
  items.splice(index, 0, item);
}

function removeSorted<T>(items: T[], item: T, compare: (a: T, b: T) => number, what: string): void {
  const index = lowerBound(items, item, compare);
  invariant(index < items.length && compare(items[index]!, item) === 0, `${what}: an entry removed from the index is there`);
  items.splice(index, 1);
}

export interface Indexes {
  eventsByTask: Map<string, EventKey[]>;
  activeTasks: Set<string>;
  /** The active tasks this endpoint works on (role `target`), a subset of `activeTasks`. */
  activeWorking: Set<string>;
  pendingByTarget: Map<string, SeqKey[]>;
  pendingTargetOf: Map<string, string>;
  operationByEnvelope: Map<string, string>;
  deliveriesByCursor: CursorKey[];
  localQueue: OrderKey[];
  rotation: Map<string, number>;
}

export function emptyIndexes(): Indexes {
  return {
    eventsByTask: new Map(),
    activeTasks: new Set(),
    activeWorking: new Set(),
    pendingByTarget: new Map(),
    pendingTargetOf: new Map(),
    operationByEnvelope: new Map(),
    deliveriesByCursor: [],
    localQueue: [],
    rotation: new Map(),
  };
}

/** The fields of rows the indexes read (the row shapes live in task-store.ts). */
interface TaskRow {
  readonly record: { readonly status: string };
  readonly role: string;
}
interface EventRow {
  readonly eventId: string;
  readonly taskId: string;
  readonly sequence: string;
}
interface OutboxRow {
  readonly envelopeId: string;
  readonly targetKey: string;
  readonly seq: number;
  readonly state: string;
}

function indexEvent(indexes: Indexes, before: EventRow | undefined, after: EventRow | undefined): void {
  if (before !== undefined) {
    const list = indexes.eventsByTask.get(before.taskId);
    invariant(list !== undefined, "an indexed event's task has an event list");
    removeSorted(list, { sequence: BigInt(before.sequence), eventId: before.eventId }, byEvent, "eventsByTask");
    if (list.length === 0) indexes.eventsByTask.delete(before.taskId);
  }
  if (after !== undefined) {
    let list = indexes.eventsByTask.get(after.taskId);
    if (list === undefined) indexes.eventsByTask.set(after.taskId, (list = []));
    insertSorted(list, { sequence: BigInt(after.sequence), eventId: after.eventId }, byEvent, "eventsByTask");
  }
}

function indexOutbox(indexes: Indexes, key: string, before: OutboxRow | undefined, after: OutboxRow | undefined): void {
  if (before !== undefined && before.state === "pending") {
    const list = indexes.pendingByTarget.get(before.targetKey);
    invariant(list !== undefined, "a pending envelope's target has a queue");
    removeSorted(list, { seq: before.seq, envelopeId: before.envelopeId }, bySeq, "pendingByTarget");
    if (list.length === 0) indexes.pendingByTarget.delete(before.targetKey);
    indexes.pendingTargetOf.delete(key);
  }
  if (after !== undefined && after.state === "pending") {
    let list = indexes.pendingByTarget.get(after.targetKey);
    if (list === undefined) indexes.pendingByTarget.set(after.targetKey, (list = []));
    insertSorted(list, { seq: after.seq, envelopeId: after.envelopeId }, bySeq, "pendingByTarget");
    indexes.pendingTargetOf.set(key, after.targetKey);
  }
}

/** Applies one row change to the indexes (also used to recompute them from scratch). */
export function indexRow(indexes: Indexes, table: StoreTable, key: string, previous: unknown, next: unknown): void {
  switch (table) {
    case "task": {
      const before = previous as TaskRow | undefined;
      const after = next as TaskRow | undefined;
      if (before?.record.status === "active") {
        indexes.activeTasks.delete(key);
        indexes.activeWorking.delete(key);
      }
      if (after?.record.status === "active") {
        indexes.activeTasks.add(key);
        if (after.role === "target") indexes.activeWorking.add(key);
      }
      return;
    }
    case "event":
      return indexEvent(indexes, previous as EventRow | undefined, next as EventRow | undefined);
    case "outbox":
      return indexOutbox(indexes, key, previous as OutboxRow | undefined, next as OutboxRow | undefined);
    case "operation": {
      const before = previous as { envelopeIds: readonly string[] } | undefined;
      const after = next as { envelopeIds: readonly string[] } | undefined;
      if (before !== undefined) for (const id of before.envelopeIds) indexes.operationByEnvelope.delete(id);
      if (after !== undefined) for (const id of after.envelopeIds) indexes.operationByEnvelope.set(id, key);
      return;
    }
    case "delivery": {
      const before = previous as { cursor: string } | undefined;
      const after = next as { cursor: string } | undefined;
      if (before !== undefined)
        removeSorted(indexes.deliveriesByCursor, { cursor: BigInt(before.cursor), envelopeId: key }, byCursor, "deliveriesByCursor");
      if (after !== undefined)
        insertSorted(indexes.deliveriesByCursor, { cursor: BigInt(after.cursor), envelopeId: key }, byCursor, "deliveriesByCursor");
      return;
    }
    case "local": {
      const before = previous as { order: number } | undefined;
      const after = next as { order: number } | undefined;
      if (before !== undefined) removeSorted(indexes.localQueue, { order: before.order, eventId: key }, byOrder, "localQueue");
      if (after !== undefined) insertSorted(indexes.localQueue, { order: after.order, eventId: key }, byOrder, "localQueue");
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

export function snapshotIndexes(indexes: Indexes): IndexSnapshot {
  const sortedRecord = <V>(map: Map<string, V>, project: (value: V) => unknown) =>
    Object.fromEntries([...map.keys()].sort().map((key) => [key, project(map.get(key)!)])) as never;
  return {
    eventsByTask: sortedRecord(indexes.eventsByTask, (list: EventKey[]) => list.map((item) => item.eventId)),
    activeTasks: [...indexes.activeTasks].sort(),
    activeWorking: [...indexes.activeWorking].sort(),
    pendingByTarget: sortedRecord(indexes.pendingByTarget, (list: SeqKey[]) => list.map((item) => item.envelopeId)),
    operationByEnvelope: sortedRecord(indexes.operationByEnvelope, (value: string) => value),
    deliveriesByCursor: indexes.deliveriesByCursor.map((item) => item.envelopeId),
    localQueue: indexes.localQueue.map((item) => item.eventId),
    rotation: sortedRecord(indexes.rotation, (value: number) => value),
  };
}
