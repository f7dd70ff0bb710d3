/**
 * The encoded rows themselves, table by table, and the record and byte counts the bounds are
 * checked against. Every change of a row goes through `set`, which keeps the counts, the parse
 * cache and the indexes (through the `apply` hook) in step; rollback uses it too, so undoing a
 * change restores all of them. `admit` refuses a write the bounds have no room for. The row
 * engine's options (`RowEngineOptions`: tables, bounds, the `apply` hook) are declared here, where
 * they are used; rows.ts re-exports them.
 */
import { TaskError } from "../protocol/errors.ts";
import { storeRecordOverheadBytes } from "../protocol/limits.ts";
import { invariant } from "./invariant.ts";
import type { ParseCache } from "./row-cache.ts";

/** Called for every row change (also on rollback), with the old and new values. */
export type ApplyHook<Table extends string> = (table: Table, key: string, previous: unknown, next: unknown) => void;

export interface RowEngineOptions<Table extends string> {
  readonly tables: readonly Table[];
  readonly maxRecords: number;
  readonly maxEncodedBytes: number;
  /** Called for each change of a row in `indexed` tables, with the parsed values (the indexes). */
  readonly apply: ApplyHook<Table>;
  /** Tables whose changes `apply` sees; rows of other tables are stored and bounded, never parsed on write. */
  readonly indexed: ReadonlySet<Table>;
}

/** Bytes one record is charged: its encoded text, its key and a fixed overhead. */
export function encodedRecordBytes(key: string, text: string): number {
  return Buffer.byteLength(text, "utf8") + Buffer.byteLength(key, "utf8") + storeRecordOverheadBytes;
}

export interface RowTables<Table extends string> {
  get(table: Table, key: string): string | undefined;
  has(table: Table, key: string): boolean;
  keys(table: Table): IterableIterator<string>;
  size(table: Table): number;
  /** A row's value, parsed once while it stays cached. */
  parsed(table: Table, key: string, text: string): unknown;
  /** Sets (`text`) or deletes (`undefined`) one row, keeping counts, cache and indexes in step. No logging. */
  set(table: Table, key: string, text: string | undefined, nextValue?: unknown): void;
  /** Throws `TASK_CAPACITY` unless writing `text` at `key` fits both bounds (dropping cached values if needed). */
  admit(table: Table, key: string, text: string): void;
  records(): number;
  encodedBytes(): number;
  clear(): void;
}

const slotOf = (table: string, key: string) => `${table}\u0000${key}`;

/** The record and byte counts of the rows held: what the bounds are checked against. */
interface RowCounts {
  records(): number;
  encodedBytes(): number;
  /** Counts one row's text in (`+1`) or out (`-1`). */
  count(key: string, text: string, sign: 1 | -1): void;
  /** Asserts the counts are not negative and the records within their bound. */
  check(): void;
  /** Throws `TASK_CAPACITY` unless replacing `previousText` by `text` at `key` fits both bounds (dropping cached values if needed). */
  admit(table: string, key: string, previousText: string | undefined, text: string): void;
  clear(): void;
}

function createRowCounts(options: Pick<RowEngineOptions<string>, "maxRecords" | "maxEncodedBytes">, cache: ParseCache): RowCounts {
  let records = 0;
  let encodedBytes = 0;

  function check(): void {
    const cachedBytes = cache.bytes();
    invariant(records >= 0 && encodedBytes >= 0 && cachedBytes >= 0, "store counters are not negative", {
      records,
      encodedBytes,
      cachedBytes,
    });
    invariant(records <= options.maxRecords, "records stay within their bound", { records, maxRecords: options.maxRecords });
  }

  function admit(table: string, key: string, previousText: string | undefined, text: string): void {
    const nextRecords = records + (previousText === undefined ? 1 : 0);
    const delta = encodedRecordBytes(key, text) - (previousText === undefined ? 0 : encodedRecordBytes(key, previousText));
    if (nextRecords <= options.maxRecords && cache.makeRoom(delta)) return;
    throw new TaskError("TASK_CAPACITY", {
      details: {
        table,
        records,
        maxRecords: options.maxRecords,
        encodedBytes,
        cachedBytes: cache.bytes(),
        maxEncodedBytes: options.maxEncodedBytes,
        requiredRecords: nextRecords,
        requiredBytes: encodedBytes + delta,
      },
    });
  }

  return {
    records: () => records,
    encodedBytes: () => encodedBytes,
    count(key, text, sign) {
      records += sign;
      encodedBytes += sign * encodedRecordBytes(key, text);
    },
    check,
    admit,
    clear() {
      records = 0;
      encodedBytes = 0;
    },
  };
}

export function createRowTables<Table extends string>(options: RowEngineOptions<Table>, cache: ParseCache): RowTables<Table> {
  const tables = new Map<Table, Map<string, string>>(options.tables.map((name) => [name, new Map()]));
  const counts = createRowCounts(options, cache);

  function rows(table: Table): Map<string, string> {
    const found = tables.get(table);
    if (found === undefined) throw new TaskError("INVALID_TRANSACTION", { message: `unknown table ${table}` });
    return found;
  }

  const parsed = (table: Table, key: string, text: string) => cache.value(slotOf(table, key), text);

  function set(table: Table, key: string, text: string | undefined, nextValue?: unknown): void {
    const map = rows(table);
    const previousText = map.get(key);
    const indexed = options.indexed.has(table);
    const previousValue = previousText === undefined || !indexed ? undefined : parsed(table, key, previousText);
    if (previousText !== undefined) {
      counts.count(key, previousText, -1);
      map.delete(key);
      cache.drop(slotOf(table, key));
    }
    if (text !== undefined) {
      counts.count(key, text, 1);
      map.set(key, text);
    }
    counts.check();
    if (!indexed) return;
    const next = text === undefined ? undefined : (nextValue ?? JSON.parse(text));
    options.apply(table, key, previousValue, next);
  }

  return {
    get: (table, key) => rows(table).get(key),
    has: (table, key) => rows(table).has(key),
    keys: (table) => rows(table).keys(),
    size: (table) => rows(table).size,
    parsed,
    set,
    admit: (table, key, text) => counts.admit(table, key, rows(table).get(key), text),
    records: () => counts.records(),
    encodedBytes: () => counts.encodedBytes(),
    clear() {
      for (const map of tables.values()) map.clear();
      counts.clear();
    },
  };
}
