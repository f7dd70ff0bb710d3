/**
 * Sealing: every task event's content is encrypted to its recipient, so a relay (or a Redis behind
 * it) sees ids, sizes and timing but no task text. `node:crypto` only.
 *
 * - Each identity has an X25519 seal key, derived from its Ed25519 key (HKDF-SHA256 of the
 *   Ed25519 seed; the seed framed as PKCS#8 for `createPrivateKey`) and bound to it by an Ed25519
 *   signature over `SEAL_DOMAIN ‖ NUL ‖ seal public key` — what a peer checks before it believes a
 *   seal key belongs to a signer.
 * - Two parties share one AES-256-GCM key: HKDF-SHA256 of their X25519 agreement, salted with
 *   `SEAL_DOMAIN`, over both seal public keys in sorted order. Either side derives it, so the sender
 *   can open what it sealed (to re-address it after a relay restart). It is derived once per peer
 *   (cached), not per envelope.
 * - A sealed payload is `{v, from, to, nonce, box}`: the two seal public keys, a random 12-byte
 *   nonce and the ciphertext with its tag (base64url). The associated data binds the box to the
 *   envelope's task id and kind, which stay in the clear beside it.
 *
 * Sealing happens after signing (the signature covers the plaintext and travels inside the box);
 * opening happens before the trust gate judges the signature (src/core/intake.ts).
 */
import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from "node:crypto";
import { TaskError } from "../protocol/errors.ts";
import { sealKeyBytes, sealNonceBytes, sealSharedKeyCacheEntries, sealTagBytes } from "../protocol/limits.ts";
import { SEAL_DOMAIN } from "../protocol/names.ts";

export const SEAL_KEY_PREFIX = "x25519:";
const SEAL_KEY_PATTERN = /^x25519:[A-Za-z0-9_-]{43}$/;
/** PKCS#8 framing of a raw X25519 private key (RFC 8410): the DER header before its 32 bytes. */
const X25519_PKCS8_HEADER = Buffer.from("302e020100300506032b656e04220420", "hex");
const SEAL_VERSION = 1 as const;
const encoder = new TextEncoder();

/** A sealed payload as it travels. */
export interface SealedBox {
  readonly v: typeof SEAL_VERSION;
  /** The sender's seal public key. */
  readonly from: string;
  /** The recipient's seal public key. */
  readonly to: string;
  readonly nonce: string;
  readonly box: string;
}

/** An identity's seal key pair (the private half never leaves this object). */
export interface SealKeys {
  /** `x25519:` + base64url of the raw public key. */
  readonly publicKey: string;
  /** The shared AES key with a peer's seal public key (derived once, cached). */
  sharedKey(peerPublicKey: string): Buffer;
}

export function isSealKeyText(text: unknown): text is string {
  return (
    typeof text === "string" &&
    SEAL_KEY_PATTERN.test(text) &&
    Buffer.from(text.slice(SEAL_KEY_PREFIX.length), "base64url").toString("base64url") === text.slice(SEAL_KEY_PREFIX.length)
  );
}

function publicKeyObject(text: string): KeyObject {
  if (!isSealKeyText(text))
    throw new TaskError("SEAL_INVALID", { message: "not an X25519 seal key", details: { key: String(text).slice(0, 80) } });
  return createPublicKey({ key: { kty: "OKP", crv: "X25519", x: text.slice(SEAL_KEY_PREFIX.length) }, format: "jwk" });
}

/** The seal keys of an Ed25519 private key (deterministic: the same identity always has the same seal key). */
export function deriveSealKeys(ed25519Seed: Buffer): SealKeys {
  const seed = Buffer.from(hkdfSync("sha256", ed25519Seed, SEAL_DOMAIN, "x25519", sealKeyBytes));
  const privateKey = createPrivateKey({ key: Buffer.concat([X25519_PKCS8_HEADER, seed]), format: "der", type: "pkcs8" });
  const publicKey = `${SEAL_KEY_PREFIX}${(createPublicKey(privateKey).export({ format: "jwk" }) as { x: string }).x}`;
  const shared = new Map<string, Buffer>();
  return {
    publicKey,
    sharedKey(peer) {
      const cached = shared.get(peer);
      if (cached !== undefined) return cached;
      const secret = diffieHellman({ privateKey, publicKey: publicKeyObject(peer) });
      const [first, second] = [publicKey, peer].sort();
      const key = Buffer.from(hkdfSync("sha256", secret, SEAL_DOMAIN, `${first}\u0000${second}`, sealKeyBytes));
      if (shared.size >= sealSharedKeyCacheEntries) shared.delete(shared.keys().next().value!);
      shared.set(peer, key);
      return key;
    },
  };
}

/** The bytes an identity signs to bind its seal key to itself. */
export function sealBindingBytes(sealPublicKey: string): Uint8Array {
  return encoder.encode(`${SEAL_DOMAIN}\u0000${sealPublicKey}`);
}

function associatedData(taskId: string, kind: string): Buffer {
  return Buffer.from(`${SEAL_DOMAIN}\u0000${taskId}\u0000${kind}`);
}

/** Seals `plaintext` (canonical JSON) from `keys` to the peer's seal key, for an envelope of `taskId` and `kind`. */
export function seal(keys: SealKeys, peer: string, taskId: string, kind: string, plaintext: string): SealedBox {
  const nonce = randomBytes(sealNonceBytes);
  const cipher = createCipheriv("aes-256-gcm", keys.sharedKey(peer), nonce);
  cipher.setAAD(associatedData(taskId, kind));
  const box = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return { v: SEAL_VERSION, from: keys.publicKey, to: peer, nonce: nonce.toString("base64url"), box: box.toString("base64url") };
}

/**
 * Opens a box sealed to `keys` (or by `keys`: the sender can open its own). Throws `SEAL_INVALID`
 * when it is not for this key, or does not authenticate (altered, or sealed for another task id or kind).
 */
export function open(keys: SealKeys, sealed: SealedBox, taskId: string, kind: string): string {
  const peer = sealed.to === keys.publicKey ? sealed.from : sealed.from === keys.publicKey ? sealed.to : undefined;
  if (peer === undefined)
    throw new TaskError("SEAL_INVALID", { message: "the envelope is sealed for another key", details: { to: sealed.to } });
  const bytes = Buffer.from(sealed.box, "base64url");
  if (bytes.length < sealTagBytes) throw new TaskError("SEAL_INVALID", { message: "the sealed box is too short" });
  try {
    const decipher = createDecipheriv("aes-256-gcm", keys.sharedKey(peer), Buffer.from(sealed.nonce, "base64url"));
    decipher.setAAD(associatedData(taskId, kind));
    decipher.setAuthTag(bytes.subarray(bytes.length - sealTagBytes));
    return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - sealTagBytes)), decipher.final()]).toString("utf8");
  } catch (error) {
    if (error instanceof TaskError) throw error;
    throw new TaskError("SEAL_INVALID", {
      message: "the sealed box does not authenticate (altered, or not for this task)",
      details: { problem: (error as Error).message },
    });
  }
}
