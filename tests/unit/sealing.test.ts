/**
 * Sealing (src/trust/sealing.ts) at its own level, between distinct identities: a box opens for
 * its two parties only, only under the task id AND the kind it was sealed for, and only unaltered
 * with its whole 16-byte tag; a seal key has one text. Each refusal is `SEAL_INVALID`.
 */
import { describe, expect, test } from "bun:test";
import { sealTagBytes } from "../../src/protocol/limits.ts";
import type { EnvelopeKind } from "../../src/protocol/schemas.ts";
import { deriveSealKeys, isSealKeyText, open, SEAL_KEY_PREFIX, type SealedBox, seal } from "../../src/trust/sealing.ts";
import { thrown } from "../../testkit/async.ts";

/** Seal keys of fixed seeds: three distinct parties. */
const alice = deriveSealKeys(Buffer.alloc(32, 1));
const bob = deriveSealKeys(Buffer.alloc(32, 2));
const carol = deriveSealKeys(Buffer.alloc(32, 3));

const TASK = "44444444-4444-4444-8444-444444444444";
const OTHER_TASK = "55555555-5555-4555-8555-555555555555";
const KINDS: readonly EnvelopeKind[] = ["assignment", "intent", "canonical_event"];
const TEXT = '{"payload":{"message":"for bob only"}}';

/** The box with `box` (ciphertext and tag) replaced by `bytes`. */
function withBox(sealed: SealedBox, bytes: Buffer): SealedBox {
  return { ...sealed, box: bytes.toString("base64url") };
}

/** `text` (base64url) with one bit flipped in byte `index` of what it encodes. */
function flipped(text: string, index: number): string {
  const bytes = Buffer.from(text, "base64url");
  bytes[index] = bytes[index]! ^ 0x01;
  return bytes.toString("base64url");
}

describe("who opens a box", () => {
  test("the recipient opens what another identity sealed to it, and so does the sender; nobody else", () => {
    // Guards sealing.ts open (which peer's shared key) and deriveSealKeys sharedKey (both sides derive one key).
    const sealed = seal(alice, bob.publicKey, TASK, "intent", TEXT);
    expect(sealed).toMatchObject({ v: 1, from: alice.publicKey, to: bob.publicKey });
    expect(open(bob, sealed, TASK, "intent")).toBe(TEXT);
    expect(open(alice, sealed, TASK, "intent")).toBe(TEXT);
    expect(thrown(() => open(carol, sealed, TASK, "intent")).code).toBe("SEAL_INVALID");
  });

  test("a box sealed for another key is refused as such, before any attempt to open it", () => {
    // Guards sealing.ts open: the "sealed for another key" check (neither `to` nor `from` is this key).
    const sealed = seal(alice, bob.publicKey, TASK, "intent", TEXT);
    const error = thrown(() => open(carol, sealed, TASK, "intent"));
    expect(error.code).toBe("SEAL_INVALID");
    expect(error.message).toContain("sealed for another key");
    expect(error.details).toEqual({ to: bob.publicKey });
  });

  test("re-addressing a box to a third key does not make it open there", () => {
    // Guards sealing.ts open: the key is the pair's, so naming carol in `to` gives carol the wrong key.
    const sealed = seal(alice, bob.publicKey, TASK, "intent", TEXT);
    expect(thrown(() => open(carol, { ...sealed, to: carol.publicKey }, TASK, "intent")).code).toBe("SEAL_INVALID");
  });
});

describe("what a box is bound to: the task id and the kind beside it", () => {
  for (const kind of KINDS) {
    test(`a box sealed as ${kind} opens only as ${kind} of its own task: another kind of the same task, or the same kind of another task, is SEAL_INVALID`, () => {
      // Guards sealing.ts associatedData: binds the task id AND the kind (seal and open).
      const sealed = seal(alice, bob.publicKey, TASK, kind, TEXT);
      expect(open(bob, sealed, TASK, kind)).toBe(TEXT);
      for (const other of KINDS.filter((candidate) => candidate !== kind)) {
        const error = thrown(() => open(bob, sealed, TASK, other));
        expect({ other, code: error.code, message: error.message }).toEqual({
          other,
          code: "SEAL_INVALID",
          message: expect.stringContaining("does not authenticate"),
        });
      }
      expect(thrown(() => open(bob, sealed, OTHER_TASK, kind)).code).toBe("SEAL_INVALID");
      // The sender is bound the same way.
      expect(thrown(() => open(alice, sealed, TASK, KINDS.find((candidate) => candidate !== kind)!)).code).toBe("SEAL_INVALID");
      expect(thrown(() => open(alice, sealed, OTHER_TASK, kind)).code).toBe("SEAL_INVALID");
    });
  }
});

