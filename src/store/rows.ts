/**
 * The row engine under the TaskStore: tables of immutable encoded rows, a parse-once cache of
 * deep-frozen values, lower-only capacity admission, and synchronous transactions whose undo log
 * restores rows, indexes (through the `apply` hook) and counters.
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
import { storeRecordOverheadBytes } from "../protocol/limits.ts";
import { deepFreeze } from "./freeze.ts";

/** Bytes one record is charged: its encoded text, its key and a fixed overhead. */
export function encodedRecordBytes(key: string, text: string): number {
  return Buffer.byteLength(text, "utf8") + Buffer.byteLength(key, "utf8") + storeRecordOverheadBytes;
}

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

interface CachedValue {
  readonly text: string;
  readonly value: unknown;
  readonly bytes: number;
}

type UndoEntry<Table extends string> = { readonly table: Table; readonly key: string; readonly text: string | undefined } | (() => void);

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

/** Throws the typed internal error of a broken invariant. */
export function invariant(condition: boolean, what: string, details: Record<string, unknown> = {}): asserts condition {
  if (!condition)
    throw new TaskError("INVARIANT_VIOLATED", { message: `invariant violated: ${what}`, details: { invariant: what, ...details } });
}

function isPromiseLike(value: unknown): boolean {
  return (
    (typeof value === "object" || typeof value === "function") && value !== null && typeof (value as { then?: unknown }).then === "function"
  );
}

