/**
 * The trust of a pi-tasks home directory: its identity (`identity.json`, created on first use) and
 * the peers it paired with (`peers.json`, re-read when the file changes). Every process using the
 * same home is the same identity. The Pi extension adds the pairing dialog and PI_TASKS_TRUST.
 */
import type { TrustOptions } from "./trust.ts";
import { ensureIdentity } from "../trust/identity.ts";
import { createPeerBook } from "../trust/peers.ts";

export type HomeTrustOptions = Pick<TrustOptions, "acceptUnsigned" | "claimedName" | "decideUnknown">;

export function homeTrust(home: string, options: HomeTrustOptions = {}): TrustOptions {
  const { identity } = ensureIdentity(home);
  const book = createPeerBook(home);
  return { ...options, identity, peerName: (key) => book.lookup(key)?.name };
}
