/** Each row of the error table (docs/wire.md) provoked and checked: status, code, `retryable`, epoch, and that nothing was admitted. */
import assert from "node:assert/strict";
import { utf8Bytes } from "../../protocol/canonical-json.ts";
import {
  maxEnvelopeAgeMs,
  maxEnvelopeFutureSkewMs,
  KiB,
  minLeaseMs,
  maxCursorDigits,
  maxRequestBodyBytes,
  maxReceivePageItems,
  relayBodyReadDeadlineMs,
  maxRelayMailboxItems,
  maxRelaySenderMailboxItems,
  minWatchWaitMs,
} from "../../protocol/limits.ts";
import { RELAY_ENDPOINT_PATH, RELAY_ID, RELAY_PROFILE, RELAY_PROFILE_PATH, WIRE_PROTOCOL_VERSION } from "../../protocol/names.ts";
import { FEATURE_WATCH, RECEIVE_LIMIT } from "../../protocol/wire.ts";
import { type ConformanceCheck, describeReply, equal, idsOf, inBatches, inGroup, isoOffset, sleep } from "../kit.ts";
import { EDGE_MARGIN_MS, TEST_SLACK_MS } from "../timing.ts";
import {
  connectRequest,
  getPath,
  getProfile,
  localEndpoint,
  makeEnvelope,
  openRawRequest,
  postBody,
  postJson,
  uniqueName,
  type WireEndpoint,
} from "../wire-client.ts";

