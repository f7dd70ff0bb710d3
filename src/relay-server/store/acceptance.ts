/**
 * Acceptance ids, as both stores make them: a keyed hash (HMAC-SHA-256) of the envelope id, written
 * as a UUID (version 8, RFC 9562 variant). The same id always gets the same one from one key, so a
 * resend is answered the first acceptance's id and no store keeps it; the key is the store's (the
 * memory store's own, the Redis state's beside its epoch).
 */
import { createHmac } from "node:crypto";
import { acceptanceKeyBytes, uuidBytes } from "../../protocol/limits.ts";

/** A UUID (version 8, RFC 9562 variant) from the first 16 bytes of a digest. */
function uuidFromDigest(digest: Uint8Array): string {
  const bytes = digest.subarray(0, uuidBytes);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = Buffer.from(bytes).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The acceptance id of `envelopeId` under `key`. */
export function acceptanceIdOf(key: Uint8Array | string, envelopeId: string): string {
  return uuidFromDigest(createHmac("sha256", key).update(envelopeId).digest());
}

/** A fresh acceptance key: `acceptanceKeyBytes` random bytes, hex (a memory store's own, or a new Redis state's). */
export function mintAcceptanceKey(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(acceptanceKeyBytes))).toString("hex");
}
