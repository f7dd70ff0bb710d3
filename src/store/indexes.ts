/**
 * Every indexed table's index in one place. `createStoreIndexes` keeps them for the kernel: the
 * row engine applies each change of an indexed row (also on rollback) through it, and the store
 * recomputes all indexes from rows to check them; the wiring (task-store.ts) hands each part its
 * own index. What an index holds and how a row change moves it is defined by the part that owns
 * the table; this file only gathers those definitions, so adding an index is one line here.
 */
import { eventIndex } from "./events.ts";
import type { TableIndex } from "./index-kit.ts";
import { deliveryIndex } from "./inbox.ts";
import type { IndexKeeper } from "./kernel.ts";
import { localIndex } from "./local-presentation.ts";
import { operationIndex } from "./operations.ts";
import { outboxIndex } from "./outbox.ts";
import { rotationIndex } from "./retry-rotation.ts";
import type { IndexSnapshot } from "./store-types.ts";
import type { StoreRows, StoreTable } from "./tables.ts";
import { taskIndex } from "./tasks.ts";

const TABLE_INDEXES = {
  task: taskIndex,
  event: eventIndex,
  outbox: outboxIndex,
  operation: operationIndex,
  delivery: deliveryIndex,
  local: localIndex,
  rotation: rotationIndex,
} as const satisfies Partial<Record<StoreTable, TableIndex<unknown, unknown>>>;

export type IndexedTable = keyof typeof TABLE_INDEXES;
export type Indexes = { [Table in IndexedTable]: ReturnType<(typeof TABLE_INDEXES)[Table]["empty"]> };

const INDEXED = Object.keys(TABLE_INDEXES) as IndexedTable[];

/** Tables with an index; rows of the others (envelope text among them) are never parsed on write. */
export const INDEXED_TABLES: ReadonlySet<StoreTable> = new Set<StoreTable>(INDEXED);

const isIndexed = (table: StoreTable): table is IndexedTable => Object.hasOwn(TABLE_INDEXES, table);
const definition = (table: IndexedTable) => TABLE_INDEXES[table] as TableIndex<unknown, unknown>;

export function emptyIndexes(): Indexes {
  return Object.fromEntries(INDEXED.map((table) => [table, definition(table).empty()])) as Indexes;
}

/** Applies one row change to the indexes (also used to recompute them from scratch). */
export function indexRow(indexes: Indexes, table: StoreTable, key: string, previous: unknown, next: unknown): void {
  if (isIndexed(table)) definition(table).apply(indexes[table], key, previous, next);
}

/** Empties every index in place (the parts keep their references). */
export function clearIndexes(indexes: Indexes): void {
  for (const table of INDEXED) Object.assign(indexes[table], definition(table).empty());
}

export function snapshotIndexes(indexes: Indexes): IndexSnapshot {
  return {
    ...taskIndex.snapshot(indexes.task),
    ...eventIndex.snapshot(indexes.event),
    ...outboxIndex.snapshot(indexes.outbox),
    ...operationIndex.snapshot(indexes.operation),
    ...deliveryIndex.snapshot(indexes.delivery),
    ...localIndex.snapshot(indexes.local),
    ...rotationIndex.snapshot(indexes.rotation),
  };
}

/** The store's indexes, kept for the kernel (`IndexKeeper`); the wiring hands each part its own from `indexes`. */
export interface StoreIndexes extends IndexKeeper {
  readonly indexes: Indexes;
}

export function createStoreIndexes(): StoreIndexes {
  const indexes = emptyIndexes();
  return {
    indexes,
    tables: INDEXED_TABLES,
    apply: (table, key, previous, next) => indexRow(indexes, table, key, previous, next),
    clear: () => clearIndexes(indexes),
    check(rows: StoreRows) {
      const recomputed = emptyIndexes();
      for (const table of INDEXED) {
        for (const key of rows.keys(table)) indexRow(recomputed, table, key, undefined, rows.peek(table, key));
      }
      return { actual: snapshotIndexes(indexes), recomputed: snapshotIndexes(recomputed) };
    },
  };
}
