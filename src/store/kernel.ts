/**
 * What every part of the TaskStore shares: one row engine (so the bounds count every table and a
 * transaction rolls back all of them), the indexes kept in step with its rows, and counters whose
 * steps a rollback undoes. Each part takes its rows, its index and its counters from here, and
 * `clear()` and the index check cover all of them at once.
 */
import { TaskError } from "../protocol/errors.ts";
import { clearIndexes, emptyIndexes, INDEXED_TABLES, type IndexedTable, type Indexes, indexRow, snapshotIndexes } from "./indexes.ts";
import { createRowEngine } from "./rows.ts";
import type { IndexSnapshot } from "./store-types.ts";
import { STORE_TABLES, type StoreRows } from "./tables.ts";

/** A strictly increasing number kept outside rows (creation and intake order, rotation stamps). */
export interface Counter {
  next(): number;
}

export interface StoreLimits {
  readonly maxRecords: number;
  readonly maxEncodedBytes: number;
}

export interface StoreKernel {
  readonly rows: StoreRows;
  /** The index of one table, kept in step with its rows (rollback included). */
  index<Table extends IndexedTable>(table: Table): Indexes[Table];
  /** A new counter from 0: a rollback undoes its steps and `clear()` starts it over. */
  counter(): Counter;
  /** Drops every row, index entry and counter. Not allowed inside a transaction. */
  clear(): void;
  /** Index contents and the same recomputed from rows (for invariant tests). */
  debugIndexes(): { actual: IndexSnapshot; recomputed: IndexSnapshot };
}

export function createStoreKernel(limits: StoreLimits): StoreKernel {
  const indexes = emptyIndexes();
  const counterResets: (() => void)[] = [];
  const rows = createRowEngine({
    tables: STORE_TABLES,
    indexed: INDEXED_TABLES,
    ...limits,
    apply: (table, key, previous, next) => indexRow(indexes, table, key, previous, next),
  });

  function counter(): Counter {
    let value = 0;
    counterResets.push(() => {
      value = 0;
    });
    return {
      next() {
        const previous = value;
        value = previous + 1;
        rows.logUndo(() => {
          value = previous;
        });
        return value;
      },
    };
  }

  return {
    rows,
    index: (table) => indexes[table],
    counter,
    clear() {
      if (rows.inTransaction()) throw new TaskError("INVALID_TRANSACTION", { message: "clear() is not allowed inside a transaction" });
      clearIndexes(indexes);
      for (const reset of counterResets) reset();
      rows.clear();
    },
    debugIndexes() {
      const recomputed = emptyIndexes();
      for (const table of INDEXED_TABLES) {
        for (const key of rows.keys(table)) indexRow(recomputed, table, key, undefined, rows.peek(table, key));
      }
      return { actual: snapshotIndexes(indexes), recomputed: snapshotIndexes(recomputed) };
    },
  };
}
