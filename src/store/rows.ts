/**
 * The row engine under the TaskStore: tables of immutable encoded rows, a parse-once cache of
 * deep-frozen values, lower-only capacity admission, and synchronous transactions whose undo log
 * restores rows, indexes (through the `apply` hook) and counters.
 */
import { TaskError } from "../protocol/errors.ts";
import { storeRecordOverheadBytes } from "../protocol/limits.ts";
import { deepFreeze } from "./freeze.ts";

export const TABLES = [
  "task",
  "event",
  "outbox",
  "quarantine",
  "intent",
  "operation",
  "delivery",
  "checkpoint",
  "local",
  "evidence",
  "cooldown",
  "rotation",
] as const;
export type TableName = (typeof TABLES)[number];

/** Bytes one record is charged: its encoded text, its key and a fixed overhead. */
export function encodedRecordBytes(key: string, text: string): number {
  return Buffer.byteLength(text, "utf8") + Buffer.byteLength(key, "utf8") + storeRecordOverheadBytes;
}

/** Called for every row change (also on rollback), with the old and new values. */
export type ApplyHook = (table: TableName, key: string, previous: unknown, next: unknown) => void;

export interface RowEngineOptions {
  readonly maxRecords: number;
  readonly maxEncodedBytes: number;
  readonly apply: ApplyHook;
}

export interface RowStats {
  readonly records: number;
  readonly encodedBytes: number;
  readonly maxRecords: number;
  readonly maxEncodedBytes: number;
  /** Rows read through the public read path (indexed reads touch only what they need). */
  readonly rowReads: number;
  /** Rows parsed from text (each row at most once until it changes). */
  readonly rowParses: number;
}

type UndoEntry = { readonly table: TableName; readonly key: string; readonly text: string | undefined } | (() => void);

interface CachedValue {
  readonly text: string;
  readonly value: unknown;
}

export interface RowEngine {
  read<T>(table: TableName, key: string): T | undefined;
  peek<T>(table: TableName, key: string): T | undefined;
  has(table: TableName, key: string): boolean;
  write(table: TableName, key: string, value: unknown): void;
  remove(table: TableName, key: string): boolean;
  keys(table: TableName): IterableIterator<string>;
  size(table: TableName): number;
  /** Registers an undo closure for state kept outside rows (counters). */
  logUndo(undo: () => void): void;
  transaction<T>(fn: () => T): T;
  inTransaction(): boolean;
  onCommit(listener: () => void): () => void;
  /** Drops every row and notifies listeners; indexes are reset by the caller's `apply` owner. Not allowed inside a transaction. */
  clear(): void;
  stats(): RowStats;
}

function isPromiseLike(value: unknown): boolean {
  return (typeof value === "object" || typeof value === "function") && value !== null && typeof (value as { then?: unknown }).then === "function";
}

export function createRowEngine(options: RowEngineOptions): RowEngine {
  const tables = new Map<TableName, Map<string, string>>(TABLES.map((name) => [name, new Map()]));
  const cache = new Map<string, CachedValue>();
  const frames: UndoEntry[][] = [];
  const listeners = new Set<() => void>();
  let records = 0;
  let encodedBytes = 0;
  let rowReads = 0;
  let rowParses = 0;
  let changed = false;

  function rows(table: TableName): Map<string, string> {
    const found = tables.get(table);
    if (found === undefined) throw new TaskError("INVALID_TRANSACTION", { message: `unknown table ${table}` });
    return found;
  }

  function cacheKey(table: TableName, key: string): string {
    return `${table}\u0000${key}`;
  }

  function parsed(table: TableName, key: string, text: string): unknown {
    const slot = cacheKey(table, key);
    const cached = cache.get(slot);
    if (cached !== undefined && cached.text === text) return cached.value;
    rowParses += 1;
    const value = deepFreeze(JSON.parse(text) as unknown);
    cache.set(slot, { text, value });
    return value;
  }

  /** Sets or deletes one row, keeping counters, cache and indexes in step. No logging. */
  function apply(table: TableName, key: string, text: string | undefined, nextValue?: unknown): void {
    const map = rows(table);
    const previousText = map.get(key);
    const previousValue = previousText === undefined ? undefined : parsed(table, key, previousText);
    if (previousText !== undefined) {
      records -= 1;
      encodedBytes -= encodedRecordBytes(key, previousText);
      map.delete(key);
      cache.delete(cacheKey(table, key));
    }
    if (text !== undefined) {
      records += 1;
      encodedBytes += encodedRecordBytes(key, text);
      map.set(key, text);
    }
    const next = text === undefined ? undefined : (nextValue ?? JSON.parse(text));
    options.apply(table, key, previousValue, next);
  }

  function log(entry: UndoEntry): void {
    const frame = frames.at(-1);
    if (frame !== undefined) frame.push(entry);
    changed = true;
  }

  function admit(table: TableName, key: string, text: string): void {
    const previousText = rows(table).get(key);
    const nextRecords = records + (previousText === undefined ? 1 : 0);
    const nextBytes =
      encodedBytes - (previousText === undefined ? 0 : encodedRecordBytes(key, previousText)) + encodedRecordBytes(key, text);
    if (nextRecords > options.maxRecords || nextBytes > options.maxEncodedBytes) {
      throw new TaskError("TASK_CAPACITY", {
        details: {
          table,
          records,
          maxRecords: options.maxRecords,
          encodedBytes,
          maxEncodedBytes: options.maxEncodedBytes,
          requiredRecords: nextRecords,
          requiredBytes: nextBytes,
        },
      });
    }
  }

  function rollback(frame: UndoEntry[]): void {
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
    const frame: UndoEntry[] = [];
    frames.push(frame);
    let result: T;
    try {
      result = fn();
      if (isPromiseLike(result)) {
        // Keep the rejection from being reported as unhandled; the caller gets our error instead.
        (result as unknown as Promise<unknown>).then(undefined, () => undefined);
        throw new TaskError("INVALID_TRANSACTION", { message: "a store transaction must be synchronous (the callback returned a Promise)" });
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

  return {
    read<T>(table: TableName, key: string): T | undefined {
      const text = rows(table).get(key);
      if (text === undefined) return undefined;
      rowReads += 1;
      return parsed(table, key, text) as T;
    },
    peek<T>(table: TableName, key: string): T | undefined {
      const text = rows(table).get(key);
      return text === undefined ? undefined : (parsed(table, key, text) as T);
    },
    has(table, key) {
      return rows(table).has(key);
    },
    write(table, key, value) {
      const text = JSON.stringify(value);
      if (typeof text !== "string") throw new TaskError("INVALID_TRANSACTION", { message: `row ${table}/${key} has no JSON form` });
      runAutoCommit(() => {
        const previousText = rows(table).get(key);
        if (previousText === text) return;
        admit(table, key, text);
        log({ table, key, text: previousText });
        apply(table, key, text, value);
      });
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
    keys(table) {
      return rows(table).keys();
    },
    size(table) {
      return rows(table).size;
    },
    logUndo(undo) {
      log(undo);
    },
    transaction,
    inTransaction() {
      return frames.length > 0;
    },
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
      notify();
    },
    stats() {
      return {
        records,
        encodedBytes,
        maxRecords: options.maxRecords,
        maxEncodedBytes: options.maxEncodedBytes,
        rowReads,
        rowParses,
      };
    },
  };
}