describe("an altered or truncated box", () => {
  test("one flipped bit in the ciphertext, the tag or the nonce is SEAL_INVALID", () => {
    // Guards sealing.ts open: the AES-GCM tag is checked.
    const sealed = seal(alice, bob.publicKey, TASK, "intent", TEXT);
    const length = Buffer.from(sealed.box, "base64url").length;
    for (const altered of [
      { ...sealed, box: flipped(sealed.box, 0) },
      { ...sealed, box: flipped(sealed.box, length - 1) },
      { ...sealed, nonce: flipped(sealed.nonce, 0) },
    ]) {
      expect(thrown(() => open(bob, altered, TASK, "intent")).code).toBe("SEAL_INVALID");
    }
  });

  test("an empty text seals into a box of exactly one tag, which opens", () => {
    // Guards sealing.ts open: the too-short check refuses fewer than sealTagBytes, not exactly that many.
    const sealed = seal(alice, bob.publicKey, TASK, "intent", "");
    expect(Buffer.from(sealed.box, "base64url").length).toBe(sealTagBytes);
    expect(open(bob, sealed, TASK, "intent")).toBe("");
  });

  test("a tag cut short is refused as too short: a shorter GCM tag would be far easier to forge", () => {
    // Guards sealing.ts open: `bytes.length < sealTagBytes` (on Node a 4-byte prefix of the real tag would authenticate).
    const sealed = seal(alice, bob.publicKey, TASK, "intent", "");
    const tag = Buffer.from(sealed.box, "base64url");
    for (const length of [0, 4, 8, 12, sealTagBytes - 1]) {
      const error = thrown(() => open(bob, withBox(sealed, tag.subarray(0, length)), TASK, "intent"));
      expect({ length, code: error.code, message: error.message }).toEqual({
        length,
        code: "SEAL_INVALID",
        message: "the sealed box is too short",
      });
    }
  });
});

describe("seal key texts", () => {
  /** The same 32 bytes spelled with other unused low bits in the last base64url character. */
  function sibling(key: string): string {
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const last = alphabet.indexOf(key.at(-1)!);
    return `${key.slice(0, -1)}${alphabet[(last & ~3) | ((last + 1) & 3)]}`;
  }

  test("a seal key is `x25519:` and the one base64url text of 32 bytes; other spellings are not seal keys", () => {
    // Guards sealing.ts isSealKeyText: the pattern (prefix, length) and the canonical-encoding check.
    const key = bob.publicKey;
    expect(isSealKeyText(key)).toBe(true);
    const variant = sibling(key);
    expect(Buffer.from(variant.slice(SEAL_KEY_PREFIX.length), "base64url")).toEqual(
      Buffer.from(key.slice(SEAL_KEY_PREFIX.length), "base64url"),
    );
    for (const bad of [
      variant,
      key.replace("x25519:", "ed25519:"),
      key.replace("x25519:", "X25519:"),
      `${key}A`,
      key.slice(0, -1),
      undefined,
      7,
    ]) {
      expect({ bad, accepted: isSealKeyText(bad) }).toEqual({ bad, accepted: false });
    }
  });

  test("sealing to a key text that is not a seal key is SEAL_INVALID, also to another spelling of a real one", () => {
    // Guards sealing.ts publicKeyObject: the seal-key check before a shared key is derived.
    for (const bad of [sibling(bob.publicKey), `x25519:${"A".repeat(42)}`, "ed25519:nope"]) {
      const error = thrown(() => seal(alice, bad, TASK, "intent", TEXT));
      expect({ bad, code: error.code, message: error.message }).toEqual({ bad, code: "SEAL_INVALID", message: "not an X25519 seal key" });
    }
  });
});
