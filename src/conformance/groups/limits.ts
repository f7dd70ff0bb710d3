/** The wire limits (src/protocol/limits.ts) at their edges: the limit itself is accepted, one more is refused. */
import assert from "node:assert/strict";
import { canonicalBytes, utf8Bytes } from "../../protocol/canonical-json.ts";
import {
  KiB,
  defaultLeaseMs,
  maxLeaseMs,
  minLeaseMs,
  maxProtocolVersionsItems,
  maxRelayPayloadBytes,
  maxRequestBodyBytes,
  maxWireIdChars,
  minWireIdChars,
  maxReceivePageBytes,
  maxReceivePageItems,
  maxWatchWaitMs,
  minWatchWaitMs,
} from "../../protocol/limits.ts";
import { WIRE_PROTOCOL_VERSION } from "../../protocol/names.ts";
import { FEATURE_WATCH, RECEIVE_LIMIT } from "../../protocol/wire.ts";
import { above, atLeast, atMost, below, type ConformanceCheck, cursorsOf, equal, exactLength, idsOf, inBatches, inGroup } from "../kit.ts";
import { PROMPT_REPLY_MS } from "../timing.ts";
import { connectRequest, postBody, postJson, uniqueName } from "../wire-client.ts";

export const limitChecks: readonly ConformanceCheck[] = inGroup("limits at their edges", [
  {
    name: "payload canonical JSON of exactly maxRelayPayloadBytes is accepted, one byte more is 400",
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("payload-edge");
      const overhead = canonicalBytes({ d: "" });
      const exact = { d: "x".repeat(maxRelayPayloadBytes - overhead) };
      assert.equal(canonicalBytes(exact), maxRelayPayloadBytes);
      const { envelope } = await a.sendOk(b.endpoint, { payload: exact });
      const over = { d: "x".repeat(maxRelayPayloadBytes - overhead + 1) };
      assert.equal(canonicalBytes(over), maxRelayPayloadBytes + 1);
      expectError(await a.send(a.envelopeTo(b.endpoint, { payload: over })), "INVALID_REQUEST");
      // Bytes, not characters: two-byte characters push the same length over the limit.
      const pairs = Math.floor((maxRelayPayloadBytes - overhead) / 2);
      const wide = { d: "é".repeat(pairs) + "x".repeat(maxRelayPayloadBytes - overhead - 2 * pairs + 1) };
      assert.equal(canonicalBytes(wide), maxRelayPayloadBytes + 1);
      below(JSON.stringify(wide).length, maxRelayPayloadBytes);
      expectError(await a.send(a.envelopeTo(b.endpoint, { payload: wide })), "INVALID_REQUEST");
      assert.deepEqual(idsOf(await b.drain()), [envelope.envelopeId]);
    },
  },
  {
    name: "a request body of exactly maxRequestBodyBytes is read, one byte more is 413",
    run: async ({ baseUrl, expectError, expectValue, session }) => {
      const a = await session("body-edge");
      const request = JSON.stringify(a.request("health"));
      const exact = request + " ".repeat(maxRequestBodyBytes - utf8Bytes(request));
      assert.equal(utf8Bytes(exact), maxRequestBodyBytes);
      expectValue(await postBody(baseUrl, exact), "health");
      expectError(await postBody(baseUrl, `${exact} `), "INVALID_REQUEST", 413);
    },
  },
  {
    name: "leaseMs minLeaseMs and maxLeaseMs are accepted, 0 and maxLeaseMs + 1 are 400",
    run: async ({ baseUrl, expectError, expectErrorOf, expectValue }) => {
      for (const leaseMs of [minLeaseMs, maxLeaseMs]) {
        const before = Date.now();
        const reply = await postJson(
          baseUrl,
          connectRequest({ callerSession: uniqueName("lease"), generation: crypto.randomUUID(), leaseMs }),
        );
        const expires = Date.parse(expectValue(reply, "connected").leaseExpiresAt);
        atLeast(expires, before + leaseMs);
        atMost(expires, Date.now() + leaseMs);
      }
      for (const leaseMs of [0, maxLeaseMs + 1, -1, 1.5, "1000"]) {
        const refused = await postJson(baseUrl, {
          ...connectRequest({ callerSession: uniqueName("lease"), generation: crypto.randomUUID() }),
          leaseMs,
        });
        equal(refused.status, 400, JSON.stringify(leaseMs));
        expectError(refused, "INVALID_REQUEST");
      }
      // Wolfpack's relay takes `leaseMs: null` as absent (the default lease); ours refuses it (strict answers).
      const before = Date.now();
      const nullLease = await postJson(baseUrl, {
        ...connectRequest({ callerSession: uniqueName("lease"), generation: crypto.randomUUID() }),
        leaseMs: null,
      });
      if (nullLease.status !== 200) expectErrorOf(nullLease, ["INVALID_REQUEST"]);
      else {
        const expires = Date.parse(expectValue(nullLease, "connected").leaseExpiresAt);
        atLeast(expires, before + defaultLeaseMs, "leaseMs: null served with the default lease");
        atMost(expires, Date.now() + defaultLeaseMs, "leaseMs: null served with the default lease");
      }
    },
  },
  {
    name: "callerSession and generation of maxWireIdChars are accepted, one more is 400",
    run: async ({ baseUrl, expectError, expectErrorOf, expectValue, session }) => {
      const longName = exactLength(maxWireIdChars);
      const named = await session("long", { callerSession: longName });
      expectValue(await named.call("health"), "health");
      const longGeneration = await session("long-gen", { generation: exactLength(maxWireIdChars) });
      expectValue(await longGeneration.renew(), "connected");
      for (const fields of [
        { callerSession: exactLength(maxWireIdChars + 1), generation: crypto.randomUUID() },
        { callerSession: uniqueName("long"), generation: exactLength(maxWireIdChars + 1) },
        { callerSession: "".padEnd(minWireIdChars - 1, "x"), generation: crypto.randomUUID() },
        { callerSession: uniqueName("long"), generation: "".padEnd(minWireIdChars - 1, "x") },
      ]) {
        expectError(await postJson(baseUrl, connectRequest(fields)), "INVALID_REQUEST");
      }
      // The bound callerSession: Wolfpack's relay looks an over-long one up (404); ours refuses the field (strict answers).
      const overLong = await named.call("health", { callerSession: exactLength(maxWireIdChars + 1) });
      expectErrorOf(overLong, ["INVALID_REQUEST", "CALLER_NOT_FOUND"]);
    },
  },
  {
    name: "envelopeId of maxWireIdChars is accepted and acknowledged; one more is refused",
    run: async ({ expectError, expectValue, pair }) => {
      const [a, b] = await pair("long-id");
      const { envelope } = await a.sendOk(b.endpoint, { envelopeId: exactLength(maxWireIdChars) });
      assert.deepEqual(idsOf(await b.drain()), [envelope.envelopeId]);
      assert.equal(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate, false);
      // acknowledge: the envelopeId field itself is out of bounds → INVALID_REQUEST.
      expectError(await b.acknowledge(exactLength(maxWireIdChars + 1)), "INVALID_REQUEST");
      // send: an envelope with an out-of-bounds id is a malformed envelope → SOURCE_MISMATCH.
      expectError(await a.send(a.envelopeTo(b.endpoint, { envelopeId: exactLength(maxWireIdChars + 1) })), "SOURCE_MISMATCH");
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "protocolVersions must include 2 and hold 1..16 integers",
    run: async ({ baseUrl, expectError, expectValue }) => {
      const connectWith = (protocolVersions: unknown) =>
        postJson(baseUrl, {
          ...connectRequest({ callerSession: uniqueName("versions"), generation: crypto.randomUUID() }),
          protocolVersions,
        });
      const sixteen = [...Array.from({ length: maxProtocolVersionsItems - 1 }, (_, index) => index + 10), WIRE_PROTOCOL_VERSION];
      for (const versions of [[WIRE_PROTOCOL_VERSION], [1, WIRE_PROTOCOL_VERSION, 3], sixteen]) {
        expectValue(await connectWith(versions), "connected");
      }
      for (const versions of [
        [],
        [1],
        [3, 4],
        [...sixteen, 99],
        [`${WIRE_PROTOCOL_VERSION}`],
        [WIRE_PROTOCOL_VERSION + 0.5],
        WIRE_PROTOCOL_VERSION,
      ]) {
        const reply = await connectWith(versions);
        equal(reply.status, 400, JSON.stringify(versions));
        expectError(reply, "INVALID_REQUEST");
      }
    },
  },
  {
    name: "receive limit 1 and 50 are accepted",
    run: async ({ expectValue, session }) => {
      const a = await session("limit-edges");
      const sent = [];
      for (let index = 0; index < 3; index += 1) sent.push((await a.sendOk(a.endpoint)).envelope.envelopeId);
      const one = expectValue(await a.receive("0", RECEIVE_LIMIT.minimum), "page");
      assert.deepEqual(cursorsOf(one.deliveries), ["1"]);
      assert.equal(one.hasMore, true);
      assert.equal(one.nextCursor, "1");
      const fifty = expectValue(await a.receive("0", maxReceivePageItems), "page");
      assert.deepEqual(idsOf(fifty.deliveries), sent);
      assert.equal(fifty.hasMore, false);
      assert.equal(fifty.nextCursor, "3");
    },
  },
  {
    name: "a page holds at most maxReceivePageItems: exactly 50 queued → hasMore false; 51 → hasMore true at cursor 50",
    serial: true,
    run: async ({ pair }) => {
      const [a, b] = await pair("page-items");
      await inBatches(maxReceivePageItems, 8, (index) => a.sendOk(b.endpoint, { payload: { index } }));
      const full = await b.page("0");
      assert.equal(full.deliveries.length, maxReceivePageItems);
      assert.equal(full.hasMore, false);
      assert.equal(full.nextCursor, String(maxReceivePageItems));
      const { envelope: last } = await a.sendOk(b.endpoint);
      const cut = await b.page("0");
      assert.equal(cut.deliveries.length, maxReceivePageItems);
      assert.equal(cut.hasMore, true);
      assert.equal(cut.nextCursor, String(maxReceivePageItems));
      assert.equal(cut.nextCursor, cut.deliveries.at(-1).cursor);
      const rest = await b.page(cut.nextCursor);
      assert.deepEqual(cursorsOf(rest.deliveries), [String(maxReceivePageItems + 1)]);
      assert.deepEqual(idsOf(rest.deliveries), [last.envelopeId]);
      assert.equal(rest.hasMore, false);
    },
  },
  {
    name: "a page is cut at maxReceivePageBytes before 50 items, with hasMore true",
    serial: true,
    run: async ({ pair }) => {
      const [a, b] = await pair("page-bytes");
      const payload = { d: "x".repeat(40 * KiB) };
      const count = Math.ceil(maxReceivePageBytes / canonicalBytes(payload)) + 2;
      below(count, maxReceivePageItems);
      await inBatches(count, 4, () => a.sendOk(b.endpoint, { payload }));
      const first = await b.page("0");
      const rest = await b.page(first.nextCursor);
      const itemBytes = (delivery: unknown) => canonicalBytes(delivery);
      const used = first.deliveries.reduce((sum: number, delivery: unknown) => sum + itemBytes(delivery), 0);
      above(first.deliveries.length, 0);
      below(first.deliveries.length, count);
      assert.equal(first.hasMore, true);
      assert.equal(first.nextCursor, first.deliveries.at(-1).cursor);
      atMost(used, maxReceivePageBytes);
      // The cut is exact: the next item would not have fitted.
      above(used + itemBytes(rest.deliveries[0]), maxReceivePageBytes);
      const all = await b.drain();
      assert.equal(all.length, count);
    },
  },
  {
    name: "additions: watch waitMs 0 and maxWatchWaitMs are accepted, maxWatchWaitMs + 1 is 400",
    serial: true,
    feature: FEATURE_WATCH,
    run: async ({ expectError, expectValue, session }) => {
      const a = await session("watch-bounds");
      const idle = expectValue(await a.call("watch", { cursor: "0", waitMs: minWatchWaitMs }), "watch");
      assert.equal(idle.pending, false);
      await a.sendOk(a.endpoint);
      // With pending mail even the longest wait answers at once (the request deadline guards it).
      const longest = expectValue(await a.call("watch", { cursor: "0", waitMs: maxWatchWaitMs }, { timeoutMs: PROMPT_REPLY_MS }), "watch");
      assert.equal(longest.pending, true);
      for (const waitMs of [maxWatchWaitMs + 1, minWatchWaitMs - 1, 1.5, "100"]) {
        const reply = await a.call("watch", { cursor: "0", waitMs });
        equal(reply.status, 400, JSON.stringify(waitMs));
        expectError(reply, "INVALID_REQUEST");
      }
    },
  },
]);
