/**
 * What every part's index is built from: the shape of an index definition (so the store can keep
 * each index in step with its table and recompute it from rows for invariant checks) and sorted
 * list edits that assert what they assume — an entry added is not there yet, one removed is there.
 */
import { invariant } from "./invariant.ts";

/** How one table's rows map to its index; defined by the part that owns the table. */
export interface TableIndex<State, Snapshot> {
  /** A fresh, empty index. */
  empty(): State;
  /** Applies one row change (also on rollback and when recomputing), with the parsed old and new rows. */
  apply(index: State, key: string, previous: unknown, next: unknown): void;
  /** The index's contents in a canonical form, for comparing with a recomputation. */
  snapshot(index: State): Snapshot;
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

export function insertSorted<T>(items: T[], item: T, compare: (a: T, b: T) => number, what: string): void {
  const index = lowerBound(items, item, compare);
  invariant(index >= items.length || compare(items[index]!, item) !== 0, `${what}: an entry added to the index is new`);
  items.splice(index, 0, item);
}

export function removeSorted<T>(items: T[], item: T, compare: (a: T, b: T) => number, what: string): void {
  const index = lowerBound(items, item, compare);
  invariant(index < items.length && compare(items[index]!, item) === 0, `${what}: an entry removed from the index is there`);
  items.splice(index, 1);
}

/** A map as a plain record with sorted keys and projected values (canonical for comparison). */
export function sortedRecord<V, P>(map: ReadonlyMap<string, V>, project: (value: V) => P): Record<string, P> {
  return Object.fromEntries([...map.keys()].sort().map((key) => [key, project(map.get(key)!)]));
}
