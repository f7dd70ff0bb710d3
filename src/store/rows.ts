/**
 * The row engine under the TaskStore: tables of immutable encoded rows (row-tables.ts), a
 * parse-once cache of deep-frozen values (row-cache.ts), lower-only capacity admission, and
 * synchronous transactions whose undo log restores rows, indexes (through the `apply` hook) and
 * counters (row-journal.ts). This file puts them together behind one small interface.
 *
 * What the byte bound counts is what the engine holds: each row's encoded text (plus its key and a
 * fixed overhead), and, while a row's parsed value is cached, that value too — charged at the size
 * of its text. The cache is only a cache: when a write needs room its oldest entries are dropped
 * first, and a read that finds no room returns the value without caching it.
 *
 * Invariants are asserted, not assumed: counters never go negative and never pass their bounds; a
 * violation is a typed `INVARIANT_VIOLATED` error.
 */
import { TaskError } from "../protocol/errors.ts";
import { createParseCache } from "./row-cache.ts";
import { createJournal } from "./row-journal.ts";
import { createRowTables, type RowEngineOptions } from "./row-tables.ts";

export { invariant } from "./invariant.ts";
export { encodedRecordBytes } from "./row-tables.ts";
export type { ApplyHook, RowEngineOptions } from "./row-tables.ts";

export interface RowStats {
  readonly records: number;
  /** Encoded text held (rows, keys and per-record overhead). */
  readonly encodedBytes: number;
  /** Parsed values held in the cache, charged at the size of their text. */
  readonly cachedBytes: number;
  readonly maxRecords: number;
  /** Bound on `encodedBytes + cachedBytes`. */
  readonly maxEncodedBytes: number;
  /** Rows read through the public read path (indexed reads touch only what they need). */
  readonly rowReads: number;
  /** Rows parsed from text (each row at most once while it stays cached). */
  readonly rowParses: number;
}

export interface RowEngine<Table extends string> {
  read<T>(table: Table, key: string): T | undefined;
  peek<T>(table: Table, key: string): T | undefined;
  /** A row's encoded text as stored (no parse). */
  text(table: Table, key: string): string | undefined;
  has(table: Table, key: string): boolean;
  write(table: Table, key: string, value: unknown): void;
  /** Writes a row whose encoding the caller already has (it must be the JSON text of the value). */
  writeText(table: Table, key: string, text: string): void;
  remove(table: Table, key: string): boolean;
  keys(table: Table): IterableIterator<string>;
  size(table: Table): number;
  /** Registers an undo closure for state kept outside rows (counters). */
  logUndo(undo: () => void): void;
  transaction<T>(fn: () => T): T;
  inTransaction(): boolean;
  onCommit(listener: () => void): () => void;
  /** Drops every row and notifies listeners. Not allowed inside a transaction. */
  clear(): void;
  stats(): RowStats;
}

export function createRowEngine<Table extends string>(options: RowEngineOptions<Table>): RowEngine<Table> {
  const cache = createParseCache(() => options.maxEncodedBytes - tables.encodedBytes());
  const tables = createRowTables(options, cache);
  const journal = createJournal<Table>((table, key, text) => tables.set(table, key, text));
  let rowReads = 0;

  function writeEncoded(table: Table, key: string, text: string, value?: unknown): void {
    journal.autoCommit(() => {
      const previousText = tables.get(table, key);
      if (previousText === text) return;
      tables.admit(table, key, text);
      journal.log({ table, key, text: previousText });
      tables.set(table, key, text, value);
    });
  }

  return {
    read<T>(table: Table, key: string): T | undefined {
      const text = tables.get(table, key);
      if (text === undefined) return undefined;
      rowReads += 1;
      return tables.parsed(table, key, text) as T;
    },
    peek<T>(table: Table, key: string): T | undefined {
      const text = tables.get(table, key);
      return text === undefined ? undefined : (tables.parsed(table, key, text) as T);
    },
    text: (table, key) => tables.get(table, key),
    has: (table, key) => tables.has(table, key),
    write(table, key, value) {
      const text = JSON.stringify(value);
      if (typeof text !== "string") throw new TaskError("INVALID_TRANSACTION", { message: `row ${table}/${key} has no JSON form` });
      writeEncoded(table, key, text, value);
    },
    writeText(table, key, text) {
      writeEncoded(table, key, text);
    },
    remove(table, key) {
      return journal.autoCommit(() => {
        const previousText = tables.get(table, key);
        if (previousText === undefined) return false;
        journal.log({ table, key, text: previousText });
        tables.set(table, key, undefined);
        return true;
      });
    },
    keys: (table) => tables.keys(table),
    size: (table) => tables.size(table),
    logUndo: (undo) => journal.log(undo),
    transaction: (fn) => journal.transaction(fn),
    inTransaction: () => journal.inTransaction(),
    onCommit: (listener) => journal.onCommit(listener),
    clear() {
      if (journal.inTransaction()) throw new TaskError("INVALID_TRANSACTION", { message: "clear() is not allowed inside a transaction" });
      tables.clear();
      cache.clear();
      journal.notify();
    },
    stats: () => ({
      records: tables.records(),
      encodedBytes: tables.encodedBytes(),
      cachedBytes: cache.bytes(),
      maxRecords: options.maxRecords,
      maxEncodedBytes: options.maxEncodedBytes,
      rowReads,
      rowParses: cache.parses(),
    }),
  };
}