export function createRowEngine<Table extends string>(options: RowEngineOptions<Table>): RowEngine<Table> {
  const tables = new Map<Table, Map<string, string>>(options.tables.map((name) => [name, new Map()]));
  /** Parsed values by `table\0key`, oldest first (Map order). */
  const cache = new Map<string, CachedValue>();
  const frames: UndoEntry<Table>[][] = [];
  const listeners = new Set<() => void>();
  let records = 0;
  let encodedBytes = 0;
  let cachedBytes = 0;
  let rowReads = 0;
  let rowParses = 0;
  let changed = false;

  function rows(table: Table): Map<string, string> {
    const found = tables.get(table);
    if (found === undefined) throw new TaskError("INVALID_TRANSACTION", { message: `unknown table ${table}` });
    return found;
  }

  function checkCounters(): void {
    invariant(records >= 0 && encodedBytes >= 0 && cachedBytes >= 0, "store counters are not negative", {
      records,
      encodedBytes,
      cachedBytes,
    });
    invariant(records <= options.maxRecords, "records stay within their bound", { records, maxRecords: options.maxRecords });
  }

  const cacheKey = (table: Table, key: string) => `${table}\u0000${key}`;

  function uncache(slot: string): void {
    const cached = cache.get(slot);
    if (cached === undefined) return;
    cache.delete(slot);
    cachedBytes -= cached.bytes;
  }

  /** Drops the oldest cached values until `needed` more bytes fit; false when even an empty cache is not enough. */
  function makeRoom(needed: number): boolean {
    for (const slot of cache.keys()) {
      if (encodedBytes + cachedBytes + needed <= options.maxEncodedBytes) break;
      uncache(slot);
    }
    return encodedBytes + cachedBytes + needed <= options.maxEncodedBytes;
  }

  function parsed(table: Table, key: string, text: string): unknown {
    const slot = cacheKey(table, key);
    const cached = cache.get(slot);
    if (cached !== undefined && cached.text === text) return cached.value;
    if (cached !== undefined) uncache(slot);
    rowParses += 1;
    const value = deepFreeze(JSON.parse(text) as unknown);
    const bytes = Buffer.byteLength(text, "utf8");
    // Cached only while the bound has room for it (after dropping older cached values).
    if (makeRoom(bytes)) {
      cache.set(slot, { text, value, bytes });
      cachedBytes += bytes;
    }
    return value;
  }

  /** Sets or deletes one row, keeping counters, cache and indexes in step. No logging. */
  function apply(table: Table, key: string, text: string | undefined, nextValue?: unknown): void {
    const map = rows(table);
    const previousText = map.get(key);
    const indexed = options.indexed.has(table);
    const previousValue = previousText === undefined || !indexed ? undefined : parsed(table, key, previousText);
    if (previousText !== undefined) {
      records -= 1;
      encodedBytes -= encodedRecordBytes(key, previousText);
      map.delete(key);
      uncache(cacheKey(table, key));
    }
    if (text !== undefined) {
      records += 1;
      encodedBytes += encodedRecordBytes(key, text);
      map.set(key, text);
    }
    checkCounters();
    if (!indexed) return;
    const next = text === undefined ? undefined : (nextValue ?? JSON.parse(text));
    options.apply(table, key, previousValue, next);
  }

  function log(entry: UndoEntry<Table>): void {
    const frame = frames.at(-1);
    if (frame !== undefined) frame.push(entry);
    changed = true;
  }

  function admit(table: Table, key: string, text: string): void {
    const previousText = rows(table).get(key);
    const nextRecords = records + (previousText === undefined ? 1 : 0);
    const delta = encodedRecordBytes(key, text) - (previousText === undefined ? 0 : encodedRecordBytes(key, previousText));
    if (nextRecords > options.maxRecords || !makeRoom(delta)) {
      throw new TaskError("TASK_CAPACITY", {
        details: {
          table,
          records,
          maxRecords: options.maxRecords,
          encodedBytes,
          cachedBytes,
          maxEncodedBytes: options.maxEncodedBytes,
          requiredRecords: nextRecords,
          requiredBytes: encodedBytes + delta,
        },
      });
    }
  }

  function rollback(frame: UndoEntry<Table>[]): void {
    for (let index = frame.length - 1; index >= 0; index -= 1) {
      const entry = frame[index]!;
      if (typeof entry === "function") entry();
      else apply(entry.table, entry.key, entry.text);
    }
  }

  function notify(): void {
    const errors: unknown[] = [];
    for (const listener of [...listeners]) {
      try {
        listener();
      } catch (error) {
        errors.push(error);
      }
    }
    // A listener must not throw; if one does, the commit stands and the failure surfaces here.
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, "store change listeners failed");
  }

  function runAutoCommit<T>(fn: () => T): T {
    return frames.length > 0 ? fn() : transaction(fn);
  }

  function transaction<T>(fn: () => T): T {
    const outermost = frames.length === 0;
    if (outermost) changed = false;
    const frame: UndoEntry<Table>[] = [];
    frames.push(frame);
    let result: T;
    try {
      result = fn();
      if (isPromiseLike(result)) {
        // Keep the rejection from being reported as unhandled; the caller gets our error instead.
        (result as unknown as Promise<unknown>).then(undefined, () => undefined);
        throw new TaskError("INVALID_TRANSACTION", {
          message: "a store transaction must be synchronous (the callback returned a Promise)",
        });
      }
    } catch (error) {
      frames.pop();
      rollback(frame);
      if (outermost) changed = false;
      throw error;
    }
    frames.pop();
    const parent = frames.at(-1);
    if (parent !== undefined) {
      parent.push(...frame);
      return result;
    }
    if (changed) {
      changed = false;
      notify();
    }
    return result;
  }

  function writeEncoded(table: Table, key: string, text: string, value?: unknown): void {
    runAutoCommit(() => {
      const previousText = rows(table).get(key);
      if (previousText === text) return;
      admit(table, key, text);
      log({ table, key, text: previousText });
      apply(table, key, text, value);
    });
  }

  return {
    read<T>(table: Table, key: string): T | undefined {
      const text = rows(table).get(key);
      if (text === undefined) return undefined;
      rowReads += 1;
      return parsed(table, key, text) as T;
    },
    peek<T>(table: Table, key: string): T | undefined {
      const text = rows(table).get(key);
      return text === undefined ? undefined : (parsed(table, key, text) as T);
    },
    text: (table, key) => rows(table).get(key),
    has: (table, key) => rows(table).has(key),
    write(table, key, value) {
      const text = JSON.stringify(value);
      if (typeof text !== "string") throw new TaskError("INVALID_TRANSACTION", { message: `row ${table}/${key} has no JSON form` });
      writeEncoded(table, key, text, value);
    },
    writeText(table, key, text) {
      writeEncoded(table, key, text);
    },
    remove(table, key) {
      return runAutoCommit(() => {
        const previousText = rows(table).get(key);
        if (previousText === undefined) return false;
        log({ table, key, text: previousText });
        apply(table, key, undefined);
        return true;
      });
    },
    keys: (table) => rows(table).keys(),
    size: (table) => rows(table).size,
    logUndo: (undo) => log(undo),
    transaction,
    inTransaction: () => frames.length > 0,
    onCommit(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    clear() {
      if (frames.length > 0) throw new TaskError("INVALID_TRANSACTION", { message: "clear() is not allowed inside a transaction" });
      for (const map of tables.values()) map.clear();
      cache.clear();
      records = 0;
      encodedBytes = 0;
      cachedBytes = 0;
      notify();
    },
    stats: () => ({
      records,
      encodedBytes,
      cachedBytes,
      maxRecords: options.maxRecords,
      maxEncodedBytes: options.maxEncodedBytes,
      rowReads,
      rowParses,
    }),
  };
}
