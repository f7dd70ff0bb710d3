/**
 * The relay's memory of relay-token ids (docs/security.md, "The relay secret"): each id is kept
 * until its token expires, so a token is accepted once. Bounded: full of unexpired ids, it refuses
 * the new token (the caller answers `RELAY_CAPACITY` with `retryAfterMs`) rather than forget an id
 * whose token could then be replayed.
 */
import { relayTokenReplayEntries } from "../protocol/limits.ts";

export type ReplayVerdict =
  | { readonly fresh: true }
  | { readonly fresh: false; readonly replayed: true }
  | { readonly fresh: false; readonly replayed: false; readonly retryAfterMs: number };

export interface TokenReplayCache {
  /** Records `jti` (kept until `expiresAtMs`): fresh, a replay, or no room. */
  remember(jti: string, expiresAtMs: number, nowMs: number): ReplayVerdict;
  size(): number;
}

export function createTokenReplayCache(capacity: number = relayTokenReplayEntries): TokenReplayCache {
  // Insertion order is nearly expiry order (every token lives as long): the sweep drops expired
  // ids from the front and stops at the first live one, so each request costs O(1) amortised.
  const seen = new Map<string, number>();
  function sweep(nowMs: number): void {
    for (const [jti, expiresAtMs] of seen) {
      if (expiresAtMs > nowMs) return;
      seen.delete(jti);
    }
  }
  return {
    remember(jti, expiresAtMs, nowMs) {
      sweep(nowMs);
      if (seen.has(jti)) return { fresh: false, replayed: true };
      if (seen.size >= capacity) {
        const oldest = seen.values().next().value ?? nowMs;
        return { fresh: false, replayed: false, retryAfterMs: Math.max(1, Math.ceil(oldest - nowMs)) };
      }
      seen.set(jti, expiresAtMs);
      return { fresh: true };
    },
    size: () => seen.size,
  };
}
