import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import fc from "fast-check";
import { CanonicalText, canonicalBytes, canonicalDigest, canonicalJson, sha256Hex } from "../../src/protocol/canonical-json.ts";
import { TaskError } from "../../src/protocol/errors.ts";

function rejection(value: unknown): TaskError {
  try {
    canonicalJson(value);
  } catch (error) {
    return error as TaskError;
  }
  throw new Error("expected a rejection");
}

describe("canonical JSON", () => {
  test("sorts keys in UTF-16 code unit order at every depth", () => {
    expect(canonicalJson({ b: 1, a: { z: true, B: null, é: "x", "\u{1F600}": 1, "\uFFFF": 2 } })).toBe(
      '{"a":{"B":null,"z":true,"é":"x","\u{1F600}":1,"\uFFFF":2},"b":1}',
    );
  });

  test("drops undefined members and writes array holes and undefined items as null", () => {
    const sparse = [1, , 3];
    expect(canonicalJson({ a: undefined, b: [undefined, 2], c: sparse })).toBe('{"b":[null,2],"c":[1,null,3]}');
  });

  test("serialises primitives like JSON.stringify", () => {
    expect(canonicalJson(['a\u2028"b', -0, 1e21, 0.1, false, null])).toBe(JSON.stringify(['a\u2028"b', -0, 1e21, 0.1, false, null]));
  });

  test("rejects non-finite numbers with the JSON Pointer of the offender", () => {
    const error = rejection({ a: [0, { "x/y": Number.NaN }] });
    expect(error.code).toBe("INVALID_REQUEST");
    expect(error.details.path).toBe("/a/1/x~1y");
    expect(rejection(Number.POSITIVE_INFINITY).details.path).toBe("");
  });

  test("rejects values with no JSON form", () => {
    expect(rejection(undefined).code).toBe("INVALID_REQUEST");
    expect(rejection({ f: () => 1 }).details.path).toBe("/f");
    expect(rejection({ n: 1n }).details.path).toBe("/n");
    expect(rejection({ d: new Date(0) }).details.path).toBe("/d");
  });

  test("is insensitive to key insertion order and equal to sorted JSON.stringify for plain data", () => {
    const json = fc.jsonValue({ noUnicodeString: false }).filter((value) => !JSON.stringify(value).includes("-0"));
    fc.assert(
      fc.property(json, (value) => {
        const text = canonicalJson(value);
        expect(canonicalJson(JSON.parse(text))).toBe(text);
        const reversed = JSON.parse(JSON.stringify(value), (_key, member) =>
          member !== null && typeof member === "object" && !Array.isArray(member)
            ? Object.fromEntries(Object.entries(member).reverse())
            : member,
        );
        expect(canonicalJson(reversed)).toBe(text);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
      }),
      { numRuns: 300, seed: 20261130 },
    );
  });

  test("a part canonicalized earlier is embedded as is, giving the same text", () => {
    const envelope = { b: 1, payload: { z: [1, { y: "é" }], a: null } };
    const payloadText = canonicalJson(envelope.payload);
    expect(canonicalJson({ ...envelope, payload: new CanonicalText(payloadText) })).toBe(canonicalJson(envelope));
  });

  test("byte length counts UTF-8", () => {
    expect(canonicalBytes({ a: "é" })).toBe(Buffer.byteLength('{"a":"é"}'));
  });

  test("SHA-256 digest matches an independent implementation", async () => {
    const value = { envelopeId: "e", payload: { b: 2, a: 1 }, createdAt: "2026-11-30T00:00:00.000Z" };
    const expected = createHash("sha256")
      .update('{"createdAt":"2026-11-30T00:00:00.000Z","envelopeId":"e","payload":{"a":1,"b":2}}')
      .digest("hex");
    expect(await canonicalDigest(value)).toBe(expected);
    expect(await sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  });

  test("a 1 ms change of createdAt changes the digest", async () => {
    const a = await canonicalDigest({ createdAt: "2026-11-30T00:00:00.000Z" });
    const b = await canonicalDigest({ createdAt: "2026-11-30T00:00:00.001Z" });
    expect(a).not.toBe(b);
  });
});