export const errorTableChecks: readonly ConformanceCheck[] = inGroup("error table", [
  {
    name: "INVALID_REQUEST 408: a body not fully sent within relayBodyReadDeadlineMs",
    timeoutMs: relayBodyReadDeadlineMs + TEST_SLACK_MS,
    run: async ({ baseUrl, expectError }) => {
      const slow = openRawRequest(baseUrl, { contentLength: 4 * KiB, body: `{"operation":"health","profile":"${RELAY_PROFILE}"` });
      try {
        await slow.sent;
        const reply = await slow.reply;
        assert.notEqual(reply, undefined, "the relay closed the socket without a reply");
        expectError(reply!, "INVALID_REQUEST", 408);
        assert.equal(reply!.headers.get("connection"), "close");
      } finally {
        slow.close();
      }
    },
  },
  {
    name: "RELAY_RESET: 409 for a different epoch on every bound operation, nothing admitted",
    run: async ({ hasFeature, expectError, session }) => {
      const owner = await session("reset");
      const stale = crypto.randomUUID();
      const operations: Record<string, Record<string, unknown>> = {
        resolve: { target: owner.endpoint },
        send: { envelope: owner.envelopeTo(owner.endpoint) },
        receive: { cursor: "0" },
        acknowledge: { envelopeId: crypto.randomUUID() },
        health: {},
        disconnect: {},
        ...(hasFeature(FEATURE_WATCH) ? { watch: { cursor: "0", waitMs: minWatchWaitMs } } : {}),
      };
      for (const [operation, fields] of Object.entries(operations)) {
        const error = expectError(await owner.call(operation, { ...fields, epoch: stale }), "RELAY_RESET");
        equal(error.mayHaveBeenDelivered, true, operation);
      }
      // The binding is untouched: still connected, nothing was admitted.
      assert.deepEqual((await owner.page("0")).deliveries, []);
    },
  },
  {
    name: "ENVELOPE_CONFLICT: 409 for the same envelopeId with a changed payload",
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("conflict-payload");
      const { envelope } = await a.sendOk(b.endpoint, { payload: { version: 1 } });
      expectError(await a.send({ ...envelope, payload: { version: 2 } }), "ENVELOPE_CONFLICT");
      assert.deepEqual(
        (await b.drain()).map((delivery) => delivery.envelope),
        [envelope],
      );
    },
  },
  {
    name: "ENVELOPE_CONFLICT: 409 for the same envelopeId with createdAt off by 1 ms",
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("conflict-created");
      const { envelope } = await a.sendOk(b.endpoint);
      const shifted = new Date(Date.parse(envelope.createdAt) + 1).toISOString();
      assert.notEqual(shifted, envelope.createdAt);
      expectError(await a.send({ ...envelope, createdAt: shifted }), "ENVELOPE_CONFLICT");
      assert.deepEqual(
        (await b.drain()).map((delivery) => delivery.envelope),
        [envelope],
      );
    },
  },
  {
    name: "SOURCE_MISMATCH: 409 when the envelope source is not the bound endpoint",
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("source");
      expectError(await a.send(makeEnvelope(b.endpoint, b.endpoint)), "SOURCE_MISMATCH");
      expectError(await a.send(makeEnvelope(localEndpoint(), b.endpoint)), "SOURCE_MISMATCH");
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "SOURCE_MISMATCH: 409 for a malformed send envelope",
    run: async ({ expectError, expectErrorOf, pair }) => {
      const [a, b] = await pair("malformed");
      const good = a.envelopeTo(b.endpoint);
      const { createdAt: _createdAt, ...withoutCreatedAt } = good;
      const { target: _target, ...withoutTarget } = good;
      const malformed: Record<string, unknown> = {
        "missing createdAt": withoutCreatedAt,
        "missing target": withoutTarget,
        "source not an endpoint": { ...good, source: a.endpoint.id },
        "source with an extra key": { ...good, source: { ...a.endpoint, extra: 1 } },
        "createdAt not a date": { ...good, createdAt: "not a date" },
        "empty envelopeId": { ...good, envelopeId: "" },
        "numeric envelopeId": { ...good, envelopeId: 7 },
        "envelope is a string": JSON.stringify(good),
        "envelope is null": null,
      };
      for (const [label, envelope] of Object.entries(malformed)) {
        const reply = await a.send(envelope as Record<string, unknown>);
        equal(reply.status, 409, label);
        expectError(reply, "SOURCE_MISMATCH");
      }
      // Wolfpack's relay checks an envelope's keys with the request's (400); ours as a malformed envelope (strict answers).
      expectErrorOf(await a.send({ ...good, extra: true }), ["SOURCE_MISMATCH", "INVALID_REQUEST"]);
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "SOURCE_MISMATCH: 409 when the binding endpoint is another session's or not local",
    run: async ({ baseUrl, expectError, expectValue, pair }) => {
      const [a, b] = await pair("owner");
      const asA = (endpoint: unknown) => postJson(baseUrl, { ...a.request("health"), endpoint });
      expectError(await asA(b.endpoint), "SOURCE_MISMATCH");
      expectError(await asA({ relay: "another-relay", id: a.endpoint.id }), "SOURCE_MISMATCH");
      expectError(await asA({ relay: RELAY_ID, id: "not-a-uuid" }), "SOURCE_MISMATCH");
      // Wolfpack's relay serves its own endpoint with an extra key; ours refuses it (strict answers).
      const extra = await asA({ ...a.endpoint, extra: true });
      if (extra.status === 200) expectValue(extra, "health");
      else expectError(extra, "SOURCE_MISMATCH");
      // b's mailbox cannot be read through a's caller name either.
      expectError(await postJson(baseUrl, { ...a.request("receive", { cursor: "0" }), endpoint: b.endpoint }), "SOURCE_MISMATCH");
    },
  },
  {
    name: "RELAY_PROFILE_REQUIRED: 409 for a wrong or missing profile",
    run: async ({ baseUrl, expectError, pair }) => {
      const [a, b] = await pair("profile");
      const envelope = a.envelopeTo(b.endpoint);
      expectError(await a.call("send", { envelope, profile: "volatile-v2" }), "RELAY_PROFILE_REQUIRED");
      const { profile: _profile, ...withoutProfile } = a.request("send", { envelope });
      expectError(await postJson(baseUrl, withoutProfile), "RELAY_PROFILE_REQUIRED");
      expectError(await a.call("health", { profile: 1 }), "RELAY_PROFILE_REQUIRED");
      const connect = connectRequest({ callerSession: uniqueName("profile-c"), generation: crypto.randomUUID() });
      expectError(await postJson(baseUrl, { ...connect, profile: "durable-v2" }), "RELAY_PROFILE_REQUIRED");
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "TARGET_NOT_REGISTERED: 404 for an unknown target (send and resolve)",
    run: async ({ expectError, session }) => {
      const a = await session("unknown-target");
      const nowhere = localEndpoint();
      expectError(await a.send(a.envelopeTo(nowhere)), "TARGET_NOT_REGISTERED");
      expectError(await a.call("resolve", { target: nowhere }), "TARGET_NOT_REGISTERED");
    },
  },
  // resolve takes `target:{relay, id(uuid)}` and bad fields are INVALID_REQUEST, so a
  // non-UUID id is refused as a field before the relay or the registration is looked at.
  {
    name: "INVALID_REQUEST: 400 for a resolve target whose id is not a UUID (not TARGET_NOT_REGISTERED)",
    run: async ({ expectError, expectErrorOf, session }) => {
      const a = await session("resolve-id");
      const targets: Record<string, unknown> = {
        "id not a UUID": { relay: RELAY_ID, id: "not-a-uuid" },
        "id a UUID with a trailing character": { relay: RELAY_ID, id: `${crypto.randomUUID()}0` },
        "id empty": { relay: RELAY_ID, id: "" },
        "id a number": { relay: RELAY_ID, id: 7 },
        "id missing": { relay: RELAY_ID },
        "a string": a.endpoint.id,
        // A field error wins over the relay check (CROSS_RELAY_ENDPOINT) too.
        "another relay and a non-UUID id": { relay: "another-relay", id: "not-a-uuid" },
      };
      for (const [label, target] of Object.entries(targets)) {
        const reply = await a.call("resolve", { target });
        equal(reply.status, 400, label);
        expectError(reply, "INVALID_REQUEST");
      }
      // Wolfpack's relay looks an extra-key target up (404); ours refuses the field (strict answers).
      const extra = await a.call("resolve", { target: { relay: RELAY_ID, id: crypto.randomUUID(), extra: true } });
      expectErrorOf(extra, ["INVALID_REQUEST", "TARGET_NOT_REGISTERED"]);
      // A well-formed id that nobody registered is still TARGET_NOT_REGISTERED.
      expectError(await a.call("resolve", { target: localEndpoint() }), "TARGET_NOT_REGISTERED");
    },
  },
  {
    name: "TARGET_NOT_REGISTERED: 404 after the target disconnects",
    run: async ({ expectError, expectValue, pair }) => {
      const [a, b] = await pair("gone-target");
      expectValue(await a.call("resolve", { target: b.endpoint }), "resolved");
      expectValue(await b.disconnect(), "disconnected");
      expectError(await a.send(a.envelopeTo(b.endpoint)), "TARGET_NOT_REGISTERED");
      expectError(await a.call("resolve", { target: b.endpoint }), "TARGET_NOT_REGISTERED");
    },
  },
  {
    name: "CALLER_NOT_FOUND: 404 for a callerSession that never connected",
    run: async ({ baseUrl, epoch, expectError, session }) => {
      const a = await session("caller");
      const ghost = uniqueName("ghost");
      const asGhost = (operation: string, endpoint: WireEndpoint, fields: Record<string, unknown> = {}) =>
        postJson(baseUrl, { operation, profile: RELAY_PROFILE, epoch, callerSession: ghost, endpoint, ...fields });
      expectError(await asGhost("health", localEndpoint()), "CALLER_NOT_FOUND");
      expectError(await asGhost("receive", localEndpoint(), { cursor: "0" }), "CALLER_NOT_FOUND");
      // Even with a live endpoint of somebody else, the unknown caller is what is reported.
      expectError(await asGhost("health", a.endpoint), "CALLER_NOT_FOUND");
    },
  },
  {
    name: "REGISTRATION_EXPIRED: 410 after disconnect",
    run: async ({ expectError, expectValue, session }) => {
      const a = await session("expired-disconnect");
      expectValue(await a.disconnect(), "disconnected");
      expectError(await a.call("health"), "REGISTRATION_EXPIRED");
      expectError(await a.receive("0"), "REGISTRATION_EXPIRED");
      expectError(await a.send(a.envelopeTo(a.endpoint)), "REGISTRATION_EXPIRED");
      expectError(await a.disconnect(), "REGISTRATION_EXPIRED");
    },
  },
  {
    name: "REGISTRATION_EXPIRED: 410 for an endpoint superseded by a new generation",
    run: async ({ expectError, expectValue, session }) => {
      const name = uniqueName("superseded");
      const first = await session("superseded", { callerSession: name });
      const second = await session("superseded", { callerSession: name });
      assert.notEqual(second.endpoint.id, first.endpoint.id);
      expectError(await first.call("health"), "REGISTRATION_EXPIRED");
      expectError(await first.receive("0"), "REGISTRATION_EXPIRED");
      expectValue(await second.call("health"), "health");
    },
  },
  // The owner check, in order: (3) the registration must be active (REGISTRATION_EXPIRED)
  // before (4) its session is compared with the caller's (SOURCE_MISMATCH).
  {
    name: "REGISTRATION_EXPIRED: 410 for another session's ended endpoint (activity is checked before the owner)",
    run: async ({ baseUrl, expectError, expectValue, session, pair }) => {
      const [a, b] = await pair("foreign-ended");
      const superseded = b.endpoint;
      await session("foreign-ended", { callerSession: b.callerSession });
      const c = await session("foreign-ended-c");
      expectValue(await c.disconnect(), "disconnected");
      for (const endpoint of [superseded, c.endpoint]) {
        expectError(await postJson(baseUrl, { ...a.request("health"), endpoint }), "REGISTRATION_EXPIRED");
        expectError(await postJson(baseUrl, { ...a.request("receive", { cursor: "0" }), endpoint }), "REGISTRATION_EXPIRED");
      }
      // A live endpoint of another session is still SOURCE_MISMATCH; a's own binding is untouched.
      const live = await session("foreign-ended-live");
      expectError(await postJson(baseUrl, { ...a.request("health"), endpoint: live.endpoint }), "SOURCE_MISMATCH");
      expectValue(await a.call("health"), "health");
    },
  },
  {
    name: "REGISTRATION_EXPIRED: 410 once the lease lapsed; the same generation revives the endpoint",
    run: async ({ expectError, expectValue, pair }) => {
      const [a, b] = await pair("lapsed");
      const { envelope } = await a.sendOk(b.endpoint);
      expectValue(await b.renew({ leaseMs: minLeaseMs }), "connected");
      await sleep(minLeaseMs + 20);
      expectError(await b.receive("0"), "REGISTRATION_EXPIRED");
      const revived = expectValue(await b.renew(), "connected");
      assert.deepEqual(revived.endpoint, b.endpoint);
      assert.deepEqual(idsOf(await b.drain()), [envelope.envelopeId]);
    },
  },
  {
    name: "INVALID_REQUEST: 400 for an unknown key",
    run: async ({ baseUrl, expectError, session }) => {
      const a = await session("unknown-key");
      expectError(await a.call("health", { bogus: true }), "INVALID_REQUEST");
      expectError(await a.call("receive", { cursor: "0", since: "0" }), "INVALID_REQUEST");
      const connect = connectRequest({ callerSession: uniqueName("unknown-key-c"), generation: crypto.randomUUID() });
      expectError(await postJson(baseUrl, { ...connect, colour: "blue" }), "INVALID_REQUEST");
    },
  },
  {
    name: "INVALID_REQUEST: 400 for a malformed epoch",
    run: async ({ baseUrl, expectError, expectErrorOf, session }) => {
      const a = await session("bad-epoch");
      expectError(await a.call("health", { epoch: "yesterday" }), "INVALID_REQUEST");
      expectError(await a.call("health", { epoch: 7 }), "INVALID_REQUEST");
      // Wolfpack's connect compares the epoch before checking it (409); ours checks it first (strict answers).
      const connect = connectRequest({ callerSession: uniqueName("bad-epoch-c"), generation: crypto.randomUUID() });
      expectErrorOf(await postJson(baseUrl, { ...connect, epoch: "not-a-uuid" }), ["INVALID_REQUEST", "RELAY_RESET"]);
    },
  },
  {
    name: "INVALID_REQUEST: 400 for a body that is not JSON",
    run: async ({ baseUrl, expectError }) => {
      for (const body of ['{"operation":', "{operation: 'health'}", "", "\u0000"]) {
        expectError(await postBody(baseUrl, body), "INVALID_REQUEST");
      }
    },
  },
  {
    name: "INVALID_REQUEST: 400 for JSON that is not an object",
    run: async ({ baseUrl, expectError }) => {
      for (const body of ["[]", "42", '"health"', "null", "true", `[{"operation":"health","profile":"${RELAY_PROFILE}"}]`]) {
        expectError(await postBody(baseUrl, body), "INVALID_REQUEST");
      }
    },
  },
  {
    name: "INVALID_REQUEST: 400 for an unknown or missing operation",
    run: async ({ baseUrl, expectError, session }) => {
      const a = await session("operation");
      expectError(await a.call("explode"), "INVALID_REQUEST");
      expectError(await a.call("Health"), "INVALID_REQUEST");
      expectError(await a.call("health", { operation: 3 }), "INVALID_REQUEST");
      const { operation: _operation, ...withoutOperation } = a.request("health");
      expectError(await postJson(baseUrl, withoutOperation), "INVALID_REQUEST");
    },
  },
  {
    name: "INVALID_REQUEST: 400 for a query string on the relay path and on the profile path",
    run: async ({ baseUrl, expectError, session }) => {
      const a = await session("query");
      expectError(await postJson(baseUrl, a.request("health"), { path: `${RELAY_ENDPOINT_PATH}?debug=1` }), "INVALID_REQUEST");
      expectError(await getPath(baseUrl, `${RELAY_PROFILE_PATH}?debug=1`), "INVALID_REQUEST");
    },
  },
  {
    name: "INVALID_REQUEST: 400 unless the media type is application/json (parameters allowed)",
    run: async ({ baseUrl, expectError, expectValue, session }) => {
      const a = await session("content-type");
      const body = JSON.stringify(a.request("health"));
      for (const contentType of ["text/plain", "application/jsonx", "application/x-www-form-urlencoded", "json", null]) {
        expectError(await postBody(baseUrl, body, { contentType }), "INVALID_REQUEST");
      }
      for (const contentType of ["application/json; charset=utf-8", "Application/JSON"]) {
        expectValue(await postBody(baseUrl, body, { contentType }), "health");
      }
    },
  },
  {
    name: "INVALID_REQUEST: 400 for a body that is not strict UTF-8",
    run: async ({ baseUrl, expectError, pair }) => {
      const [a, b] = await pair("utf8");
      const marker = "MARKER";
      // Decoded leniently, each body would be a valid send whose payload text holds U+FFFD.
      const text = JSON.stringify(a.request("send", { envelope: a.envelopeTo(b.endpoint, { payload: { text: `ok ${marker}` } }) }));
      const [before, after] = text.split(marker) as [string, string];
      for (const bad of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0x80]]) {
        const bytes = Buffer.concat([Buffer.from(before), Buffer.from(bad), Buffer.from(after)]);
        expectError(await postBody(baseUrl, new Uint8Array(bytes)), "INVALID_REQUEST");
      }
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "INVALID_REQUEST 413: a body of maxRequestBodyBytes + 1 (declared and chunked)",
    run: async ({ baseUrl, expectError, session }) => {
      const a = await session("too-large");
      const request = JSON.stringify(a.request("health"));
      const oversized = request + " ".repeat(maxRequestBodyBytes + 1 - utf8Bytes(request));
      assert.equal(utf8Bytes(oversized), maxRequestBodyBytes + 1);
      const declared = await postBody(baseUrl, oversized);
      expectError(declared, "INVALID_REQUEST", 413);
      // An early rejection: the relay does not keep the connection.
      assert.equal(declared.headers.get("connection"), "close");
      const bytes = new TextEncoder().encode(oversized);
      const chunked = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < bytes.length; offset += 4 * KiB) controller.enqueue(bytes.slice(offset, offset + 4 * KiB));
          controller.close();
        },
      });
      expectError(await postBody(baseUrl, chunked), "INVALID_REQUEST", 413);
    },
  },
  {
    name: "INVALID_REQUEST: 400 for an ACK of an unknown or foreign envelopeId",
    run: async ({ expectError, expectValue, pair }) => {
      const [a, b] = await pair("ack-unknown");
      expectError(await a.acknowledge(crypto.randomUUID()), "INVALID_REQUEST");
      const { envelope } = await a.sendOk(b.endpoint);
      // The sender is not the mailbox owner: its ACK of b's delivery is refused …
      expectError(await a.acknowledge(envelope.envelopeId), "INVALID_REQUEST");
      // … and did not acknowledge anything.
      assert.equal(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate, false);
    },
  },
  {
    name: "INVALID_REQUEST: 400 for an envelope protocolVersion other than 2",
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("protocol-version");
      for (const protocolVersion of [WIRE_PROTOCOL_VERSION - 1, WIRE_PROTOCOL_VERSION + 1]) {
        expectError(await a.send({ ...a.envelopeTo(b.endpoint), protocolVersion }), "INVALID_REQUEST");
      }
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "INVALID_CURSOR: 400 for a malformed cursor",
    run: async ({ expectError, session }) => {
      const a = await session("cursor-malformed");
      await a.sendOk(a.endpoint);
      for (const cursor of ["", "01", "-1", "1.0", "1e0", "abc", " 1", "0x1", "1".repeat(maxCursorDigits + 1)]) {
        const reply = await a.receive(cursor);
        equal(reply.status, 400, JSON.stringify(cursor));
        expectError(reply, "INVALID_CURSOR");
      }
    },
  },
  // A bad cursor or limit is INVALID_CURSOR — of any type, as for the limit.
  {
    name: "INVALID_CURSOR: 400 for a cursor that is not a string",
    run: async ({ expectError, session }) => {
      const a = await session("cursor-type");
      for (const cursor of [0, 1, null, true, [], ["0"], {}, { cursor: "0" }]) {
        const reply = await a.call("receive", { cursor });
        equal(reply.status, 400, JSON.stringify(cursor));
        expectError(reply, "INVALID_CURSOR");
      }
    },
  },
  {
    name: "INVALID_CURSOR: 400 for a cursor above the highest assigned",
    run: async ({ expectError, expectValue, session }) => {
      const a = await session("cursor-future");
      expectError(await a.receive("1"), "INVALID_CURSOR");
      await a.sendOk(a.endpoint);
      await a.sendOk(a.endpoint);
      expectValue(await a.receive("2"), "page");
      expectError(await a.receive("3"), "INVALID_CURSOR");
      expectError(await a.receive("9".repeat(maxCursorDigits)), "INVALID_CURSOR");
    },
  },
  {
    name: "INVALID_CURSOR: 400 for a limit of 0, 51 or a non-integer",
    run: async ({ expectError, session }) => {
      const a = await session("limit");
      for (const limit of [RECEIVE_LIMIT.minimum - 1, maxReceivePageItems + 1, -1, 1.5, "10", null]) {
        const reply = await a.call("receive", { cursor: "0", limit });
        equal(reply.status, 400, JSON.stringify(limit));
        expectError(reply, "INVALID_CURSOR");
      }
    },
  },
  {
    name: "CROSS_RELAY_ENDPOINT: 400 for a target on another relay",
    run: async ({ expectError, session }) => {
      const a = await session("cross");
      for (const relay of ["another-relay", `${RELAY_ID}:peer:${crypto.randomUUID()}`]) {
        const target = { relay, id: crypto.randomUUID() };
        expectError(await a.send(a.envelopeTo(target)), "CROSS_RELAY_ENDPOINT");
        expectError(await a.call("resolve", { target }), "CROSS_RELAY_ENDPOINT");
      }
    },
  },
  {
    name: "ENVELOPE_EXPIRED: 400 for createdAt more than maxEnvelopeFutureSkewMs ahead",
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("future");
      const error = expectError(
        await a.send(a.envelopeTo(b.endpoint, { createdAt: isoOffset(maxEnvelopeFutureSkewMs + EDGE_MARGIN_MS) })),
        "ENVELOPE_EXPIRED",
      );
      assert.equal(error.retryable, false);
      expectError(await a.send(a.envelopeTo(b.endpoint, { createdAt: isoOffset(10 * maxEnvelopeFutureSkewMs) })), "ENVELOPE_EXPIRED");
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "ENVELOPE_EXPIRED: 400 for createdAt maxEnvelopeAgeMs old (the edge itself is expired)",
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("old");
      expectError(await a.send(a.envelopeTo(b.endpoint, { createdAt: isoOffset(-maxEnvelopeAgeMs) })), "ENVELOPE_EXPIRED");
      expectError(await a.send(a.envelopeTo(b.endpoint, { createdAt: isoOffset(-10 * maxEnvelopeAgeMs) })), "ENVELOPE_EXPIRED");
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "ENVELOPE_EXPIRED edges: createdAt 1 s inside either edge is accepted",
    run: async ({ pair }) => {
      const [a, b] = await pair("fresh-edges");
      const { envelope: ahead } = await a.sendOk(b.endpoint, { createdAt: isoOffset(maxEnvelopeFutureSkewMs - EDGE_MARGIN_MS) });
      const { envelope: old } = await a.sendOk(b.endpoint, { createdAt: isoOffset(-maxEnvelopeAgeMs + EDGE_MARGIN_MS) });
      assert.deepEqual(idsOf(await b.drain()), [ahead.envelopeId, old.envelopeId]);
    },
  },
  {
    name: "PEER_POLICY_REQUIRED: 403 for a request with an Origin header",
    run: async ({ baseUrl, additions, expectError, pair }) => {
      const [a, b] = await pair("origin");
      const headers = { origin: "http://example.invalid" };
      const replies = [
        await a.call("health", {}, { headers }),
        await a.send(a.envelopeTo(b.endpoint), { headers }),
        await getProfile(baseUrl, { headers }),
      ];
      for (const reply of replies) {
        equal(reply.status, 403, describeReply(reply));
        // A plain Wolfpack relay answers its CORS refusal untyped; our relay types every error body.
        if (additions) expectError(reply, "PEER_POLICY_REQUIRED");
      }
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "PEER_POLICY_REQUIRED: 403 for a loopback request with X-Forwarded-For: 8.8.8.8",
    run: async ({ baseUrl, expectError, pair }) => {
      const [a, b] = await pair("forwarded");
      const headers = { "x-forwarded-for": "8.8.8.8" };
      expectError(await a.call("health", {}, { headers }), "PEER_POLICY_REQUIRED");
      expectError(await a.send(a.envelopeTo(b.endpoint), { headers }), "PEER_POLICY_REQUIRED");
      expectError(await getProfile(baseUrl, { headers }), "PEER_POLICY_REQUIRED");
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "RELAY_CAPACITY: 503 retryable once a mailbox holds maxRelayMailboxItems; nothing evicted; an ACK makes room",
    serial: true,
    run: async ({ expectError, expectValue, pair, session }) => {
      const [a, b] = await pair("mailbox-full");
      // Several senders fill it (a relay with quotas-v1 holds each to its share of one mailbox), and
      // the overflow comes from one holding nothing there: what refuses it is the mailbox's budget.
      const more = Math.ceil(maxRelayMailboxItems / maxRelaySenderMailboxItems) - 1;
      const fillers = [a, ...(await Promise.all(Array.from({ length: more }, (_, index) => session(`mailbox-full-${index}`))))];
      const sent = await inBatches(
        maxRelayMailboxItems,
        8,
        async (index) => (await fillers[index % fillers.length]!.sendOk(b.endpoint, { payload: { index } })).envelope.envelopeId,
      );
      const late = await session("mailbox-full-late");
      const overflow = late.envelopeTo(b.endpoint, { payload: { index: maxRelayMailboxItems } });
      const error = expectError(await late.send(overflow), "RELAY_CAPACITY");
      assert.equal(error.retryable, true);
      // Store budgets carry no retryAfterMs; only admission overload does.
      assert.equal(error.retryAfterMs, undefined);
      const held = await b.drain();
      assert.equal(held.length, maxRelayMailboxItems);
      assert.deepEqual(new Set(idsOf(held)), new Set(sent));
      assert.equal(expectValue(await b.acknowledge(held[0]!.envelope.envelopeId), "acknowledged").duplicate, false);
      // The refused envelope left no receipt: it is now admitted as new.
      const admitted = expectValue(await late.send(overflow), "accepted");
      assert.equal(admitted.duplicate, false);
      expectError(await a.send(a.envelopeTo(b.endpoint)), "RELAY_CAPACITY");
    },
  },
]);
