/**
 * Signed task events (src/trust/signing.ts): a signature verifies for exactly the payload, signer,
 * time and endpoints it was made for. Property: changing any signed field by one character —
 * the key, the signed time, either endpoint, the signature itself, or any string anywhere in the
 * payload — makes verification fail.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import type { EnvelopeKind, SignatureBlock } from "../../src/protocol/schemas.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { type SignablePayload, signedBytes, factsOf, payloadDigest, signPayload, verifyPayload } from "../../src/trust/signing.ts";

const signer = generateIdentity().identity;
const other = generateIdentity().identity;
const RUNS = 300;

/** Every path to a string leaf of a JSON value. */
function stringPaths(value: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (typeof value === "string") return [path];
  if (Array.isArray(value)) return value.flatMap((item, index) => stringPaths(item, [...path, index]));
  if (typeof value === "object" && value !== null) return Object.entries(value).flatMap(([key, item]) => stringPaths(item, [...path, key]));
  return [];
}

/** `text` with the character at `index` (mod length) replaced by a different one. */
function changeOne(text: string, index: number, replacement: string): string {
  if (text.length === 0) return replacement;
  const at = index % text.length;
  const current = text[at]!;
  const next = replacement === current ? (current === "a" ? "b" : "a") : replacement;
  return `${text.slice(0, at)}${next}${text.slice(at + 1)}`;
}

function setAt(value: unknown, path: readonly (string | number)[], leaf: string): unknown {
  if (path.length === 0) return leaf;
  const [head, ...rest] = path;
  if (Array.isArray(value)) return value.map((item, index) => (index === head ? setAt(item, rest, leaf) : item));
  const record = value as Record<string, unknown>;
  return { ...record, [head!]: setAt(record[head!], rest, leaf) };
}

function getAt(value: unknown, path: readonly (string | number)[]): unknown {
  return path.reduce<unknown>((at, key) => (at as Record<string | number, unknown>)[key], value);
}

const endpoint = fc.record({ relay: fc.string({ minLength: 1, maxLength: 12 }), id: fc.uuid() });
const jsonPayload = fc.dictionary(
  fc.string({ minLength: 1, maxLength: 8 }),
  fc.oneof(fc.string({ maxLength: 24 }), fc.integer(), fc.boolean(), fc.array(fc.string({ maxLength: 8 }), { maxLength: 3 })),
  { maxKeys: 6 },
);
const kind = fc.constantFrom<EnvelopeKind>("assignment", "intent", "canonical_event");

/** A payload of each kind, shaped as the wire carries it, with random content. */
const signable = fc
  .record({ taskId: fc.uuid(), kind, id: fc.uuid(), type: fc.string({ minLength: 1, maxLength: 20 }), content: jsonPayload })
  .map(({ taskId, kind: k, id, type, content }): SignablePayload => {
    if (k === "assignment")
      return { taskId, kind: k, payload: { task: { taskId, text: "t" }, event: { eventId: id, type, payload: content } } };
    if (k === "intent") return { taskId, kind: k, payload: { intentId: id, taskId, type, payload: content } };
    return { taskId, kind: k, payload: { eventId: id, taskId, type, payload: content } };
  });

const blockFields = ["key", "at", "from.relay", "from.id", "to.relay", "to.id", "sig"] as const;

function mutateBlock(block: SignatureBlock, field: (typeof blockFields)[number], index: number, replacement: string): SignatureBlock {
  const [head, tail] = field.split(".") as [keyof SignatureBlock, string | undefined];
  if (tail === undefined) return { ...block, [head]: changeOne(String(block[head]), index, replacement) };
  const nested = block[head] as Record<string, string>;
  return { ...block, [head]: { ...nested, [tail]: changeOne(nested[tail]!, index, replacement) } };
}

const base64urlChar = fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".split(""));

