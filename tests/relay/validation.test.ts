/**
 * Our relay's request validation beyond the conformance suite, over real HTTP against the
 * CLI-started relay:
 * - the order of the checks: strict keys → profile → fields → binding → operation, so a bad field
 *   is reported as such even when the binding is stale (`RELAY_RESET`), unknown
 *   (`CALLER_NOT_FOUND`) or another caller's (`SOURCE_MISMATCH`);
 * - the `watch-v1` cursor (docs/wire.md, our additions), validated like the `receive` cursor (`INVALID_CURSOR`);
 * - a binding endpoint nobody registered is `REGISTRATION_EXPIRED` (the binding check before the
 *   owner check), not `SOURCE_MISMATCH`;
 * - an ACK frees the mailbox's own byte budget (it "frees its payload charge"), shown at the
 *   exact edge of `maxRelayMailboxBytes`.
 */
import { describe, expect, test } from "bun:test";
import { expectWireError, expectWireValue } from "../../src/conformance/kit.ts";
import {
  connectRequest,
  localEndpoint,
  postJson,
  uniqueName,
  type WireEnvelopeValue,
  type WireReply,
  WireSession,
} from "../../src/conformance/wire-client.ts";
import { canonicalBytes, utf8Bytes } from "../../src/protocol/canonical-json.ts";
import type { RegisteredErrorCode } from "../../src/protocol/errors.ts";
import {
  maxCursorDigits,
  maxRelayPayloadBytes,
  maxRequestBodyBytes,
  maxReceivePageItems,
  maxRelayActiveBytes,
  maxRelayMailboxBytes,
  maxRelayMailboxItems,
  maxRelaySenderMailboxBytes,
  minWatchWaitMs,
} from "../../src/protocol/limits.ts";
import { RELAY_ID, WIRE_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

const fixture = useRelayFixture();

const expectError = (reply: WireReply, code: RegisteredErrorCode) =>
  expectWireError(reply, code, { epoch: fixture.relay.epoch, requireEpoch: true });
const expectValue = (reply: WireReply, kind: string) => expectWireValue(reply, kind, fixture.relay.epoch);
const session = (label: string, options: Parameters<typeof WireSession.connect>[1] = {}) =>
  WireSession.connect(fixture.relay.url, { label, ...options });
const pair = (label: string) => Promise.all([session(`${label}-a`), session(`${label}-b`)]);

/** Runs `count` async jobs, at most `width` at a time, in index order. */
async function inBatches<T>(count: number, width: number, job: (index: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  for (let start = 0; start < count; start += width) {
    results.push(...(await Promise.all(Array.from({ length: Math.min(width, count - start) }, (_, offset) => job(start + offset)))));
  }
  return results;
}

/**
 * A bound request of `owner` with `fields`, sent with each broken binding in turn: a stale epoch,
 * a caller that never connected, and another live session's endpoint. Each must be refused with
 * `code` (the field error), not with the binding's own error.
 */
async function expectFieldErrorBeforeBinding(
  owner: WireSession,
  other: WireSession,
  operation: string,
  fields: Record<string, unknown>,
  code: RegisteredErrorCode,
) {
  const broken: Record<string, Record<string, unknown>> = {
    "stale epoch (RELAY_RESET)": { epoch: crypto.randomUUID() },
    "unknown caller (CALLER_NOT_FOUND)": { callerSession: uniqueName("ghost") },
    "another session's endpoint (SOURCE_MISMATCH)": { endpoint: other.endpoint },
    "an unregistered endpoint (REGISTRATION_EXPIRED)": { endpoint: localEndpoint() },
  };
  for (const [label, binding] of Object.entries(broken)) {
    const reply = await owner.call(operation, { ...fields, ...binding });
    expect(reply.body?.error?.code, `${operation} ${JSON.stringify(fields)} with ${label}`).toBe(code);
    expectError(reply, code);
  }
  // With an intact binding the same field error is reported too.
  expectError(await owner.call(operation, fields), code);
}

describe("fields are checked before the binding", () => {
  test.concurrent("resolve: a target id that is not a UUID is INVALID_REQUEST whatever the binding", async () => {
    const [a, b] = await pair("order-resolve");
    for (const target of [{ relay: RELAY_ID, id: "not-a-uuid" }, { relay: "another-relay", id: "x" }, { relay: RELAY_ID }, "x"]) {
      await expectFieldErrorBeforeBinding(a, b, "resolve", { target }, "INVALID_REQUEST");
    }
  });

  test.concurrent("receive: a malformed cursor or limit is INVALID_CURSOR whatever the binding", async () => {
    const [a, b] = await pair("order-receive");
    for (const fields of [
      { cursor: "01" },
      { cursor: 0 },
      { cursor: "1".repeat(maxCursorDigits + 1) },
      { cursor: "0", limit: 0 },
      { cursor: "0", limit: maxReceivePageItems + 1 },
      { cursor: "0", limit: "10" },
    ]) {
      await expectFieldErrorBeforeBinding(a, b, "receive", fields, "INVALID_CURSOR");
    }
    // A cursor above the highest assigned needs the mailbox: it is an operation check, after the binding.
    expectError(await a.call("receive", { cursor: "1", epoch: crypto.randomUUID() }), "RELAY_RESET");
    expectError(await a.call("receive", { cursor: "1" }), "INVALID_CURSOR");
  });

  test.concurrent("watch: a malformed cursor is INVALID_CURSOR whatever the binding", async () => {
    const [a, b] = await pair("order-watch");
    for (const cursor of ["x", "-1", 7, null]) {
      await expectFieldErrorBeforeBinding(a, b, "watch", { cursor, waitMs: minWatchWaitMs }, "INVALID_CURSOR");
    }
  });

  test.concurrent("connect: protocolVersions without 2 is INVALID_REQUEST even with a stale epoch", async () => {
    const base = connectRequest({
      callerSession: uniqueName("order-connect"),
      generation: crypto.randomUUID(),
      epoch: crypto.randomUUID(),
    });
    expectError(await postJson(fixture.relay.url, base), "RELAY_RESET");
    for (const protocolVersions of [[WIRE_PROTOCOL_VERSION + 1], [WIRE_PROTOCOL_VERSION - 1, WIRE_PROTOCOL_VERSION + 1]]) {
      expectError(await postJson(fixture.relay.url, { ...base, protocolVersions }), "INVALID_REQUEST");
    }
  });

  test.concurrent("the order stays strict keys → profile → fields: an unknown key beats a wrong profile beats a bad field", async () => {
    const [a] = await pair("order-keys");
    const badTarget = { target: { relay: RELAY_ID, id: "x" } };
    expectError(await a.call("resolve", { ...badTarget, profile: "durable-v2", bogus: 1 }), "INVALID_REQUEST");
    expectError(await a.call("resolve", { ...badTarget, profile: "durable-v2" }), "RELAY_PROFILE_REQUIRED");
    expectError(await a.call("receive", { cursor: "x", profile: "durable-v2" }), "RELAY_PROFILE_REQUIRED");
  });
});

describe("watch-v1 cursor", () => {
  test.concurrent("a watch cursor that is not a string is INVALID_CURSOR, as for receive", async () => {
    const a = await session("watch-cursor-type");
    for (const cursor of [0, 1, null, true, [], {}]) {
      const reply = await a.call("watch", { cursor, waitMs: minWatchWaitMs });
      expect(reply.status, JSON.stringify(cursor)).toBe(400);
      expectError(reply, "INVALID_CURSOR");
    }
    // A missing cursor is a missing required field.
    const { cursor: _cursor, ...withoutCursor } = a.request("watch", { cursor: "0", waitMs: minWatchWaitMs });
    expectError(await postJson(fixture.relay.url, withoutCursor), "INVALID_REQUEST");
    // And a good one still works.
    expect(expectValue(await a.call("watch", { cursor: "0", waitMs: minWatchWaitMs }), "watch").pending).toBe(false);
  });
});

describe("binding", () => {
  test.concurrent("an endpoint id nobody registered is REGISTRATION_EXPIRED for a known caller", async () => {
    const a = await session("unregistered-endpoint");
    for (const operation of ["health", "disconnect"]) {
      expectError(await a.call(operation, { endpoint: localEndpoint() }), "REGISTRATION_EXPIRED");
    }
    expectError(await a.call("receive", { cursor: "0", endpoint: localEndpoint() }), "REGISTRATION_EXPIRED");
    // The caller's own binding is untouched (the refused disconnect disconnected nothing).
    expectValue(await a.call("health"), "health");
  });
});

// ---------------------------------------------------------------------------------------------
// An ACK frees the mailbox's own budget
// ---------------------------------------------------------------------------------------------

describe("an ACK frees the mailbox's own budget", () => {
  test("bytes: a mailbox filled to exactly maxRelayMailboxBytes refuses more; an ACK admits an envelope of the freed size again", async () => {
    const [a, b] = await pair("ack-bytes");
    // Several senders fill it, each within its share of the mailbox (quotas-v1): the mailbox's own
    // budget is what refuses.
    const senders = [
      a,
      ...(await Promise.all(
        Array.from({ length: Math.ceil(maxRelayMailboxBytes / maxRelaySenderMailboxBytes) }, (_, index) => session(`ack-bytes-${index}`)),
      )),
    ];
    // The relay charges an envelope its canonical bytes. With a UUID envelopeId, UUID endpoint ids
    // and an ISO createdAt (always 24 characters) every envelope to b has the same overhead.
    const payloadOverhead = canonicalBytes({ d: "" });
    const envelopeOverhead = canonicalBytes(a.envelopeTo(b.endpoint, { payload: { d: "" } }));
    const sized = (bytes: number, from = a): WireEnvelopeValue =>
      from.envelopeTo(b.endpoint, { payload: { d: "x".repeat(bytes - envelopeOverhead) } });
    const largest = envelopeOverhead - payloadOverhead + maxRelayPayloadBytes;
    // Few, large envelopes whose sizes add up to the byte limit exactly.
    const count = Math.ceil(maxRelayMailboxBytes / largest);
    const base = Math.floor(maxRelayMailboxBytes / count);
    const sizes = Array.from({ length: count }, (_, index) => base + (index < maxRelayMailboxBytes - base * count ? 1 : 0));
    expect(sizes.reduce((sum, size) => sum + size, 0)).toBe(maxRelayMailboxBytes);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(largest);
    // The item budget is not what fills up, and every request stays within the body limit.
    expect(count).toBeLessThan(maxRelayMailboxItems);
    const sample = sized(Math.max(...sizes));
    expect(canonicalBytes(sample)).toBe(Math.max(...sizes));
    expect(canonicalBytes(sample.payload)).toBeLessThanOrEqual(maxRelayPayloadBytes);
    expect(utf8Bytes(JSON.stringify(a.request("send", { envelope: sample })))).toBeLessThanOrEqual(maxRequestBodyBytes);

    const sent = await inBatches(count, 8, async (index) => {
      const from = senders[index % senders.length]!;
      const envelope = sized(sizes[index]!, from);
      const reply = await from.send(envelope);
      expect(canonicalBytes(envelope)).toBe(sizes[index]!);
      expectValue(reply, "accepted");
      return envelope;
    });

    // Full to the byte: even the smallest envelope is refused, retryable, without retryAfterMs.
    const smallest = () => sized(envelopeOverhead);
    const refused = expectError(await a.send(smallest()), "RELAY_CAPACITY");
    expect(refused.retryAfterMs).toBeUndefined();
    // It is this mailbox's budget, not the relay-wide one.
    const store = expectValue(await a.call("health"), "health").store;
    expect(store.activeBytes + envelopeOverhead).toBeLessThanOrEqual(maxRelayActiveBytes);
    const other = await session("ack-bytes-other");
    expectValue(await a.send(a.envelopeTo(other.endpoint)), "accepted");

    // ACK one envelope: exactly its size fits again …
    const freed = sent[0]!;
    expect(expectValue(await b.acknowledge(freed.envelopeId), "acknowledged").duplicate).toBe(false);
    expectValue(await a.send(sized(canonicalBytes(freed))), "accepted");
    // … and no more than that.
    expectError(await a.send(smallest()), "RELAY_CAPACITY");
    const held = await b.drain();
    expect(held.length).toBe(count);
  });

  // The item count (maxRelayMailboxItems; an ACK makes room) is covered by the conformance test
  // "RELAY_CAPACITY: 503 retryable once a mailbox holds maxRelayMailboxItems …".
});
