/**
 * The row engine's transactions: nested frames of undo entries, merged into the parent frame on
 * success and undone newest first on a throw, so a failed step never leaves half its changes.
 * An entry is either a row's previous text (put back through `restore`, which also restores the
 * indexes) or a closure for state kept outside rows (counters). Listeners hear about each
 * outermost commit that changed something, never from inside a transaction.
 */
import { TaskError } from "../protocol/errors.ts";

export type UndoEntry<Table extends string> =
  | { readonly table: Table; readonly key: string; readonly text: string | undefined }
  | (() => void);

export interface Journal<Table extends string> {
  /** Records how to undo one change (and that something changed). */
  log(entry: UndoEntry<Table>): void;
  transaction<T>(fn: () => T): T;
  /** Runs `fn` inside the current transaction, or as its own when there is none. */
  autoCommit<T>(fn: () => T): T;
  inTransaction(): boolean;
  onCommit(listener: () => void): () => void;
  /** Calls every listener now. */
  notify(): void;
}

function isPromiseLike(value: unknown): boolean {
  return (
    (typeof value === "object" || typeof value === "function") && value !== null && typeof (value as { then?: unknown }).then === "function"
  );
}

/** Returns a transaction's result, refusing a Promise: a transaction must be synchronous. */
function synchronous<T>(result: T): T {
  if (!isPromiseLike(result)) return result;
  // Keep the rejection from being reported as unhandled; the caller gets our error instead.
  (result as unknown as Promise<unknown>).then(undefined, () => undefined);
  throw new TaskError("INVALID_TRANSACTION", { message: "a store transaction must be synchronous (the callback returned a Promise)" });
}

function notifyAll(listeners: ReadonlySet<() => void>): void {
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

export function createJournal<Table extends string>(
  restore: (table: Table, key: string, text: string | undefined) => void,
): Journal<Table> {
  const frames: UndoEntry<Table>[][] = [];
  const listeners = new Set<() => void>();
  let changed = false;

  function rollback(frame: readonly UndoEntry<Table>[]): void {
    for (let index = frame.length - 1; index >= 0; index -= 1) {
      const entry = frame[index]!;
      if (typeof entry === "function") entry();
      else restore(entry.table, entry.key, entry.text);
    }
  }

  function transaction<T>(fn: () => T): T {
    const outermost = frames.length === 0;
    if (outermost) changed = false;
    const frame: UndoEntry<Table>[] = [];
    frames.push(frame);
    let result: T;
    try {
      result = synchronous(fn());
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
      notifyAll(listeners);
    }
    return result;
  }

  return {
    log(entry) {
      frames.at(-1)?.push(entry);
      changed = true;
    },
    transaction,
    autoCommit: (fn) => (frames.length > 0 ? fn() : transaction(fn)),
    inTransaction: () => frames.length > 0,
    onCommit(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    notify: () => notifyAll(listeners),
  };
}
