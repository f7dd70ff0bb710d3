/**
 * Canonical JSON (src/protocol/canonical-json.ts) against a straightforward reference: the writer
 * skips the key sort when keys are in order, writes plain strings and numbers itself and builds the
 * error path only when rejecting; none of that may change a byte. Properties, over random values
 * with keys in any order, unicode (lone surrogates included), integer-like keys, nested and sparse
 * arrays, `undefined` members, null-prototype objects and embedded canonical texts:
 * - the text equals the reference's (sorted keys, `JSON.stringify` per primitive);
 * - a value the reference rejects is rejected with the same code, message and details.
 * And the sealed texts `sealSigned` writes directly are the canonical texts of what they hold.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { sealSigned } from "../../src/core/envelopes.ts";
import { CanonicalText, canonicalJson } from "../../src/protocol/canonical-json.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import type { EnvelopeKind } from "../../src/protocol/schemas.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { open } from "../../src/trust/sealing.ts";
import { signPayload } from "../../src/trust/signing.ts";

const RUNS = 1_000;
const SEED = 20270127;

/** The reference: every key list sorted, every primitive through `JSON.stringify`, the path built on the way down. */
function referenceJson(value: unknown): string {
  const fail = (path: string, problem: string): never => {
    throw new TaskError("INVALID_REQUEST", { details: { path, problem } });
  };
  const write = (item: unknown, path: string): string => {
    if (item instanceof CanonicalText) return item.text;
    if (typeof item === "string" || typeof item === "boolean") return JSON.stringify(item);
    if (typeof item === "number") return Number.isFinite(item) ? JSON.stringify(item) : fail(path, "non-finite number");
    if (typeof item !== "object") return fail(path, `unsupported ${typeof item}`);
    if (item === null) return "null";
    if (Array.isArray(item))
      return `[${Array.from({ length: item.length }, (_, index) => (item[index] === undefined ? "null" : write(item[index], `${path}/${index}`))).join(",")}]`;
    const prototype = Object.getPrototypeOf(item);
    if (prototype !== Object.prototype && prototype !== null) fail(path, "not a plain object");
    const record = item as Record<string, unknown>;
    const members = Object.keys(record)
      .sort()
      .filter((key) => record[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${write(record[key], `${path}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`)}`);
    return `{${members.join(",")}}`;
  };
  if (value === undefined) fail("", "undefined has no JSON form");
  return write(value, "");
}

type Outcome = { readonly text: string } | { readonly code: string; readonly message: string; readonly details: unknown };

function outcome(writer: (value: unknown) => string, value: unknown): Outcome {
  try {
    return { text: writer(value) };
  } catch (error) {
    if (!(error instanceof TaskError)) throw error;
    return { code: error.code, message: error.message, details: error.details };
  }
}

/** Code units `JSON.stringify` escapes or may escape, the ones beside them, and plain ones. */
const unit = fc.constantFrom(
  '"',
  "\\",
  "\u0000",
  "\b",
  "\n",
  "\u001f",
  " ",
  "\u007f",
  "\u2028",
  "\ud800",
  "\udfff",
  "~",
  "/",
  "a",
  "é",
  "\u{1F600}",
);
const text = fc.oneof(
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.string({ unit, maxLength: 12 }),
  fc.string({ unit: "grapheme", maxLength: 8 }),
  // Around the length where the writer hands strings to `JSON.stringify` whole.
  fc.string({ unit, minLength: 250, maxLength: 270 }),
  fc.string({ unit: "grapheme-ascii", minLength: 250, maxLength: 270 }),
);
const key = fc.oneof(text, fc.constantFrom("0", "1", "2", "10", "01", "-1", "4294967295", "1.5", "__proto__x", "a", "b", "B", "é"));
const number = fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constantFrom(-0, 1e21, 1e-7, 0.1, 2 ** 53));
/** Values the writer rejects, each with its own problem. */
const bad = fc.constantFrom<unknown>(
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  () => 1,
  1n,
  Symbol("s"),
  new Date(0),
  new Map(),
  new (class Point {})(),
  [1, 2].values(),
);

/** A record's canonical text to embed, or the record itself when it has none (it holds a rejected value). */
function embedded(record: Record<string, unknown>): unknown {
  try {
    return new CanonicalText(referenceJson(record));
  } catch {
    return record;
  }
}

const tree = (leaf: fc.Arbitrary<unknown>) =>
  fc.letrec<{ value: unknown }>((self) => ({
    value: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      leaf,
      fc.sparseArray(self("value"), { maxLength: 5 }),
      fc.array(fc.oneof(self("value"), fc.constant(undefined)), { maxLength: 5 }),
      fc.dictionary(key, fc.oneof(self("value"), fc.constant(undefined)), { maxKeys: 6 }),
      fc.dictionary(key, self("value"), { maxKeys: 4 }).map((record) => Object.assign(Object.create(null), record)),
      fc.dictionary(key, self("value"), { maxKeys: 4 }).map(embedded),
    ),
  })).value;

const good = fc.oneof(text, number, fc.boolean(), fc.constant(null));

describe("canonical JSON equals the reference", () => {
  test("the text of any JSON value, whatever the key order", () => {
    fc.assert(
      fc.property(tree(good), (value) => {
        expect(canonicalJson(value)).toBe(referenceJson(value));
      }),
      { numRuns: RUNS, seed: SEED },
    );
  });

  test("keys in order, reversed or integer-like give the reference's order", () => {
    fc.assert(
      fc.property(fc.uniqueArray(key, { maxLength: 12 }), fc.boolean(), (keys, sorted) => {
        const ordered = sorted ? [...keys].sort() : keys;
        const value = Object.fromEntries(ordered.map((name, index) => [name, index]));
        expect(canonicalJson(value)).toBe(referenceJson(value));
        expect(canonicalJson(Object.fromEntries(ordered.reverse().map((name, index) => [name, index])))).toBe(
          referenceJson(Object.fromEntries(ordered.map((name, index) => [name, index]))),
        );
      }),
      { numRuns: RUNS, seed: SEED },
    );
  });

  test("strings and numbers as JSON.stringify writes them", () => {
    fc.assert(
      fc.property(fc.oneof(text, key, number), (primitive) => {
        expect(canonicalJson(primitive)).toBe(JSON.stringify(primitive));
      }),
      { numRuns: RUNS * 5, seed: SEED },
    );
  });

  test("a rejected value: same code, message, path and problem", () => {
    fc.assert(
      fc.property(tree(fc.oneof({ weight: 4, arbitrary: good }, { weight: 1, arbitrary: bad })), (value) => {
        expect(outcome(canonicalJson, value)).toEqual(outcome(referenceJson, value));
      }),
      { numRuns: RUNS, seed: SEED },
    );
    for (const value of [undefined, Number.NaN, { "a/b": { "~": [0, () => 1] } }, [new Date(0)], { s: Symbol("s") }])
      expect(outcome(canonicalJson, value)).toEqual(outcome(referenceJson, value));
  });

  test("a cycle is not handled: it overflows the stack, as before", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(RangeError);
  });
});

describe("sealSigned writes canonical texts", () => {
  const sender = generateIdentity().identity;
  const receiver = generateIdentity().identity;
  const from = { relay: "relay", id: "a" };
  const to = { relay: "relay", id: "b" };

  test("the sealed payload and the content in its box are what canonicalJson writes of them", () => {
    const payload = fc.dictionary(key, tree(good), { maxKeys: 5 });
    const kind = fc.constantFrom<EnvelopeKind>("assignment", "intent", "canonical_event");
    const name = fc.option(fc.string({ unit, minLength: 1, maxLength: 20 }), { nil: undefined });
    fc.assert(
      fc.property(fc.uuid(), kind, payload, name, (taskId, k, inner, claimed) => {
        const payloadText = canonicalJson(inner);
        const options = { identity: sender, from, to, atMs: 1_800_000_000_000, ...(claimed === undefined ? {} : { name: claimed }) };
        const signature = signPayload({ taskId, kind: k, payload: inner }, options, payloadText);
        const text = sealSigned(sender, receiver.seal!().publicKey, taskId, k, payloadText, signature);
        const parsed = JSON.parse(text);
        expect(text).toBe(referenceJson({ taskId, kind: k, sealed: parsed.sealed }));
        expect(parsed.sealed.v).toBe(1);
        const content = open(receiver.seal!(), parsed.sealed, taskId, k);
        expect(content).toBe(referenceJson({ binding: sender.sealBinding!(), payload: new CanonicalText(payloadText), signature }));
      }),
      { numRuns: RUNS / 5, seed: SEED },
    );
  });
});
