/**
 * Seeded ids for one run: while a run lasts, `crypto.randomUUID` (what the core, the relay and the
 * stores name tasks, events, envelopes and epochs with) draws from the seed, so two runs of one
 * seed name everything alike and order alike. Seal nonces and binding secrets stay random:
 * nothing is ordered by them (the sessions' keys come from the seed: world.ts).
 */
import type { SimRandom } from "./random.ts";

/** Bytes of a UUID. */
const UUID_BYTES = 16;

function uuidFrom(random: SimRandom): `${string}-${string}-${string}-${string}-${string}` {
  const bytes = Buffer.alloc(UUID_BYTES);
  for (let index = 0; index < UUID_BYTES; index += 1) bytes[index] = random.below(256);
  bytes[6] = (bytes[6]! & 0x0f) | 0x40; // version 4
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Makes `crypto.randomUUID` draw from `random` until the returned restore is called. */
export function seedIds(random: SimRandom): () => void {
  const original = globalThis.crypto.randomUUID;
  globalThis.crypto.randomUUID = () => uuidFrom(random);
  return () => {
    globalThis.crypto.randomUUID = original;
  };
}
