/**
 * Known-answer vectors for what another implementation must reproduce byte for byte: the signed
 * bytes of docs/protocol.md ("Signatures and the trust gate"), the Ed25519 signature over them, and
 * the seal key and its binding (src/trust/sealing.ts). The identity is fixed (a 32-byte seed of 7s),
 * Ed25519 is deterministic, so every value here is exact.
 *
 * The expected bytes are assembled here from the documented layout — not by src/trust/signing.ts —
 * and the payload digest is the SHA-256 of the canonical JSON written out literally: a change to
 * the signed field list, its order, its framing or the digest input fails these tests.
 */
import { describe, expect, test } from "bun:test";
import { createHash, createPublicKey, verify } from "node:crypto";
import { factsOf, payloadDigest, signedBytes, signPayload, verifyPayload } from "../../src/trust/signing.ts";
import { identityFromPrivateKey } from "../../src/trust/keys.ts";

/** PKCS#8 framing of a raw Ed25519 seed (RFC 8410). */
const ED25519_PKCS8_HEADER = "302e020100300506032b657004220420";
const identity = identityFromPrivateKey(
  Buffer.concat([Buffer.from(ED25519_PKCS8_HEADER, "hex"), Buffer.alloc(32, 7)]).toString("base64url"),
);
const KEY = "ed25519:6kpsY-KcUgq-9VB7Ey7F-ZVHdq6-vnuSQh7qaRRG0iw";
const RELAY = "wolfpack-pi-tasks-v2";
const A = { relay: RELAY, id: "11111111-1111-4111-8111-111111111111" };
const B = { relay: RELAY, id: "22222222-2222-4222-8222-222222222222" };
const TASK_ID = "44444444-4444-4444-8444-444444444444";
const AT_MS = Date.UTC(2026, 11, 1, 12);
const AT = "2026-12-01T12:00:00.000Z";

/** The documented layout: "pi-tasks-v1" NUL, then each field as a 4-byte big-endian length and its UTF-8 bytes, then the 32-byte digest framed the same way. */
function documentedBytes(fields: readonly string[], canonicalPayloadText: string): Buffer {
  const framed = (bytes: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    return [length, bytes];
  };
  const digest = createHash("sha256").update(canonicalPayloadText, "utf8").digest();
  return Buffer.concat([
    Buffer.from("pi-tasks-v1\u0000", "utf8"),
    ...fields.flatMap((field) => framed(Buffer.from(field, "utf8"))),
    ...framed(digest),
  ]);
}

function verifiesUnder(key: string, bytes: Buffer, sig: string): boolean {
  const publicKey = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: key.slice("ed25519:".length) }, format: "jwk" });
  return verify(null, bytes, publicKey, Buffer.from(sig, "base64url"));
}