describe("signed payloads", () => {
  test("a signature verifies for its payload, and the claimed name is not part of it", () => {
    fc.assert(
      fc.property(signable, endpoint, endpoint, (wire, from, to) => {
        const block = signPayload(wire, { identity: signer, from, to, atMs: Date.now(), name: "alice" });
        expect(verifyPayload(wire, block)).toBe(true);
        expect(verifyPayload(wire, { ...block, name: "mallory" })).toBe(true);
        const { name: _dropped, ...unnamed } = block;
        expect(verifyPayload(wire, unnamed)).toBe(true);
      }),
      { numRuns: 50 },
    );
  });

  test("property: changing any signed field of the block by one character fails verification", () => {
    fc.assert(
      fc.property(
        signable,
        endpoint,
        endpoint,
        fc.constantFrom(...blockFields),
        fc.nat(),
        base64urlChar,
        (wire, from, to, field, index, replacement) => {
          const block = signPayload(wire, { identity: signer, from, to, atMs: Date.now() });
          expect(verifyPayload(wire, mutateBlock(block, field, index, replacement))).toBe(false);
        },
      ),
      { numRuns: RUNS },
    );
  });

  test("property: changing any string of the payload (task id, kind, ids, types, content) by one character fails verification", () => {
    fc.assert(
      fc.property(
        signable,
        endpoint,
        endpoint,
        fc.nat(),
        fc.nat(),
        fc.string({ minLength: 1, maxLength: 1 }),
        (wire, from, to, pick, index, replacement) => {
          const block = signPayload(wire, { identity: signer, from, to, atMs: Date.now() });
          const paths = stringPaths(wire);
          const path = paths[pick % paths.length]!;
          const changed = setAt(wire, path, changeOne(String(getAt(wire, path)), index, replacement)) as SignablePayload;
          expect(verifyPayload(changed, block)).toBe(false);
        },
      ),
      { numRuns: RUNS },
    );
  });

  test("another key's signature, a signature over other bytes, or a non-canonical encoding does not verify", () => {
    const wire: SignablePayload = {
      taskId: "t",
      kind: "intent",
      payload: { intentId: "i", taskId: "t", type: "task.information", payload: { message: "hi" } },
    };
    const ends = { from: { relay: "r", id: "a" }, to: { relay: "r", id: "b" } };
    const block = signPayload(wire, { identity: signer, ...ends, atMs: 0 });
    expect(verifyPayload(wire, { ...block, key: other.publicKey })).toBe(false);
    const forged = Buffer.from(other.sign(signedBytes(factsOf(wire, block), payloadDigest(wire)))).toString("base64url");
    expect(verifyPayload(wire, { ...block, sig: forged })).toBe(false);
    // The last character of a 64-byte signature carries 2 unused bits: a variant decoding to the
    // same bytes is still refused, so one signature has one text.
    const last = block.sig.at(-1)!;
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const sibling = alphabet[(alphabet.indexOf(last) & ~3) + ((alphabet.indexOf(last) + 1) & 3)]!;
    const variant = `${block.sig.slice(0, -1)}${sibling}`;
    expect(Buffer.from(variant, "base64url").equals(Buffer.from(block.sig, "base64url"))).toBe(true);
    expect(verifyPayload(wire, { ...block, sig: variant })).toBe(false);
  });

  test("the signed bytes are domain-separated and length-prefixed: moving a boundary between fields changes them", () => {
    const wire: SignablePayload = { taskId: "ab", kind: "intent", payload: { intentId: "c", taskId: "ab", type: "t", payload: {} } };
    const ends = { from: { relay: "r", id: "x" }, to: { relay: "r", id: "y" } };
    const block = signPayload(wire, { identity: signer, ...ends, atMs: 0 });
    const bytes = Buffer.from(signedBytes(factsOf(wire, block), payloadDigest(wire)));
    expect(bytes.subarray(0, 12).toString("latin1")).toBe("pi-tasks-v1\u0000");
    const shifted = Buffer.from(signedBytes({ ...factsOf(wire, block), from: { relay: "rx", id: "" } }, payloadDigest(wire)));
    expect(shifted.equals(bytes)).toBe(false);
  });
});
