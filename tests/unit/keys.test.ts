/**
 * Ed25519 keys (src/trust/keys.ts): a public key has exactly one text (`ed25519:` and the canonical
 * base64url of 32 bytes), its fingerprint is the documented digest, a stored private key must be
 * Ed25519, and verification answers false — never throws, never accepts — for anything malformed.
 */
import { describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import {
  fingerprintOf,
  generateIdentity,
  identityFromPrivateKey,
  isPublicKeyText,
  PUBLIC_KEY_PREFIX,
  parsePublicKey,
  verifySignature,
} from "../../src/trust/keys.ts";
import { thrown } from "../../testkit/async.ts";

/** PKCS#8 framing of a raw Ed25519 seed (RFC 8410). */
const ED25519_PKCS8_HEADER = "302e020100300506032b657004220420";
/** The identity of a 32-byte seed of 7s (tests/unit/signing-vectors.test.ts uses it too). */
const fixed = identityFromPrivateKey(Buffer.concat([Buffer.from(ED25519_PKCS8_HEADER, "hex"), Buffer.alloc(32, 7)]).toString("base64url"));
const KEY = "ed25519:6kpsY-KcUgq-9VB7Ey7F-ZVHdq6-vnuSQh7qaRRG0iw";

/** The same 32 bytes spelled with other unused low bits in the last base64url character. */
function sibling(key: string): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const last = alphabet.indexOf(key.at(-1)!);
  return `${key.slice(0, -1)}${alphabet[(last & ~3) | ((last + 1) & 3)]}`;
}

describe("public key texts", () => {
  test("a key under any other prefix is INVALID_PEER_KEY, even with the right 43 characters after it", () => {
    // Guards keys.ts rawPublicKey: PUBLIC_KEY_PATTERN (the `ed25519:` prefix and the length).
    const body = KEY.slice(PUBLIC_KEY_PREFIX.length);
    for (const bad of [`x25519:${body}`, `ED25519:${body}`, `ed25518:${body}`, `ed25519:${body}A`, `ed25519:${body.slice(1)}`]) {
      expect({ bad, code: thrown(() => parsePublicKey(bad)).code }).toEqual({ bad, code: "INVALID_PEER_KEY" });
      expect({ bad, accepted: isPublicKeyText(bad) }).toEqual({ bad, accepted: false });
    }
    expect(parsePublicKey(KEY)).toBe(KEY);
  });

  test("a second spelling of the same 32 bytes is not a key text, and a valid signature does not verify under it", () => {
    // Guards keys.ts rawPublicKey: the canonical-encoding check (one text per key).
    const variant = sibling(KEY);
    expect(Buffer.from(variant.slice(PUBLIC_KEY_PREFIX.length), "base64url")).toEqual(
      Buffer.from(KEY.slice(PUBLIC_KEY_PREFIX.length), "base64url"),
    );
    expect(thrown(() => parsePublicKey(variant)).code).toBe("INVALID_PEER_KEY");
    expect(isPublicKeyText(variant)).toBe(false);
    const bytes = new TextEncoder().encode("signed by the fixed identity");
    const signature = fixed.sign(bytes);
    expect(verifySignature(KEY, bytes, signature)).toBe(true);
    expect(verifySignature(variant, bytes, signature)).toBe(false);
  });

  test("the fingerprint is the first 8 bytes of SHA-256 over the raw key, as four groups of four hex digits (known answer)", () => {
    // Guards keys.ts fingerprintOf: digest input (the raw key, not its text) and length.
    expect(fixed.publicKey).toBe(KEY);
    expect(fingerprintOf(KEY)).toBe("fe81:2c12:f3ab:4ce6");
    expect(fixed.fingerprint).toBe("fe81:2c12:f3ab:4ce6");
    expect(thrown(() => fingerprintOf(sibling(KEY))).code).toBe("INVALID_PEER_KEY");
  });
});

describe("stored private keys", () => {
  test("a private key of another type (X25519) is IDENTITY_INVALID naming the type, not an identity", () => {
    // Guards keys.ts identityFromPrivateKey: the Ed25519 type check.
    const x25519 = generateKeyPairSync("x25519").privateKey.export({ format: "der", type: "pkcs8" }).toString("base64url");
    const error = thrown(() => identityFromPrivateKey(x25519));
    expect(error.code).toBe("IDENTITY_INVALID");
    expect(error.details.problem).toBe("not an Ed25519 key (x25519)");
  });
});

describe("verifying signatures", () => {
  const signer = generateIdentity().identity;
  const bytes = new TextEncoder().encode("the bytes");
  const signature = signer.sign(bytes);

  test("a malformed key text is false, not a throw", () => {
    // Guards keys.ts verifySignature: the key-text check before the key is parsed.
    expect(verifySignature(signer.publicKey, bytes, signature)).toBe(true);
    for (const bad of [
      "",
      "ed25519:",
      "garbage",
      signer.publicKey.toUpperCase().replace("ED25519:", "ed25519:"),
      sibling(signer.publicKey),
    ]) {
      let answer: unknown;
      expect(() => {
        answer = verifySignature(bad, bytes, signature);
      }).not.toThrow();
      expect({ bad, answer }).toEqual({ bad, answer: false });
    }
  });

  test("a signature of the wrong length is false, even when it starts with the valid one", () => {
    // Guards keys.ts verifySignature: the signature length check.
    for (const bad of [signature.subarray(0, 63), Buffer.concat([signature, Buffer.alloc(1)]), new Uint8Array(0)]) {
      expect({ length: bad.length, answer: verifySignature(signer.publicKey, bytes, bad) }).toEqual({ length: bad.length, answer: false });
    }
  });

  test("another key's signature, or the signature of other bytes, is false", () => {
    // Guards keys.ts verifySignature: the answer is the verification's.
    const other = generateIdentity().identity;
    expect(verifySignature(other.publicKey, bytes, signature)).toBe(false);
    expect(verifySignature(signer.publicKey, new TextEncoder().encode("other bytes"), signature)).toBe(false);
  });
});