describe("signed bytes and signatures (known answers)", () => {
  test("the fixed identity's key", () => {
    expect(identity.publicKey).toBe(KEY);
  });

  test("an intent of generation 2: every documented field, in order, and its signature", () => {
    const intent = {
      intentId: "33333333-3333-4333-8333-333333333333",
      taskId: TASK_ID,
      type: "task.completed",
      payload: { summary: "done" },
      generation: 2,
    };
    const wire = { taskId: TASK_ID, kind: "intent" as const, payload: intent };
    const block = signPayload(wire, { identity, from: B, to: A, atMs: AT_MS });
    const canonical =
      '{"kind":"intent","payload":{"generation":2,"intentId":"33333333-3333-4333-8333-333333333333","payload":{"summary":"done"},"taskId":"44444444-4444-4444-8444-444444444444","type":"task.completed"},"taskId":"44444444-4444-4444-8444-444444444444"}';
    // key, from.relay, from.id, to.relay, to.id, taskId, kind, id, type, at, inReplyTo, supersedes, generation, lineage
    const expected = documentedBytes(
      [KEY, RELAY, B.id, RELAY, A.id, TASK_ID, "intent", intent.intentId, "task.completed", AT, "", "", "2", ""],
      canonical,
    );
    expect(Buffer.from(signedBytes(factsOf(wire, block), payloadDigest(wire))).toString("hex")).toBe(expected.toString("hex"));
    const SIG = "AAaugaaL5GJKNNyLZI5PFkuTjLT-5wAMnjDWQYbDg9_-eiWNy0MSWVFD0w-yBaKbvJnRhdhkSc0nthWDNeJJAw";
    expect(block).toEqual({ v: 1, key: KEY, at: AT, from: B, to: A, sig: SIG });
    expect(verifiesUnder(KEY, expected, SIG)).toBe(true);
    expect(verifyPayload(wire, block)).toBe(true);
  });

  test("a reassignment (generation 2, a lineage): the lineage is signed as its canonical JSON", () => {
    const lineage = {
      rootTaskId: "55555555-5555-4555-8555-555555555555",
      parentTaskId: "55555555-5555-4555-8555-555555555555",
      depth: 2,
      owner: { endpoint: A, key: KEY },
      chain: [A, B],
    };
    const task = {
      taskId: TASK_ID,
      protocolVersion: "pi-tasks/v2",
      origin: A,
      target: B,
      task: "count the files",
      createdAt: 1796126400000,
      expiresAt: 1796130000000,
      status: "active",
      generation: 2,
      lineage,
    };
    const previousTarget = { relay: RELAY, id: "77777777-7777-4777-8777-777777777777" };
    const event = {
      eventId: "66666666-6666-4666-8666-666666666666",
      taskId: TASK_ID,
      type: "task.reassigned",
      sequence: "3",
      source: A,
      target: B,
      occurredAt: 1796126400000,
      payload: { task: "count the files", previousTarget },
    };
    const wire = { taskId: TASK_ID, kind: "assignment" as const, payload: { task, event, history: [] } };
    const block = signPayload(wire, { identity, from: A, to: B, atMs: AT_MS });
    const endpoint = (id: string) => `{"id":"${id}","relay":"${RELAY}"}`;
    const lineageText = `{"chain":[${endpoint(A.id)},${endpoint(B.id)}],"depth":2,"owner":{"endpoint":${endpoint(A.id)},"key":"${KEY}"},"parentTaskId":"55555555-5555-4555-8555-555555555555","rootTaskId":"55555555-5555-4555-8555-555555555555"}`;
    const taskText = `{"createdAt":1796126400000,"expiresAt":1796130000000,"generation":2,"lineage":${lineageText},"origin":${endpoint(A.id)},"protocolVersion":"pi-tasks/v2","status":"active","target":${endpoint(B.id)},"task":"count the files","taskId":"${TASK_ID}"}`;
    const eventText = `{"eventId":"66666666-6666-4666-8666-666666666666","occurredAt":1796126400000,"payload":{"previousTarget":${endpoint(previousTarget.id)},"task":"count the files"},"sequence":"3","source":${endpoint(A.id)},"target":${endpoint(B.id)},"taskId":"${TASK_ID}","type":"task.reassigned"}`;
    const canonical = `{"kind":"assignment","payload":{"event":${eventText},"history":[],"task":${taskText}},"taskId":"${TASK_ID}"}`;
    const expected = documentedBytes(
      [KEY, RELAY, A.id, RELAY, B.id, TASK_ID, "assignment", event.eventId, "task.reassigned", AT, "", "", "2", lineageText],
      canonical,
    );
    expect(Buffer.from(signedBytes(factsOf(wire, block), payloadDigest(wire))).toString("hex")).toBe(expected.toString("hex"));
    const SIG = "72rZ7FxiH8TdZ-KBlmtIYUKQ0u0pa6i_pLLOf38lpOjjOc1myi7iUrR1MkSDyA090kR_vUKy8JayXEj4Tpu_Dg";
    expect(block.sig).toBe(SIG);
    expect(verifiesUnder(KEY, expected, SIG)).toBe(true);
  });
});

