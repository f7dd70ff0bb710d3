/**
 * What every part of the TaskStore shares: one row engine (so the bounds count every table and a
 * transaction rolls back all of them), the indexes kept in step with its rows, and counters whose
 * steps a rollback undoes. Each part takes its rows and its counters from here (its index is
 * handed to it by the wiring, task-store.ts), and `clear()` and the index check cover all of them
 * at once. The indexes are given (`IndexKeeper`, kept by indexes.ts), so the kernel imports no part.
 */
import { TaskError } from "../protocol/errors.ts";
import { createRowEngine } from "./rows.ts";
import type { IndexSnapshot } from "./store-types.ts";
import { STORE_TABLES, type StoreRows, type StoreTable } from "./tables.ts";

/** A strictly increasing number kept outside rows (creation and intake order, rotation stamps). */
export interface Counter {
  next(): number;
}

export interface StoreLimits {
  readonly maxRecords: number;
  readonly maxEncodedBytes: number;
}

/**
 * What the kernel needs of the indexes: indexes.ts keeps them (from the parts' definitions) and
 * the wiring (task-store.ts) hands each part its own. Declared here, so the kernel imports no part.
 */
export interface IndexKeeper {
  /** Tables with an index; rows of the others are never parsed on write. */
  readonly tables: ReadonlySet<StoreTable>;
  /** Applies one row change to the indexes (also on rollback). */
  apply(table: StoreTable, key: string, previous: unknown, next: unknown): void;
  /** Empties every index in place (the parts keep their references). */
  clear(): void;
  /** Index contents and the same recomputed from `rows`. */
  check(rows: StoreRows): { actual: IndexSnapshot; recomputed: IndexSnapshot };
}

export interface StoreKernel {
  readonly rows: StoreRows;
  /** A new counter from 0: a rollback undoes its steps and `clear()` starts it over. */
  counter(): Counter;
  /** Drops every row, index entry and counter. Not allowed inside a transaction. */
  clear(): void;
  /** Index contents and the same recomputed from rows (for invariant tests). */
  debugIndexes(): { actual: IndexSnapshot; recomputed: IndexSnapshot };
}

export function createStoreKernel(limits: StoreLimits, indexes: IndexKeeper): StoreKernel {
  const counterResets: (() => void)[] = [];
  const rows = createRowEngine({
    tables: STORE_TABLES,
    indexed: indexes.tables,
    ...limits,
    apply: (table, key, previous, next) => indexes.apply(table, key, previous, next),
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
    counter,
    clear() {
      if (rows.inTransaction()) throw new TaskError("INVALID_TRANSACTION", { message: "clear() is not allowed inside a transaction" });
      indexes.clear();
      for (const reset of counterResets) reset();
      rows.clear();
    },
    debugIndexes: () => indexes.check(rows),
  };
}
