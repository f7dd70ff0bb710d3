/**
 * The row engine's parse-once cache: deep-frozen values of rows, oldest first, so a row read many
 * times is parsed once and every reader shares the same frozen value.
 *
 * The cache is charged against the same byte bound as the rows (each value at the size of its
 * text), and it is only a cache: a write that needs room drops the oldest values first, and a
 * value that finds no room is returned without being cached.
 */
import { deepFreeze } from "./freeze.ts";

export interface ParseCache {
  /** The value of a row's text, parsed once while it stays cached. */
  value(slot: string, text: string): unknown;
  /** Forgets a row's cached value. */
  drop(slot: string): void;
  /** Drops the oldest cached values until `needed` more bytes fit; false when even an empty cache is not enough. */
  makeRoom(needed: number): boolean;
  clear(): void;
  /** Bytes charged for the cached values. */
  bytes(): number;
  /** Rows parsed from text so far. */
  parses(): number;
}

interface CachedValue {
  readonly text: string;
  readonly value: unknown;
  readonly bytes: number;
}

/** `room()` is how many bytes the bound leaves beside the rows' encoded text. */
export function createParseCache(room: () => number): ParseCache {
  /** Parsed values by slot, oldest first (Map order). */
  const cache = new Map<string, CachedValue>();
  let cachedBytes = 0;
  let parses = 0;

  function drop(slot: string): void {
    const cached = cache.get(slot);
    if (cached === undefined) return;
    cache.delete(slot);
    cachedBytes -= cached.bytes;
  }

  function makeRoom(needed: number): boolean {
    for (const slot of cache.keys()) {
      if (cachedBytes + needed <= room()) break;
      drop(slot);
    }
    return cachedBytes + needed <= room();
  }

  function value(slot: string, text: string): unknown {
    const cached = cache.get(slot);
    if (cached !== undefined && cached.text === text) return cached.value;
    if (cached !== undefined) drop(slot);
    parses += 1;
    const parsed = deepFreeze(JSON.parse(text) as unknown);
    const bytes = Buffer.byteLength(text, "utf8");
    // Cached only while the bound has room for it (after dropping older cached values).
    if (makeRoom(bytes)) {
      cache.set(slot, { text, value: parsed, bytes });
      cachedBytes += bytes;
    }
    return parsed;
  }

  return {
    value,
    drop,
    makeRoom,
    clear() {
      cache.clear();
      cachedBytes = 0;
    },
    bytes: () => cachedBytes,
    parses: () => parses,
  };
}
