/**
 * Ed25519 keys on `node:crypto` (synchronous, so a store transaction can sign): the text forms of
 * a public key and its fingerprint, an in-memory identity that signs, and verification with a
 * small cache of parsed public keys. No hand-written crypto.
 *
 * - Public key text: `ed25519:` + base64url (no padding) of the raw 32-byte key.
 * - Fingerprint: the first 8 bytes of SHA-256 over the raw key, as four groups of four lowercase
 *   hex digits joined by `:` (e.g. `3f2a:9c01:77be:d4e5`) — short enough to read aloud.
 * - Private key text: base64url of its PKCS#8 DER encoding (what identity.json stores).
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, sign, verify } from "node:crypto";
import { TaskError } from "../protocol/errors.ts";
import { verifyKeyCacheEntries } from "../protocol/limits.ts";
import { deriveSealKeys, type SealKeys, sealBindingBytes } from "./sealing.ts";

export const PUBLIC_KEY_PREFIX = "ed25519:";
const RAW_PUBLIC_KEY_BYTES = 32;
const SIGNATURE_BYTES = 64;
const FINGERPRINT_BYTES = 8;
const PUBLIC_KEY_PATTERN = /^ed25519:[A-Za-z0-9_-]{43}$/;

/** An identity that can sign: its public key text, fingerprint, and a synchronous signer. */
export interface Identity {
  readonly publicKey: string;
  readonly fingerprint: string;
  sign(bytes: Uint8Array): Uint8Array;
  /** Its X25519 seal keys, derived from this key (sealing.ts), made on first use. */
  readonly seal?: () => SealKeys;
  /** Its signature binding its seal key to it (base64url), made on first use. */
  readonly sealBinding?: () => string;
}

/** An identity with the text of its private key (for storing it). */
export interface GeneratedIdentity {
  readonly identity: Identity;
  readonly privateKeyText: string;
}

function rawPublicKey(text: string): Buffer {
  if (typeof text !== "string" || !PUBLIC_KEY_PATTERN.test(text))
    throw new TaskError("INVALID_PEER_KEY", { details: { key: String(text).slice(0, 80) } });
  const encoded = text.slice(PUBLIC_KEY_PREFIX.length);
  const raw = Buffer.from(encoded, "base64url");
  // One text per key: a non-canonical encoding (other unused low bits) is refused.
  if (raw.length !== RAW_PUBLIC_KEY_BYTES || raw.toString("base64url") !== encoded)
    throw new TaskError("INVALID_PEER_KEY", { details: { key: text.slice(0, 80) } });
  return raw;
}

/** Whether `text` is a well-formed public key text. */
export function isPublicKeyText(text: unknown): text is string {
  try {
    rawPublicKey(text as string);
    return true;
  } catch {
    return false;
  }
}

/** Parses a public key text (throws `INVALID_PEER_KEY`); the canonical text comes back unchanged. */
export function parsePublicKey(text: string): string {
  rawPublicKey(text);
  return text;
}

export function fingerprintOf(publicKey: string): string {
  const digest = createHash("sha256")
    .update(rawPublicKey(publicKey))
    .digest("hex")
    .slice(0, FINGERPRINT_BYTES * 2);
  return digest.match(/.{4}/g)!.join(":");
}

function publicKeyText(key: KeyObject): string {
  const jwk = key.export({ format: "jwk" }) as { x?: string };
  return `${PUBLIC_KEY_PREFIX}${jwk.x}`;
}

function identityOf(privateKey: KeyObject): Identity {
  const publicKey = publicKeyText(createPublicKey(privateKey));
  const signBytes = (bytes: Uint8Array) => new Uint8Array(sign(null, bytes, privateKey));
  let sealKeys: SealKeys | undefined;
  let binding: string | undefined;
  const seal = () => (sealKeys ??= deriveSealKeys(Buffer.from((privateKey.export({ format: "jwk" }) as { d: string }).d, "base64url")));
  return Object.freeze({
    publicKey,
    fingerprint: fingerprintOf(publicKey),
    sign: signBytes,
    seal,
    sealBinding: () => (binding ??= Buffer.from(signBytes(sealBindingBytes(seal().publicKey))).toString("base64url")),
  });
}

/** A fresh key pair (kept in memory unless the caller stores `privateKeyText`). */
export function generateIdentity(): GeneratedIdentity {
  const { privateKey } = generateKeyPairSync("ed25519");
  return { identity: identityOf(privateKey), privateKeyText: privateKey.export({ format: "der", type: "pkcs8" }).toString("base64url") };
}

/** The identity of a stored private key text (throws `IDENTITY_INVALID`). */
export function identityFromPrivateKey(privateKeyText: string): Identity {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: Buffer.from(privateKeyText, "base64url"), format: "der", type: "pkcs8" });
  } catch (error) {
    throw new TaskError("IDENTITY_INVALID", { details: { problem: error instanceof Error ? error.message : String(error) } });
  }
  if (key.asymmetricKeyType !== "ed25519")
    throw new TaskError("IDENTITY_INVALID", { details: { problem: `not an Ed25519 key (${key.asymmetricKeyType})` } });
  return identityOf(key);
}

/** Parsed public keys, oldest dropped first. */
const verifyKeys = new Map<string, KeyObject>();

function verifyKey(publicKey: string): KeyObject {
  const cached = verifyKeys.get(publicKey);
  if (cached !== undefined) return cached;
  const key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: rawPublicKey(publicKey).toString("base64url") }, format: "jwk" });
  if (verifyKeys.size >= verifyKeyCacheEntries) verifyKeys.delete(verifyKeys.keys().next().value!);
  verifyKeys.set(publicKey, key);
  return key;
}

/** Whether `signature` is `publicKey`'s signature of `bytes`; a malformed key or signature is false. */
export function verifySignature(publicKey: string, bytes: Uint8Array, signature: Uint8Array): boolean {
  if (signature.length !== SIGNATURE_BYTES || !isPublicKeyText(publicKey)) return false;
  return verify(null, bytes, verifyKey(publicKey), signature);
}