describe("what is signed of a canonical event and of a hello (known answers)", () => {
  test("a canonical event answering another: its event id, type and the inReplyTo inside its payload are signed", () => {
    // Guards signing.ts payloadFacts (canonical_event: eventId, type, payload.inReplyTo) and signedBytes.
    const ASKED = "99999999-9999-4999-8999-999999999999";
    const event = {
      eventId: "88888888-8888-4888-8888-888888888888",
      taskId: TASK_ID,
      type: "task.information",
      sequence: "4",
      occurredAt: 1796126400000,
      payload: { message: "an answer", inReplyTo: ASKED },
    };
    const wire = { taskId: TASK_ID, kind: "canonical_event" as const, payload: event };
    const block = signPayload(wire, { identity, from: A, to: B, atMs: AT_MS });
    const canonical = `{"kind":"canonical_event","payload":{"eventId":"${event.eventId}","occurredAt":1796126400000,"payload":{"inReplyTo":"${ASKED}","message":"an answer"},"sequence":"4","taskId":"${TASK_ID}","type":"task.information"},"taskId":"${TASK_ID}"}`;
    // key, from.relay, from.id, to.relay, to.id, taskId, kind, id, type, at, inReplyTo, supersedes, generation, lineage
    const expected = documentedBytes(
      [KEY, RELAY, A.id, RELAY, B.id, TASK_ID, "canonical_event", event.eventId, "task.information", AT, ASKED, "", "", ""],
      canonical,
    );
    expect(Buffer.from(signedBytes(factsOf(wire, block), payloadDigest(wire))).toString("hex")).toBe(expected.toString("hex"));
    expect(verifiesUnder(KEY, expected, block.sig)).toBe(true);
    expect(verifyPayload(wire, block)).toBe(true);
  });

  test("a hello answering an ask: its hello id (also its task id), the kind and type hello, and inReplyTo are signed", () => {
    // Guards signing.ts payloadFacts (hello: helloId, inReplyTo) and signedBytes.
    const HELLO_ID = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa";
    const ASK = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb";
    const seal = identity.seal!().publicKey;
    const binding = identity.sealBinding!();
    const hello = { helloId: HELLO_ID, inReplyTo: ASK, seal, binding };
    const wire = { taskId: HELLO_ID, kind: "hello" as const, payload: hello };
    const block = signPayload(wire, { identity, from: B, to: A, atMs: AT_MS });
    const canonical = `{"kind":"hello","payload":{"binding":"${binding}","helloId":"${HELLO_ID}","inReplyTo":"${ASK}","seal":"${seal}"},"taskId":"${HELLO_ID}"}`;
    const expected = documentedBytes([KEY, RELAY, B.id, RELAY, A.id, HELLO_ID, "hello", HELLO_ID, "hello", AT, ASK, "", "", ""], canonical);
    expect(Buffer.from(signedBytes(factsOf(wire, block), payloadDigest(wire))).toString("hex")).toBe(expected.toString("hex"));
    expect(verifiesUnder(KEY, expected, block.sig)).toBe(true);
    expect(verifyPayload(wire, block)).toBe(true);
  });
});

describe("seal keys (known answers)", () => {
  test("the seal key derived from the identity, and the identity's signature binding it", () => {
    const SEAL_KEY = "x25519:OM0W2QsXLLY0wSHxbRmGFnx67-LvmA_esZjcLOQIQ3c";
    expect(identity.seal!().publicKey).toBe(SEAL_KEY);
    const BINDING = "h4uKHsgJzWWT-hVvMsu5rrfHBZsQrvnCEySJYnoYtjyPgH3Wc5J7XfZNQVxPZ_i4CoZV2Tco5bBZST81QdkdDg";
    expect(identity.sealBinding!()).toBe(BINDING);
    // The binding is the identity's signature of "pi-tasks-seal-v1" NUL and the seal key's text.
    expect(verifiesUnder(KEY, Buffer.from(`pi-tasks-seal-v1\u0000${SEAL_KEY}`, "utf8"), BINDING)).toBe(true);
  });
});
