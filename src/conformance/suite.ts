/**
 * HTTP conformance suite of a `volatile-v1` relay (docs/wire.md), written purely against a base
 * URL so any relay can be checked: ours, or a Wolfpack relay. `pi-tasks conformance URL` runs it
 * (src/cli/conformance.ts, through ./entry.ts); tests/relay/relay.test.ts runs it against ours.
 *
 * Not a test file itself: `runRelayConformance(getBaseUrl, options)` registers the `describe` /
 * `test` blocks. `options.features` names the additions the relay must have (`watch-v1`,
 * `successor-v1`, `binding-secret-v1`): their checks run, the others are skipped. With any addition required, the
 * relay is held to our relay's rules too (every error body typed with `profile` and the epoch,
 * the session status route, no per-client request bucket, a new generation frees the retired
 * mailbox); with none, only Wolfpack's wire is checked. Replies are also checked against the
 * reply schemas of src/protocol/wire.ts.
 *
 * Every test uses its own freshly named sessions, so the quick error-table tests run concurrently
 * (with the 5 s slow-body test among them); tests that count relay-wide state, measure time or
 * fill the admission slots run serially.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import type { TSchema } from "@sinclair/typebox";
import { canonicalBytes, utf8Bytes } from "../protocol/canonical-json.ts";
import { isUuid } from "../protocol/endpoint.ts";
import { ERROR_REGISTRY, type RegisteredErrorCode } from "../protocol/errors.ts";
import { HTTP_STATUS } from "../protocol/http.ts";
import {
  ackBatchMaxItems,
  bindingSecretMinChars,
  envelopeMaxAgeMs,
  envelopeMaxFutureSkewMs,
  KiB,
  leaseDefaultMs,
  leaseMaxMs,
  leaseMinMs,
  maxCursorDigits,
  maxProtocolVersionsItems,
  maxRelayPayloadBytes,
  maxRequestBodyBytes,
  maxWireIdChars,
  minWireIdChars,
  RELAY_ENDPOINT_PATH,
  RELAY_ID,
  RELAY_PROFILE,
  RELAY_PROFILE_PATH,
  receivePageMaxBytes,
  receivePageMaxItems,
  relayBodyReadDeadlineMs,
  relayMaxConcurrentRequests,
  relayMaxMailboxItems,
  relayOverloadRetryAfterMs,
  SESSION_LIST_PATH,
  SESSION_STATUS_PATH,
  WIRE_PROTOCOL_VERSION,
  watchMaxWaitMs,
  watchMinWaitMs,
} from "../protocol/limits.ts";
import { firstError } from "../protocol/validate.ts";
import {
  EPOCHLESS_CODES,
  FEATURE_BINDING_SECRET,
  FEATURE_ACK_BATCH,
  FEATURE_SUCCESSOR,
  FEATURE_WATCH,
  mintBindingSecret,
  RECEIVE_LIMIT,
  RELAY_REPLIES,
  WireErrorBody,
  WireSuccessBody,
} from "../protocol/wire.ts";
import { DOORBELL_BOUND_MS, EDGE_MARGIN_MS, LONG_WATCH_MS, PROMPT_REPLY_MS, TEST_SLACK_MS } from "./timing.ts";
import {
  type Binding,
  connectRequest,
  getPath,
  getProfile,
  localEndpoint,
  makeEnvelope,
  openRawRequest,
  postBody,
  postJson,
  type RawRequest,
  uniqueName,
  type WireEndpoint,
  WireSession,
} from "./wire-client.ts";

export interface ConformanceOptions {
  /**
   * The additions (`FEATURE_WATCH`, `FEATURE_SUCCESSOR`, `FEATURE_BINDING_SECRET`, `FEATURE_ACK_BATCH`) the relay must have and advertise. Empty:
   * a plain Wolfpack relay, checked against Wolfpack's wire only.
   */
  readonly features: readonly string[];
}

/** What the assertion helpers need of a reply (an HTTP `fetch` reply or a raw-socket one). */
export interface ReplyLike {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly body: any;
}

export interface ErrorExpectation {
  /** The relay's current epoch; checked when the body carries one (or when `requireEpoch`). */
  readonly epoch?: string;
  /** HTTP status; default the registry's status of the code. */
  readonly status?: number;
  /** Every error body must carry the epoch (our relay); otherwise only non-epochless codes must. */
  readonly requireEpoch?: boolean;
}

function describeReply(reply: ReplyLike): string {
  return `HTTP ${reply.status} ${reply.text.slice(0, 400)}`;
}

/**
 * Asserts a typed error reply: the status, `Cache-Control: no-store`, `ok:false`,
 * `profile:"volatile-v1"`, the code, `retryable` as the error table says (docs/wire.md), the
 * epoch, and the body's shape (`WireErrorBody`).
 * Returns `body.error`.
 */
export function expectWireError(reply: ReplyLike, code: RegisteredErrorCode, expectation: ErrorExpectation = {}): any {
  const row = ERROR_REGISTRY[code];
  const status = expectation.status ?? row.httpStatus;
  const where = `expected ${code} (HTTP ${status}), got ${describeReply(reply)}`;
  expect(reply.status, where).toBe(status ?? -1);
  expect(reply.headers.get("cache-control"), where).toBe("no-store");
  expect(reply.body?.ok, where).toBe(false);
  expect(reply.body.profile, where).toBe(RELAY_PROFILE);
  expect(reply.body.error?.code, where).toBe(code);
  expect(reply.body.error.retryable, where).toBe(row.retryable);
  expect(typeof reply.body.error.message, where).toBe("string");
  expect(firstError(WireErrorBody, reply.body), where).toBeUndefined();
  if (expectation.epoch !== undefined) {
    const mustCarry = expectation.requireEpoch === true || !EPOCHLESS_CODES.has(code);
    if (mustCarry || reply.body.epoch !== undefined) expect(reply.body.epoch, where).toBe(expectation.epoch);
  }
  return reply.body.error;
}

/** The reply value schema of each `kind`. */
const REPLY_OF_KIND: Readonly<Record<string, TSchema>> = Object.fromEntries(
  Object.values(RELAY_REPLIES)
    .flatMap((schema: TSchema): TSchema[] => ("anyOf" in schema ? (schema.anyOf as TSchema[]) : [schema]))
    .map((schema) => [schema.properties.kind.const, schema]),
);

/**
 * Asserts a success reply of `kind` carrying the epoch and `Cache-Control: no-store`, shaped as
 * `WireSuccessBody` with the reply value schema of its operation; returns `value`.
 */
export function expectWireValue(reply: ReplyLike, kind: string, epoch?: string): any {
  const where = `expected a ${kind} value, got ${describeReply(reply)}`;
  expect(reply.status, where).toBe(HTTP_STATUS.ok);
  expect(reply.headers.get("cache-control"), where).toBe("no-store");
  expect(reply.body?.ok, where).toBe(true);
  expect(reply.body.profile, where).toBe(RELAY_PROFILE);
  expect(isUuid(reply.body.epoch), where).toBe(true);
  if (epoch !== undefined) expect(reply.body.epoch, where).toBe(epoch);
  expect(reply.body.value?.kind, where).toBe(kind);
  expect(firstError(WireSuccessBody, reply.body), where).toBeUndefined();
  expect(firstError(REPLY_OF_KIND[kind]!, reply.body.value), where).toBeUndefined();
  return reply.body.value;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Runs `count` async jobs, at most `width` at a time, in index order. */
async function inBatches<T>(count: number, width: number, job: (index: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  for (let start = 0; start < count; start += width) {
    const batch = Array.from({ length: Math.min(width, count - start) }, (_, offset) => job(start + offset));
    results.push(...(await Promise.all(batch)));
  }
  return results;
}

/** A string of exactly `length` characters that starts unique to this run. */
function exactLength(length: number): string {
  const unique = crypto.randomUUID().replaceAll("-", "");
  return (unique + "n".repeat(length)).slice(0, length);
}

function isoOffset(offsetMs: number): string {
  return new Date(Date.now() + offsetMs).toISOString();
}

/** `test`, or `test.skip` when the relay need not have what the test checks. */
const testIf = (required: boolean) => (required ? test : test.skip);
const concurrentIf = (required: boolean) => (required ? test.concurrent : test.skip);

export function runRelayConformance(getBaseUrl: () => string, options: ConformanceOptions): void {
  const ctx = { epoch: "" };
  const base = () => getBaseUrl();
  /** Our relay's rules beyond Wolfpack's wire (docs/wire.md, "Our additions"). */
  const additions = () => options.features.length > 0;
  const hasFeature = (feature: string) => options.features.includes(feature);

  const expectError = (reply: ReplyLike, code: RegisteredErrorCode, status?: number) =>
    expectWireError(reply, code, { epoch: ctx.epoch, requireEpoch: additions(), ...(status === undefined ? {} : { status }) });
  const expectValue = (reply: ReplyLike, kind: string) => expectWireValue(reply, kind, ctx.epoch);
  const session = (label: string, extra: Parameters<typeof WireSession.connect>[1] = {}) => WireSession.connect(base(), { label, ...extra });
  const pair = async (label: string) => Promise.all([session(`${label}-a`), session(`${label}-b`)]);
  const cursorsOf = (deliveries: { cursor: string }[]) => deliveries.map((delivery) => delivery.cursor);
  const idsOf = (deliveries: { envelope: { envelopeId: string } }[]) => deliveries.map((delivery) => delivery.envelope.envelopeId);

  describe("volatile-v1 relay conformance", () => {
    beforeAll(async () => {
      const reply = await getProfile(base());
      if (reply.status !== 200 || reply.body?.ok !== true) throw new Error(`profile discovery failed: ${describeReply(reply)}`);
      ctx.epoch = reply.body.epoch;
    });

    // -----------------------------------------------------------------------------------------
    describe("profile and response envelope", () => {
      test("GET profile answers ok, profile, epoch, endpointPath and federation", async () => {
        const reply = await getProfile(base());
        expect(reply.status).toBe(HTTP_STATUS.ok);
        expect(reply.headers.get("cache-control")).toBe("no-store");
        expect(reply.body.ok).toBe(true);
        expect(reply.body.profile).toBe(RELAY_PROFILE);
        expect(isUuid(reply.body.epoch)).toBe(true);
        expect(reply.body.epoch).toBe(ctx.epoch);
        expect(reply.body.endpointPath).toBe(RELAY_ENDPOINT_PATH);
        expect(typeof reply.body.federation).toBe("string");
      });

      testIf(additions())(`additions: the profile advertises every required feature (${options.features.join(", ")})`, async () => {
        const reply = await getProfile(base());
        expect(reply.body.features).toBeArray();
        for (const feature of options.features) expect(reply.body.features).toContain(feature);
      });

      test("every success carries the epoch and Cache-Control: no-store", async () => {
        const name = uniqueName("envelope");
        const connected = expectValue(await postJson(base(), connectRequest({ callerSession: name, generation: crypto.randomUUID() })), "connected");
        const binding: Binding = { epoch: ctx.epoch, callerSession: name, endpoint: connected.endpoint };
        const call = (operation: string, fields: Record<string, unknown> = {}) =>
          postJson(base(), { operation, profile: RELAY_PROFILE, ...binding, ...fields });
        expectValue(await call("resolve", { target: binding.endpoint }), "resolved");
        // A self-addressed envelope (origin → itself) must work.
        const envelope = makeEnvelope(binding.endpoint, binding.endpoint);
        expectValue(await call("send", { envelope }), "accepted");
        expectValue(await call("receive", { cursor: "0" }), "page");
        expectValue(await call("acknowledge", { envelopeId: envelope.envelopeId }), "acknowledged");
        expectValue(await call("health"), "health");
        expectValue(await call("disconnect"), "disconnected");
      });

      test("OPTIONS answers 204", async () => {
        const reply = await getPath(base(), RELAY_ENDPOINT_PATH, { method: "OPTIONS" });
        expect(reply.status).toBe(204);
        expect(reply.text).toBe("");
      });
    });

    // -----------------------------------------------------------------------------------------
    describe("error table", () => {
      test.concurrent(
        "INVALID_REQUEST 408: a body not fully sent within relayBodyReadDeadlineMs",
        async () => {
          const slow = openRawRequest(base(), { contentLength: 4 * KiB, body: `{"operation":"health","profile":"${RELAY_PROFILE}"` });
          try {
            await slow.sent;
            const reply = await slow.reply;
            expect(reply, "the relay closed the socket without a reply").toBeDefined();
            expectError(reply!, "INVALID_REQUEST", 408);
            expect(reply!.headers.get("connection")).toBe("close");
          } finally {
            slow.close();
          }
        },
        relayBodyReadDeadlineMs + TEST_SLACK_MS,
      );

      test.concurrent("RELAY_RESET: 409 for a different epoch on every bound operation, nothing admitted", async () => {
        const owner = await session("reset");
        const stale = crypto.randomUUID();
        const operations: Record<string, Record<string, unknown>> = {
          resolve: { target: owner.endpoint },
          send: { envelope: owner.envelopeTo(owner.endpoint) },
          receive: { cursor: "0" },
          acknowledge: { envelopeId: crypto.randomUUID() },
          health: {},
          disconnect: {},
          ...(hasFeature(FEATURE_WATCH) ? { watch: { cursor: "0", waitMs: watchMinWaitMs } } : {}),
        };
        for (const [operation, fields] of Object.entries(operations)) {
          const error = expectError(await owner.call(operation, { ...fields, epoch: stale }), "RELAY_RESET");
          expect(error.mayHaveBeenDelivered, operation).toBe(true);
        }
        // The binding is untouched: still connected, nothing was admitted.
        expect((await owner.page("0")).deliveries).toEqual([]);
      });

      test.concurrent("ENVELOPE_CONFLICT: 409 for the same envelopeId with a changed payload", async () => {
        const [a, b] = await pair("conflict-payload");
        const { envelope } = await a.sendOk(b.endpoint, { payload: { version: 1 } });
        expectError(await a.send({ ...envelope, payload: { version: 2 } }), "ENVELOPE_CONFLICT");
        expect((await b.drain()).map((delivery) => delivery.envelope)).toEqual([envelope]);
      });

      test.concurrent("ENVELOPE_CONFLICT: 409 for the same envelopeId with createdAt off by 1 ms", async () => {
        const [a, b] = await pair("conflict-created");
        const { envelope } = await a.sendOk(b.endpoint);
        const shifted = new Date(Date.parse(envelope.createdAt) + 1).toISOString();
        expect(shifted).not.toBe(envelope.createdAt);
        expectError(await a.send({ ...envelope, createdAt: shifted }), "ENVELOPE_CONFLICT");
        expect((await b.drain()).map((delivery) => delivery.envelope)).toEqual([envelope]);
      });

      test.concurrent("SOURCE_MISMATCH: 409 when the envelope source is not the bound endpoint", async () => {
        const [a, b] = await pair("source");
        expectError(await a.send(makeEnvelope(b.endpoint, b.endpoint)), "SOURCE_MISMATCH");
        expectError(await a.send(makeEnvelope(localEndpoint(), b.endpoint)), "SOURCE_MISMATCH");
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("SOURCE_MISMATCH: 409 for a malformed send envelope", async () => {
        const [a, b] = await pair("malformed");
        const good = a.envelopeTo(b.endpoint);
        const { createdAt: _createdAt, ...withoutCreatedAt } = good;
        const { target: _target, ...withoutTarget } = good;
        const malformed: Record<string, unknown> = {
          "missing createdAt": withoutCreatedAt,
          "missing target": withoutTarget,
          "extra key": { ...good, extra: true },
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
          expect(reply.status, label).toBe(409);
          expectError(reply, "SOURCE_MISMATCH");
        }
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("SOURCE_MISMATCH: 409 when the binding endpoint is another session's or not local", async () => {
        const [a, b] = await pair("owner");
        const asA = (endpoint: unknown) => postJson(base(), { ...a.request("health"), endpoint });
        expectError(await asA(b.endpoint), "SOURCE_MISMATCH");
        expectError(await asA({ relay: "another-relay", id: a.endpoint.id }), "SOURCE_MISMATCH");
        expectError(await asA({ relay: RELAY_ID, id: "not-a-uuid" }), "SOURCE_MISMATCH");
        expectError(await asA({ ...a.endpoint, extra: true }), "SOURCE_MISMATCH");
        // b's mailbox cannot be read through a's caller name either.
        expectError(await postJson(base(), { ...a.request("receive", { cursor: "0" }), endpoint: b.endpoint }), "SOURCE_MISMATCH");
      });

      test.concurrent("RELAY_PROFILE_REQUIRED: 409 for a wrong or missing profile", async () => {
        const [a, b] = await pair("profile");
        const envelope = a.envelopeTo(b.endpoint);
        expectError(await a.call("send", { envelope, profile: "volatile-v2" }), "RELAY_PROFILE_REQUIRED");
        const { profile: _profile, ...withoutProfile } = a.request("send", { envelope });
        expectError(await postJson(base(), withoutProfile), "RELAY_PROFILE_REQUIRED");
        expectError(await a.call("health", { profile: 1 }), "RELAY_PROFILE_REQUIRED");
        const connect = connectRequest({ callerSession: uniqueName("profile-c"), generation: crypto.randomUUID() });
        expectError(await postJson(base(), { ...connect, profile: "durable-v2" }), "RELAY_PROFILE_REQUIRED");
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("TARGET_NOT_REGISTERED: 404 for an unknown target (send and resolve)", async () => {
        const a = await session("unknown-target");
        const nowhere = localEndpoint();
        expectError(await a.send(a.envelopeTo(nowhere)), "TARGET_NOT_REGISTERED");
        expectError(await a.call("resolve", { target: nowhere }), "TARGET_NOT_REGISTERED");
      });

      // resolve takes `target:{relay, id(uuid)}` and bad fields are INVALID_REQUEST, so a
      // non-UUID id is refused as a field before the relay or the registration is looked at.
      test.concurrent("INVALID_REQUEST: 400 for a resolve target whose id is not a UUID (not TARGET_NOT_REGISTERED)", async () => {
        const a = await session("resolve-id");
        const targets: Record<string, unknown> = {
          "id not a UUID": { relay: RELAY_ID, id: "not-a-uuid" },
          "id a UUID with a trailing character": { relay: RELAY_ID, id: `${crypto.randomUUID()}0` },
          "id empty": { relay: RELAY_ID, id: "" },
          "id a number": { relay: RELAY_ID, id: 7 },
          "id missing": { relay: RELAY_ID },
          "an extra key": { relay: RELAY_ID, id: crypto.randomUUID(), extra: true },
          "a string": a.endpoint.id,
          // A field error wins over the relay check (CROSS_RELAY_ENDPOINT) too.
          "another relay and a non-UUID id": { relay: "another-relay", id: "not-a-uuid" },
        };
        for (const [label, target] of Object.entries(targets)) {
          const reply = await a.call("resolve", { target });
          expect(reply.status, label).toBe(400);
          expectError(reply, "INVALID_REQUEST");
        }
        // A well-formed id that nobody registered is still TARGET_NOT_REGISTERED.
        expectError(await a.call("resolve", { target: localEndpoint() }), "TARGET_NOT_REGISTERED");
      });

      test.concurrent("TARGET_NOT_REGISTERED: 404 after the target disconnects", async () => {
        const [a, b] = await pair("gone-target");
        expectValue(await a.call("resolve", { target: b.endpoint }), "resolved");
        expectValue(await b.disconnect(), "disconnected");
        expectError(await a.send(a.envelopeTo(b.endpoint)), "TARGET_NOT_REGISTERED");
        expectError(await a.call("resolve", { target: b.endpoint }), "TARGET_NOT_REGISTERED");
      });

      test.concurrent("CALLER_NOT_FOUND: 404 for a callerSession that never connected", async () => {
        const a = await session("caller");
        const ghost = uniqueName("ghost");
        const asGhost = (operation: string, endpoint: WireEndpoint, fields: Record<string, unknown> = {}) =>
          postJson(base(), { operation, profile: RELAY_PROFILE, epoch: ctx.epoch, callerSession: ghost, endpoint, ...fields });
        expectError(await asGhost("health", localEndpoint()), "CALLER_NOT_FOUND");
        expectError(await asGhost("receive", localEndpoint(), { cursor: "0" }), "CALLER_NOT_FOUND");
        // Even with a live endpoint of somebody else, the unknown caller is what is reported.
        expectError(await asGhost("health", a.endpoint), "CALLER_NOT_FOUND");
      });

      test.concurrent("REGISTRATION_EXPIRED: 410 after disconnect", async () => {
        const a = await session("expired-disconnect");
        expectValue(await a.disconnect(), "disconnected");
        expectError(await a.call("health"), "REGISTRATION_EXPIRED");
        expectError(await a.receive("0"), "REGISTRATION_EXPIRED");
        expectError(await a.send(a.envelopeTo(a.endpoint)), "REGISTRATION_EXPIRED");
        expectError(await a.disconnect(), "REGISTRATION_EXPIRED");
      });

      test.concurrent("REGISTRATION_EXPIRED: 410 for an endpoint superseded by a new generation", async () => {
        const name = uniqueName("superseded");
        const first = await session("superseded", { callerSession: name });
        const second = await session("superseded", { callerSession: name });
        expect(second.endpoint.id).not.toBe(first.endpoint.id);
        expectError(await first.call("health"), "REGISTRATION_EXPIRED");
        expectError(await first.receive("0"), "REGISTRATION_EXPIRED");
        expectValue(await second.call("health"), "health");
      });

      // The owner check, in order: (3) the registration must be active (REGISTRATION_EXPIRED)
      // before (4) its session is compared with the caller's (SOURCE_MISMATCH).
      test.concurrent("REGISTRATION_EXPIRED: 410 for another session's ended endpoint (activity is checked before the owner)", async () => {
        const [a, b] = await pair("foreign-ended");
        const superseded = b.endpoint;
        await session("foreign-ended", { callerSession: b.callerSession });
        const c = await session("foreign-ended-c");
        expectValue(await c.disconnect(), "disconnected");
        for (const endpoint of [superseded, c.endpoint]) {
          expectError(await postJson(base(), { ...a.request("health"), endpoint }), "REGISTRATION_EXPIRED");
          expectError(await postJson(base(), { ...a.request("receive", { cursor: "0" }), endpoint }), "REGISTRATION_EXPIRED");
        }
        // A live endpoint of another session is still SOURCE_MISMATCH; a's own binding is untouched.
        const live = await session("foreign-ended-live");
        expectError(await postJson(base(), { ...a.request("health"), endpoint: live.endpoint }), "SOURCE_MISMATCH");
        expectValue(await a.call("health"), "health");
      });

      test.concurrent("REGISTRATION_EXPIRED: 410 once the lease lapsed; the same generation revives the endpoint", async () => {
        const [a, b] = await pair("lapsed");
        const { envelope } = await a.sendOk(b.endpoint);
        expectValue(await b.renew({ leaseMs: leaseMinMs }), "connected");
        await sleep(leaseMinMs + 20);
        expectError(await b.receive("0"), "REGISTRATION_EXPIRED");
        const revived = expectValue(await b.renew(), "connected");
        expect(revived.endpoint).toEqual(b.endpoint);
        expect(idsOf(await b.drain())).toEqual([envelope.envelopeId]);
      });

      test.concurrent("INVALID_REQUEST: 400 for an unknown key", async () => {
        const a = await session("unknown-key");
        expectError(await a.call("health", { bogus: true }), "INVALID_REQUEST");
        expectError(await a.call("receive", { cursor: "0", since: "0" }), "INVALID_REQUEST");
        const connect = connectRequest({ callerSession: uniqueName("unknown-key-c"), generation: crypto.randomUUID() });
        expectError(await postJson(base(), { ...connect, colour: "blue" }), "INVALID_REQUEST");
      });

      test.concurrent("INVALID_REQUEST: 400 for a malformed epoch", async () => {
        const a = await session("bad-epoch");
        expectError(await a.call("health", { epoch: "yesterday" }), "INVALID_REQUEST");
        expectError(await a.call("health", { epoch: 7 }), "INVALID_REQUEST");
        const connect = connectRequest({ callerSession: uniqueName("bad-epoch-c"), generation: crypto.randomUUID() });
        expectError(await postJson(base(), { ...connect, epoch: "not-a-uuid" }), "INVALID_REQUEST");
      });

      test.concurrent("INVALID_REQUEST: 400 for a body that is not JSON", async () => {
        for (const body of ['{"operation":', "{operation: 'health'}", "", "\u0000"]) {
          expectError(await postBody(base(), body), "INVALID_REQUEST");
        }
      });

      test.concurrent("INVALID_REQUEST: 400 for JSON that is not an object", async () => {
        for (const body of ["[]", "42", '"health"', "null", "true", `[{"operation":"health","profile":"${RELAY_PROFILE}"}]`]) {
          expectError(await postBody(base(), body), "INVALID_REQUEST");
        }
      });

      test.concurrent("INVALID_REQUEST: 400 for an unknown or missing operation", async () => {
        const a = await session("operation");
        expectError(await a.call("explode"), "INVALID_REQUEST");
        expectError(await a.call("Health"), "INVALID_REQUEST");
        expectError(await a.call("health", { operation: 3 }), "INVALID_REQUEST");
        const { operation: _operation, ...withoutOperation } = a.request("health");
        expectError(await postJson(base(), withoutOperation), "INVALID_REQUEST");
      });

      test.concurrent("INVALID_REQUEST: 400 for a query string on the relay path and on the profile path", async () => {
        const a = await session("query");
        expectError(await postJson(base(), a.request("health"), { path: `${RELAY_ENDPOINT_PATH}?debug=1` }), "INVALID_REQUEST");
        expectError(await getPath(base(), `${RELAY_PROFILE_PATH}?debug=1`), "INVALID_REQUEST");
      });

      test.concurrent("INVALID_REQUEST: 400 unless the media type is application/json (parameters allowed)", async () => {
        const a = await session("content-type");
        const body = JSON.stringify(a.request("health"));
        for (const contentType of ["text/plain", "application/jsonx", "application/x-www-form-urlencoded", "json", null]) {
          expectError(await postBody(base(), body, { contentType }), "INVALID_REQUEST");
        }
        for (const contentType of ["application/json; charset=utf-8", "Application/JSON"]) {
          expectValue(await postBody(base(), body, { contentType }), "health");
        }
      });

      test.concurrent("INVALID_REQUEST: 400 for a body that is not strict UTF-8", async () => {
        const [a, b] = await pair("utf8");
        const marker = "MARKER";
        // Decoded leniently, each body would be a valid send whose payload text holds U+FFFD.
        const text = JSON.stringify(a.request("send", { envelope: a.envelopeTo(b.endpoint, { payload: { text: `ok ${marker}` } }) }));
        const [before, after] = text.split(marker) as [string, string];
        for (const bad of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0x80]]) {
          const bytes = Buffer.concat([Buffer.from(before), Buffer.from(bad), Buffer.from(after)]);
          expectError(await postBody(base(), new Uint8Array(bytes)), "INVALID_REQUEST");
        }
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("INVALID_REQUEST 413: a body of maxRequestBodyBytes + 1 (declared and chunked)", async () => {
        const a = await session("too-large");
        const request = JSON.stringify(a.request("health"));
        const oversized = request + " ".repeat(maxRequestBodyBytes + 1 - utf8Bytes(request));
        expect(utf8Bytes(oversized)).toBe(maxRequestBodyBytes + 1);
        const declared = await postBody(base(), oversized);
        expectError(declared, "INVALID_REQUEST", 413);
        // An early rejection: the relay does not keep the connection.
        expect(declared.headers.get("connection")).toBe("close");
        const bytes = new TextEncoder().encode(oversized);
        const chunked = new ReadableStream<Uint8Array>({
          start(controller) {
            for (let offset = 0; offset < bytes.length; offset += 4 * KiB) controller.enqueue(bytes.slice(offset, offset + 4 * KiB));
            controller.close();
          },
        });
        expectError(await postBody(base(), chunked), "INVALID_REQUEST", 413);
      });

      test.concurrent("INVALID_REQUEST: 400 for an ACK of an unknown or foreign envelopeId", async () => {
        const [a, b] = await pair("ack-unknown");
        expectError(await a.acknowledge(crypto.randomUUID()), "INVALID_REQUEST");
        const { envelope } = await a.sendOk(b.endpoint);
        // The sender is not the mailbox owner: its ACK of b's delivery is refused …
        expectError(await a.acknowledge(envelope.envelopeId), "INVALID_REQUEST");
        // … and did not acknowledge anything.
        expect(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate).toBe(false);
      });

      test.concurrent("INVALID_REQUEST: 400 for an envelope protocolVersion other than 2", async () => {
        const [a, b] = await pair("protocol-version");
        for (const protocolVersion of [WIRE_PROTOCOL_VERSION - 1, WIRE_PROTOCOL_VERSION + 1]) {
          expectError(await a.send({ ...a.envelopeTo(b.endpoint), protocolVersion }), "INVALID_REQUEST");
        }
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("INVALID_CURSOR: 400 for a malformed cursor", async () => {
        const a = await session("cursor-malformed");
        await a.sendOk(a.endpoint);
        for (const cursor of ["", "01", "-1", "1.0", "1e0", "abc", " 1", "0x1", "1".repeat(maxCursorDigits + 1)]) {
          const reply = await a.receive(cursor);
          expect(reply.status, JSON.stringify(cursor)).toBe(400);
          expectError(reply, "INVALID_CURSOR");
        }
      });

      // A bad cursor or limit is INVALID_CURSOR — of any type, as for the limit.
      test.concurrent("INVALID_CURSOR: 400 for a cursor that is not a string", async () => {
        const a = await session("cursor-type");
        for (const cursor of [0, 1, null, true, [], ["0"], {}, { cursor: "0" }]) {
          const reply = await a.call("receive", { cursor });
          expect(reply.status, JSON.stringify(cursor)).toBe(400);
          expectError(reply, "INVALID_CURSOR");
        }
      });

      test.concurrent("INVALID_CURSOR: 400 for a cursor above the highest assigned", async () => {
        const a = await session("cursor-future");
        expectError(await a.receive("1"), "INVALID_CURSOR");
        await a.sendOk(a.endpoint);
        await a.sendOk(a.endpoint);
        expectValue(await a.receive("2"), "page");
        expectError(await a.receive("3"), "INVALID_CURSOR");
        expectError(await a.receive("9".repeat(maxCursorDigits)), "INVALID_CURSOR");
      });

      test.concurrent("INVALID_CURSOR: 400 for a limit of 0, 51 or a non-integer", async () => {
        const a = await session("limit");
        for (const limit of [RECEIVE_LIMIT.minimum - 1, receivePageMaxItems + 1, -1, 1.5, "10", null]) {
          const reply = await a.call("receive", { cursor: "0", limit });
          expect(reply.status, JSON.stringify(limit)).toBe(400);
          expectError(reply, "INVALID_CURSOR");
        }
      });

      test.concurrent("CROSS_RELAY_ENDPOINT: 400 for a target on another relay", async () => {
        const a = await session("cross");
        for (const relay of ["another-relay", `${RELAY_ID}:peer:${crypto.randomUUID()}`]) {
          const target = { relay, id: crypto.randomUUID() };
          expectError(await a.send(a.envelopeTo(target)), "CROSS_RELAY_ENDPOINT");
          expectError(await a.call("resolve", { target }), "CROSS_RELAY_ENDPOINT");
        }
      });

      test.concurrent("ENVELOPE_EXPIRED: 400 for createdAt more than envelopeMaxFutureSkewMs ahead", async () => {
        const [a, b] = await pair("future");
        const error = expectError(await a.send(a.envelopeTo(b.endpoint, { createdAt: isoOffset(envelopeMaxFutureSkewMs + EDGE_MARGIN_MS) })), "ENVELOPE_EXPIRED");
        expect(error.retryable).toBe(false);
        expectError(await a.send(a.envelopeTo(b.endpoint, { createdAt: isoOffset(10 * envelopeMaxFutureSkewMs) })), "ENVELOPE_EXPIRED");
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("ENVELOPE_EXPIRED: 400 for createdAt envelopeMaxAgeMs old (the edge itself is expired)", async () => {
        const [a, b] = await pair("old");
        expectError(await a.send(a.envelopeTo(b.endpoint, { createdAt: isoOffset(-envelopeMaxAgeMs) })), "ENVELOPE_EXPIRED");
        expectError(await a.send(a.envelopeTo(b.endpoint, { createdAt: isoOffset(-10 * envelopeMaxAgeMs) })), "ENVELOPE_EXPIRED");
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("ENVELOPE_EXPIRED edges: createdAt 1 s inside either edge is accepted", async () => {
        const [a, b] = await pair("fresh-edges");
        const { envelope: ahead } = await a.sendOk(b.endpoint, { createdAt: isoOffset(envelopeMaxFutureSkewMs - EDGE_MARGIN_MS) });
        const { envelope: old } = await a.sendOk(b.endpoint, { createdAt: isoOffset(-envelopeMaxAgeMs + EDGE_MARGIN_MS) });
        expect(idsOf(await b.drain())).toEqual([ahead.envelopeId, old.envelopeId]);
      });

      test.concurrent("PEER_POLICY_REQUIRED: 403 for a request with an Origin header", async () => {
        const [a, b] = await pair("origin");
        const headers = { origin: "http://example.invalid" };
        const replies = [
          await a.call("health", {}, { headers }),
          await a.send(a.envelopeTo(b.endpoint), { headers }),
          await getProfile(base(), { headers }),
        ];
        for (const reply of replies) {
          expect(reply.status, describeReply(reply)).toBe(403);
          // A plain Wolfpack relay answers its CORS refusal untyped; our relay types every error body.
          if (additions()) expectError(reply, "PEER_POLICY_REQUIRED");
        }
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("PEER_POLICY_REQUIRED: 403 for a loopback request with X-Forwarded-For: 8.8.8.8", async () => {
        const [a, b] = await pair("forwarded");
        const headers = { "x-forwarded-for": "8.8.8.8" };
        expectError(await a.call("health", {}, { headers }), "PEER_POLICY_REQUIRED");
        expectError(await a.send(a.envelopeTo(b.endpoint), { headers }), "PEER_POLICY_REQUIRED");
        expectError(await getProfile(base(), { headers }), "PEER_POLICY_REQUIRED");
        expect(await b.drain()).toEqual([]);
      });

      test("RELAY_CAPACITY: 503 retryable once a mailbox holds relayMaxMailboxItems; nothing evicted; an ACK makes room", async () => {
        const [a, b] = await pair("mailbox-full");
        const sent = await inBatches(relayMaxMailboxItems, 8, async (index) => (await a.sendOk(b.endpoint, { payload: { index } })).envelope.envelopeId);
        const overflow = a.envelopeTo(b.endpoint, { payload: { index: relayMaxMailboxItems } });
        const error = expectError(await a.send(overflow), "RELAY_CAPACITY");
        expect(error.retryable).toBe(true);
        // Store budgets carry no retryAfterMs; only admission overload does.
        expect(error.retryAfterMs).toBeUndefined();
        const held = await b.drain();
        expect(held.length).toBe(relayMaxMailboxItems);
        expect(new Set(idsOf(held))).toEqual(new Set(sent));
        expect(expectValue(await b.acknowledge(held[0]!.envelope.envelopeId), "acknowledged").duplicate).toBe(false);
        // The refused envelope left no receipt: it is now admitted as new.
        const admitted = expectValue(await a.send(overflow), "accepted");
        expect(admitted.duplicate).toBe(false);
        expectError(await a.send(a.envelopeTo(b.endpoint)), "RELAY_CAPACITY");
      });
    });

    // -----------------------------------------------------------------------------------------
    describe("limits at their edges", () => {
      test.concurrent("payload canonical JSON of exactly maxRelayPayloadBytes is accepted, one byte more is 400", async () => {
        const [a, b] = await pair("payload-edge");
        const overhead = canonicalBytes({ d: "" });
        const exact = { d: "x".repeat(maxRelayPayloadBytes - overhead) };
        expect(canonicalBytes(exact)).toBe(maxRelayPayloadBytes);
        const { envelope } = await a.sendOk(b.endpoint, { payload: exact });
        const over = { d: "x".repeat(maxRelayPayloadBytes - overhead + 1) };
        expect(canonicalBytes(over)).toBe(maxRelayPayloadBytes + 1);
        expectError(await a.send(a.envelopeTo(b.endpoint, { payload: over })), "INVALID_REQUEST");
        // Bytes, not characters: two-byte characters push the same length over the limit.
        const pairs = Math.floor((maxRelayPayloadBytes - overhead) / 2);
        const wide = { d: "é".repeat(pairs) + "x".repeat(maxRelayPayloadBytes - overhead - 2 * pairs + 1) };
        expect(canonicalBytes(wide)).toBe(maxRelayPayloadBytes + 1);
        expect(JSON.stringify(wide).length).toBeLessThan(maxRelayPayloadBytes);
        expectError(await a.send(a.envelopeTo(b.endpoint, { payload: wide })), "INVALID_REQUEST");
        expect(idsOf(await b.drain())).toEqual([envelope.envelopeId]);
      });

      test.concurrent("a request body of exactly maxRequestBodyBytes is read, one byte more is 413", async () => {
        const a = await session("body-edge");
        const request = JSON.stringify(a.request("health"));
        const exact = request + " ".repeat(maxRequestBodyBytes - utf8Bytes(request));
        expect(utf8Bytes(exact)).toBe(maxRequestBodyBytes);
        expectValue(await postBody(base(), exact), "health");
        expectError(await postBody(base(), `${exact} `), "INVALID_REQUEST", 413);
      });

      test.concurrent("leaseMs leaseMinMs and leaseMaxMs are accepted, 0 and leaseMaxMs + 1 are 400", async () => {
        for (const leaseMs of [leaseMinMs, leaseMaxMs]) {
          const before = Date.now();
          const reply = await postJson(base(), connectRequest({ callerSession: uniqueName("lease"), generation: crypto.randomUUID(), leaseMs }));
          const expires = Date.parse(expectValue(reply, "connected").leaseExpiresAt);
          expect(expires).toBeGreaterThanOrEqual(before + leaseMs);
          expect(expires).toBeLessThanOrEqual(Date.now() + leaseMs);
        }
        for (const leaseMs of [0, leaseMaxMs + 1, -1, 1.5, "1000", null]) {
          const refused = await postJson(base(), { ...connectRequest({ callerSession: uniqueName("lease"), generation: crypto.randomUUID() }), leaseMs });
          expect(refused.status, JSON.stringify(leaseMs)).toBe(400);
          expectError(refused, "INVALID_REQUEST");
        }
      });

      test.concurrent("callerSession and generation of maxWireIdChars are accepted, one more is 400", async () => {
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
          expectError(await postJson(base(), connectRequest(fields)), "INVALID_REQUEST");
        }
        // The bound callerSession has the same bound.
        expectError(await named.call("health", { callerSession: exactLength(maxWireIdChars + 1) }), "INVALID_REQUEST");
      });

      test.concurrent("envelopeId of maxWireIdChars is accepted and acknowledged; one more is refused", async () => {
        const [a, b] = await pair("long-id");
        const { envelope } = await a.sendOk(b.endpoint, { envelopeId: exactLength(maxWireIdChars) });
        expect(idsOf(await b.drain())).toEqual([envelope.envelopeId]);
        expect(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate).toBe(false);
        // acknowledge: the envelopeId field itself is out of bounds → INVALID_REQUEST.
        expectError(await b.acknowledge(exactLength(maxWireIdChars + 1)), "INVALID_REQUEST");
        // send: an envelope with an out-of-bounds id is a malformed envelope → SOURCE_MISMATCH.
        expectError(await a.send(a.envelopeTo(b.endpoint, { envelopeId: exactLength(maxWireIdChars + 1) })), "SOURCE_MISMATCH");
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("protocolVersions must include 2 and hold 1..16 integers", async () => {
        const connectWith = (protocolVersions: unknown) =>
          postJson(base(), { ...connectRequest({ callerSession: uniqueName("versions"), generation: crypto.randomUUID() }), protocolVersions });
        const sixteen = [...Array.from({ length: maxProtocolVersionsItems - 1 }, (_, index) => index + 10), WIRE_PROTOCOL_VERSION];
        for (const versions of [[WIRE_PROTOCOL_VERSION], [1, WIRE_PROTOCOL_VERSION, 3], sixteen]) {
          expectValue(await connectWith(versions), "connected");
        }
        for (const versions of [[], [1], [3, 4], [...sixteen, 99], [`${WIRE_PROTOCOL_VERSION}`], [WIRE_PROTOCOL_VERSION + 0.5], WIRE_PROTOCOL_VERSION]) {
          const reply = await connectWith(versions);
          expect(reply.status, JSON.stringify(versions)).toBe(400);
          expectError(reply, "INVALID_REQUEST");
        }
      });

      test.concurrent("receive limit 1 and 50 are accepted", async () => {
        const a = await session("limit-edges");
        const sent = [];
        for (let index = 0; index < 3; index += 1) sent.push((await a.sendOk(a.endpoint)).envelope.envelopeId);
        const one = expectValue(await a.receive("0", RECEIVE_LIMIT.minimum), "page");
        expect(cursorsOf(one.deliveries)).toEqual(["1"]);
        expect(one.hasMore).toBe(true);
        expect(one.nextCursor).toBe("1");
        const fifty = expectValue(await a.receive("0", receivePageMaxItems), "page");
        expect(idsOf(fifty.deliveries)).toEqual(sent);
        expect(fifty.hasMore).toBe(false);
        expect(fifty.nextCursor).toBe("3");
      });

      test("a page holds at most receivePageMaxItems: exactly 50 queued → hasMore false; 51 → hasMore true at cursor 50", async () => {
        const [a, b] = await pair("page-items");
        await inBatches(receivePageMaxItems, 8, (index) => a.sendOk(b.endpoint, { payload: { index } }));
        const full = await b.page("0");
        expect(full.deliveries.length).toBe(receivePageMaxItems);
        expect(full.hasMore).toBe(false);
        expect(full.nextCursor).toBe(String(receivePageMaxItems));
        const { envelope: last } = await a.sendOk(b.endpoint);
        const cut = await b.page("0");
        expect(cut.deliveries.length).toBe(receivePageMaxItems);
        expect(cut.hasMore).toBe(true);
        expect(cut.nextCursor).toBe(String(receivePageMaxItems));
        expect(cut.nextCursor).toBe(cut.deliveries.at(-1).cursor);
        const rest = await b.page(cut.nextCursor);
        expect(cursorsOf(rest.deliveries)).toEqual([String(receivePageMaxItems + 1)]);
        expect(idsOf(rest.deliveries)).toEqual([last.envelopeId]);
        expect(rest.hasMore).toBe(false);
      });

      test("a page is cut at receivePageMaxBytes before 50 items, with hasMore true", async () => {
        const [a, b] = await pair("page-bytes");
        const payload = { d: "x".repeat(40 * KiB) };
        const count = Math.ceil(receivePageMaxBytes / canonicalBytes(payload)) + 2;
        expect(count).toBeLessThan(receivePageMaxItems);
        await inBatches(count, 4, () => a.sendOk(b.endpoint, { payload }));
        const first = await b.page("0");
        const rest = await b.page(first.nextCursor);
        const itemBytes = (delivery: unknown) => canonicalBytes(delivery);
        const used = first.deliveries.reduce((sum: number, delivery: unknown) => sum + itemBytes(delivery), 0);
        expect(first.deliveries.length).toBeGreaterThan(0);
        expect(first.deliveries.length).toBeLessThan(count);
        expect(first.hasMore).toBe(true);
        expect(first.nextCursor).toBe(first.deliveries.at(-1).cursor);
        expect(used).toBeLessThanOrEqual(receivePageMaxBytes);
        // The cut is exact: the next item would not have fitted.
        expect(used + itemBytes(rest.deliveries[0])).toBeGreaterThan(receivePageMaxBytes);
        const all = await b.drain();
        expect(all.length).toBe(count);
      });

      testIf(hasFeature(FEATURE_WATCH))("additions: watch waitMs 0 and watchMaxWaitMs are accepted, watchMaxWaitMs + 1 is 400", async () => {
        const a = await session("watch-bounds");
        const idle = expectValue(await a.call("watch", { cursor: "0", waitMs: watchMinWaitMs }), "watch");
        expect(idle.pending).toBe(false);
        await a.sendOk(a.endpoint);
        // With pending mail even the longest wait answers at once (the request deadline guards it).
        const longest = expectValue(await a.call("watch", { cursor: "0", waitMs: watchMaxWaitMs }, { timeoutMs: PROMPT_REPLY_MS }), "watch");
        expect(longest.pending).toBe(true);
        for (const waitMs of [watchMaxWaitMs + 1, watchMinWaitMs - 1, 1.5, "100"]) {
          const reply = await a.call("watch", { cursor: "0", waitMs });
          expect(reply.status, JSON.stringify(waitMs)).toBe(400);
          expectError(reply, "INVALID_REQUEST");
        }
      });
    });

    // -----------------------------------------------------------------------------------------
    describe("registrations", () => {
      test.concurrent("the same generation renews the lease and keeps the endpoint id, also after disconnect", async () => {
        const [a, b] = await pair("renew");
        const renewed = expectValue(await b.renew({ leaseMs: leaseMaxMs }), "connected");
        expect(renewed.endpoint).toEqual(b.endpoint);
        expect(Date.parse(renewed.leaseExpiresAt)).toBeGreaterThan(Date.parse(b.leaseExpiresAt));
        const { envelope } = await a.sendOk(b.endpoint);
        expectValue(await b.disconnect(), "disconnected");
        const revived = expectValue(await b.renew(), "connected");
        expect(revived.endpoint).toEqual(b.endpoint);
        expectValue(await b.call("health"), "health");
        // Accepted mail survives the disconnect.
        expect(idsOf(await b.drain())).toEqual([envelope.envelopeId]);
      });

      test.concurrent("a new generation mints a new endpoint id; the old one is REGISTRATION_EXPIRED", async () => {
        const name = uniqueName("generation");
        const a = await session("generation-sender");
        const first = await session("generation", { callerSession: name });
        const second = await session("generation", { callerSession: name });
        expect(isUuid(second.endpoint.id)).toBe(true);
        expect(second.endpoint.id).not.toBe(first.endpoint.id);
        expectError(await first.call("health"), "REGISTRATION_EXPIRED");
        expectError(await a.send(a.envelopeTo(first.endpoint)), "TARGET_NOT_REGISTERED");
        const { envelope } = await a.sendOk(second.endpoint);
        expect(idsOf(await second.drain())).toEqual([envelope.envelopeId]);
        // Connecting with the retired generation again never revives the retired endpoint (the
        // spec leaves open whether it is refused or treated as yet another generation).
        const again = await first.renew();
        expect(again.body?.value?.endpoint?.id).not.toBe(first.endpoint.id);
      });

      test.concurrent("leaseExpiresAt is now + leaseMs (default leaseDefaultMs)", async () => {
        for (const leaseMs of [undefined, leaseMaxMs / 2]) {
          const before = Date.now();
          const reply = await postJson(base(), connectRequest({ callerSession: uniqueName("lease-at"), generation: crypto.randomUUID(), leaseMs }));
          const after = Date.now();
          const expires = Date.parse(expectValue(reply, "connected").leaseExpiresAt);
          const lease = leaseMs ?? leaseDefaultMs;
          expect(expires).toBeGreaterThanOrEqual(before + lease);
          expect(expires).toBeLessThanOrEqual(after + lease);
        }
      });

      test.concurrent("connect with the current epoch is accepted; endpoint ids are UUIDs of this relay", async () => {
        const a = await session("current-epoch", { epoch: ctx.epoch });
        expect(a.epoch).toBe(ctx.epoch);
        expect(a.endpoint.relay).toBe(RELAY_ID);
        expect(isUuid(a.endpoint.id)).toBe(true);
        expect(Object.keys(a.endpoint).sort()).toEqual(["id", "relay"]);
      });
    });

    // -----------------------------------------------------------------------------------------
    describe("dedupe", () => {
      test.concurrent("an identical resend returns the same acceptanceId with duplicate:true and one delivery", async () => {
        const [a, b] = await pair("dedupe");
        const { envelope, accepted } = await a.sendOk(b.endpoint);
        expect(accepted.duplicate).toBe(false);
        expect(accepted.envelopeId).toBe(envelope.envelopeId);
        expect(isUuid(accepted.acceptanceId)).toBe(true);
        expect(accepted.forwarding).toBe("local");
        const again = expectValue(await a.send(envelope), "accepted");
        expect(again.duplicate).toBe(true);
        expect(again.acceptanceId).toBe(accepted.acceptanceId);
        expect(idsOf(await b.drain())).toEqual([envelope.envelopeId]);
      });

      test.concurrent("an identical resend after the ACK is still duplicate:true", async () => {
        const [a, b] = await pair("dedupe-acked");
        const { envelope, accepted } = await a.sendOk(b.endpoint);
        expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged");
        const again = expectValue(await a.send(envelope), "accepted");
        expect(again.duplicate).toBe(true);
        expect(again.acceptanceId).toBe(accepted.acceptanceId);
        expect(await b.drain()).toEqual([]);
      });

      test("concurrent identical sends (5 at once) yield one acceptanceId and one delivery", async () => {
        const [a, b] = await pair("dedupe-concurrent");
        const envelope = a.envelopeTo(b.endpoint);
        const replies = await Promise.all(Array.from({ length: 5 }, () => a.send(envelope)));
        const values = replies.map((reply) => expectValue(reply, "accepted"));
        expect(new Set(values.map((value) => value.acceptanceId)).size).toBe(1);
        expect(values.filter((value) => value.duplicate === false).length).toBe(1);
        expect(idsOf(await b.drain())).toEqual([envelope.envelopeId]);
      });
    });

    // -----------------------------------------------------------------------------------------
    describe("cursors and acknowledgements", () => {
      test.concurrent('cursors are decimal strings, the first is "1", and they increase', async () => {
        const [a, b] = await pair("cursors");
        for (let index = 0; index < 3; index += 1) await a.sendOk(b.endpoint, { payload: { index } });
        const deliveries = await b.drain();
        for (const delivery of deliveries) expect(typeof delivery.cursor).toBe("string");
        expect(cursorsOf(deliveries)).toEqual(["1", "2", "3"]);
        expect(deliveries.map((delivery) => (delivery.envelope.payload as { index: number }).index)).toEqual([0, 1, 2]);
      });

      test.concurrent("receiving never acknowledges: receiving twice returns the same items", async () => {
        const [a, b] = await pair("receive-twice");
        const { envelope } = await a.sendOk(b.endpoint);
        const first = await b.page("0");
        const second = await b.page("0");
        expect(second).toEqual(first);
        expect(idsOf(first.deliveries)).toEqual([envelope.envelopeId]);
        expect(first.deliveries[0].envelope).toEqual(envelope);
        expect(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate).toBe(false);
      });

      test.concurrent('after ACKing cursor 2 of 1..3, receive from "0" returns 1 and 3, from "1" returns 3', async () => {
        const [a, b] = await pair("sparse");
        const ids: string[] = [];
        for (let index = 0; index < 3; index += 1) ids.push((await a.sendOk(b.endpoint)).envelope.envelopeId);
        const [first, second, third] = ids as [string, string, string];
        expectValue(await b.acknowledge(second), "acknowledged");
        const fromZero = await b.page("0");
        expect(cursorsOf(fromZero.deliveries)).toEqual(["1", "3"]);
        expect(idsOf(fromZero.deliveries)).toEqual([first, third]);
        expect(fromZero.nextCursor).toBe("3");
        expect(cursorsOf((await b.page("1")).deliveries)).toEqual(["3"]);
        expect(cursorsOf((await b.page("2")).deliveries)).toEqual(["3"]);
        // Cursors are never renumbered: the next admission gets 4.
        await a.sendOk(b.endpoint);
        expect(cursorsOf((await b.page("0")).deliveries)).toEqual(["1", "3", "4"]);
      });

      test.concurrent("ACK twice: the second answers duplicate:true", async () => {
        const [a, b] = await pair("ack-twice");
        const { envelope } = await a.sendOk(b.endpoint);
        expect(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate).toBe(false);
        expect(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate).toBe(true);
        expect(await b.drain()).toEqual([]);
      });

      test.concurrent("nextCursor is the requested cursor on an empty page", async () => {
        const [a, b] = await pair("empty-page");
        const empty = await b.page("0");
        expect(empty).toEqual({ kind: "page", deliveries: [], nextCursor: "0", hasMore: false });
        const ids = [];
        for (let index = 0; index < 2; index += 1) ids.push((await a.sendOk(b.endpoint)).envelope.envelopeId);
        for (const id of ids) expectValue(await b.acknowledge(id), "acknowledged");
        for (const cursor of ["0", "1", "2"]) {
          const page = await b.page(cursor);
          expect(page.deliveries).toEqual([]);
          expect(page.nextCursor).toBe(cursor);
          expect(page.hasMore).toBe(false);
        }
      });
    });

    // -----------------------------------------------------------------------------------------
    describe("health", () => {
      test("health reports the store and its counts move with send and ack", async () => {
        const [a, b] = await pair("health");
        const store = async () => expectValue(await a.call("health"), "health").store;
        const before = await store();
        for (const key of ["activeItems", "activeBytes", "receipts", "receiptBytes", "registrations", "sessions", "routes", "metadataBytes", "expiryEntries", "logDrops"]) {
          expect(typeof before[key], key).toBe("number");
        }
        expect(typeof before.investigationEnabled).toBe("boolean");
        const { envelope } = await a.sendOk(b.endpoint);
        const sent = await store();
        expect(sent.activeItems).toBe(before.activeItems + 1);
        expect(sent.activeBytes).toBeGreaterThan(before.activeBytes);
        expect(sent.receipts).toBe(before.receipts + 1);
        expect(sent.receiptBytes).toBeGreaterThan(before.receiptBytes);
        expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged");
        const acked = await store();
        expect(acked.activeItems).toBe(before.activeItems);
        expect(acked.activeBytes).toBe(before.activeBytes);
        // The receipt stays for dedupe.
        expect(acked.receipts).toBe(before.receipts + 1);
      });

      testIf(additions())("additions: a new generation retires the old endpoint's mailbox and reclaims its budget", async () => {
        const [a, b] = await pair("health-retire");
        const store = async () => expectValue(await a.call("health"), "health").store;
        const before = await store();
        for (let index = 0; index < 3; index += 1) await a.sendOk(b.endpoint);
        expect((await store()).activeItems).toBe(before.activeItems + 3);
        const successor = await session("health-retire", { callerSession: b.callerSession });
        const after = await store();
        expect(after.activeItems).toBe(before.activeItems);
        expect(after.activeBytes).toBe(before.activeBytes);
        expect(await successor.drain()).toEqual([]);
      });

      testIf(additions())("additions: no per-client request bucket on loopback (240 quick requests are all served)", async () => {
        const a = await session("no-bucket");
        const replies = await inBatches(240, 8, () => a.call("health"));
        expect(replies.filter((reply) => reply.status !== 200).map(describeReply)).toEqual([]);
      });
    });

    // -----------------------------------------------------------------------------------------
    describe("additions", () => {
      testIf(hasFeature(FEATURE_WATCH))("watch with no mail and waitMs 300 answers pending:false after the wait", async () => {
        const a = await session("watch-idle");
        const waitMs = 300;
        const reply = await a.call("watch", { cursor: "0", waitMs });
        const value = expectValue(reply, "watch");
        expect(value).toEqual({ kind: "watch", pending: false, highestCursor: "0" });
        // Timer slack of a few ms aside, the relay held the request for the whole wait.
        expect(reply.elapsedMs).toBeGreaterThanOrEqual(waitMs - 5);
      });

      testIf(hasFeature(FEATURE_WATCH))("a watch started before a send answers pending:true within 200 ms of the acceptance", async () => {
        const [a, b] = await pair("watch-wake");
        let settled = false;
        // A wait far longer than the 200 ms bound: if the doorbell did not ring, the watch would
        // only answer when this wait elapses.
        const waitMs = LONG_WATCH_MS;
        const watching = b.call("watch", { cursor: "0", waitMs }, { timeoutMs: waitMs + PROMPT_REPLY_MS }).finally(() => {
          settled = true;
        });
        await sleep(150);
        expect(settled, "the watch answered before any mail arrived").toBe(false);
        const sent = await a.send(a.envelopeTo(b.endpoint));
        expectValue(sent, "accepted");
        const woke = await watching;
        const value = expectValue(woke, "watch");
        expect(value.pending).toBe(true);
        expect(value.highestCursor).toBe("1");
        expect(woke.receivedAt - sent.receivedAt).toBeLessThan(DOORBELL_BOUND_MS);
        // The doorbell delivered nothing and acknowledged nothing.
        expect(cursorsOf(await b.drain())).toEqual(["1"]);
      });

      testIf(hasFeature(FEATURE_WATCH))("a watch with pending mail answers at once and never acknowledges", async () => {
        const [a, b] = await pair("watch-pending");
        const { envelope } = await a.sendOk(b.endpoint);
        const value = expectValue(await b.call("watch", { cursor: "0", waitMs: watchMaxWaitMs }, { timeoutMs: PROMPT_REPLY_MS }), "watch");
        expect(value).toEqual({ kind: "watch", pending: true, highestCursor: "1" });
        // Nothing after cursor 1: not pending.
        expect(expectValue(await b.call("watch", { cursor: "1", waitMs: watchMinWaitMs }), "watch").pending).toBe(false);
        expect(idsOf(await b.drain())).toEqual([envelope.envelopeId]);
        expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged");
        expect(expectValue(await b.call("watch", { cursor: "0", waitMs: watchMinWaitMs }), "watch")).toEqual({
          kind: "watch",
          pending: false,
          highestCursor: "1",
        });
      });

      concurrentIf(hasFeature(FEATURE_ACK_BATCH))("ack-batch-v1: one acknowledge with envelopeIds answers each id's outcome in order; the mailbox is empty after", async () => {
        const [a, b] = await pair("ack-batch");
        const sent = [await a.sendOk(b.endpoint), await a.sendOk(b.endpoint), await a.sendOk(b.endpoint)].map(({ envelope }) => envelope.envelopeId as string);
        expect(idsOf(await b.drain())).toEqual(sent);
        const first = expectValue(await b.call("acknowledge", { envelopeIds: [sent[0], sent[1]] }), "acknowledged-batch");
        expect(first.results).toEqual([
          { envelopeId: sent[0], outcome: "acknowledged" },
          { envelopeId: sent[1], outcome: "acknowledged" },
        ]);
        const unknown = crypto.randomUUID();
        const second = expectValue(await b.call("acknowledge", { envelopeIds: [sent[0], sent[2], unknown] }), "acknowledged-batch");
        expect(second.results).toEqual([
          { envelopeId: sent[0], outcome: "duplicate" },
          { envelopeId: sent[2], outcome: "acknowledged" },
          { envelopeId: unknown, outcome: "unknown" },
        ]);
        expect(await b.drain()).toEqual([]);
        // Another endpoint's envelope is unknown to this one.
        const [c, d] = await pair("ack-batch-other");
        const { envelope } = await c.sendOk(d.endpoint);
        expect(expectValue(await b.call("acknowledge", { envelopeIds: [envelope.envelopeId] }), "acknowledged-batch").results).toEqual([{ envelopeId: envelope.envelopeId, outcome: "unknown" }]);
        expect(idsOf(await d.drain())).toEqual([envelope.envelopeId]);
      });

      concurrentIf(hasFeature(FEATURE_ACK_BATCH))("ack-batch-v1: both forms, an empty or oversized list, or an id twice is 400 INVALID_REQUEST and acknowledges nothing", async () => {
        const [a, b] = await pair("ack-batch-bad");
        const { envelope } = await a.sendOk(b.endpoint);
        const id = envelope.envelopeId as string;
        const tooMany = [id, ...Array.from({ length: ackBatchMaxItems }, () => crypto.randomUUID())];
        for (const fields of [{ envelopeId: id, envelopeIds: [id] }, {}, { envelopeIds: [] }, { envelopeIds: tooMany }, { envelopeIds: [id, id] }, { envelopeIds: [id, 7] }]) {
          expectError(await b.call("acknowledge", fields), "INVALID_REQUEST", HTTP_STATUS.badRequest);
        }
        expect(idsOf(await b.drain())).toEqual([id]);
        expectValue(await b.acknowledge(id), "acknowledged");
      });

      concurrentIf(hasFeature(FEATURE_SUCCESSOR))("resolve followSuccessor:true on a retired endpoint answers the live successor", async () => {
        const name = uniqueName("successor");
        const asker = await session("successor-asker");
        const first = await session("successor", { callerSession: name });
        const second = await session("successor", { callerSession: name });
        const followed = expectValue(await asker.call("resolve", { target: first.endpoint, followSuccessor: true }), "resolved");
        expect(followed).toEqual({ kind: "resolved", endpoint: second.endpoint, successorOf: first.endpoint });
        expectError(await asker.call("resolve", { target: first.endpoint }), "TARGET_NOT_REGISTERED");
        expectError(await asker.call("resolve", { target: first.endpoint, followSuccessor: false }), "TARGET_NOT_REGISTERED");
        // A live endpoint resolves to itself, without successorOf.
        expect(expectValue(await asker.call("resolve", { target: second.endpoint, followSuccessor: true }), "resolved")).toEqual({
          kind: "resolved",
          endpoint: second.endpoint,
        });
        // A chain of generations resolves to the newest one.
        const third = await session("successor", { callerSession: name });
        const chained = expectValue(await asker.call("resolve", { target: first.endpoint, followSuccessor: true }), "resolved");
        expect(chained).toEqual({ kind: "resolved", endpoint: third.endpoint, successorOf: first.endpoint });
        // A disconnected (not superseded) endpoint has no successor.
        expectValue(await third.disconnect(), "disconnected");
        expectError(await asker.call("resolve", { target: third.endpoint, followSuccessor: true }), "TARGET_NOT_REGISTERED");
        expectError(await asker.call("resolve", { target: first.endpoint, followSuccessor: true }), "TARGET_NOT_REGISTERED");
      });

      concurrentIf(additions())("GET session status: 200 with the live registration, 404 CALLER_NOT_FOUND otherwise", async () => {
        const statusOf = (name: string) => getPath(base(), `${SESSION_STATUS_PATH}?session=${encodeURIComponent(name)}`);
        const name = uniqueName("status");
        const a = await session("status", { callerSession: name });
        const live = await statusOf(name);
        expect(live.status).toBe(HTTP_STATUS.ok);
        expect(live.headers.get("cache-control")).toBe("no-store");
        expect(live.body).toEqual({
          session: name,
          taskEndpoint: a.endpoint,
          taskTransport: { profile: RELAY_PROFILE, epoch: ctx.epoch, endpoint: a.endpoint, leaseExpiresAt: a.leaseExpiresAt },
        });
        const successor = await session("status", { callerSession: name });
        expect((await statusOf(name)).body.taskEndpoint).toEqual(successor.endpoint);
        expectError(await statusOf(uniqueName("status-ghost")), "CALLER_NOT_FOUND");
        expectValue(await successor.disconnect(), "disconnected");
        expectError(await statusOf(name), "CALLER_NOT_FOUND");
      });
    });

    // -----------------------------------------------------------------------------------------
    describe("binding-secret-v1", () => {
      const secured = hasFeature(FEATURE_BINDING_SECRET);
      /** A session protected by a secret of its own choosing (`extra.bindingSecret` to pick it). */
      const protectedSession = (label: string, extra: Parameters<typeof WireSession.connect>[1] = {}) =>
        session(label, { bindingSecret: mintBindingSecret(), ...extra });
      /** `owner`'s bound request as any process could send it: with `secret` in place of the owner's (`undefined`: none). */
      const asOwner = (owner: WireSession, operation: string, fields: Record<string, unknown>, secret: string | undefined) =>
        postJson(base(), { ...owner.request(operation, fields), bindingSecret: secret });
      /** A connect under `owner`'s name: a new generation and no secret unless `fields` say otherwise. */
      const connectAs = (owner: WireSession, fields: Record<string, unknown>) =>
        postJson(base(), { ...connectRequest({ callerSession: owner.callerSession, generation: crypto.randomUUID() }), ...fields });
      const statusOf = (name: string) => getPath(base(), `${SESSION_STATUS_PATH}?session=${encodeURIComponent(name)}`);
      /** A 403 SESSION_PROTECTED whose retryAfterMs is within the holder's lease. */
      const expectProtected = (reply: ReplyLike, label: string) => {
        expect(reply.status, label).toBe(HTTP_STATUS.forbidden);
        const error = expectError(reply, "SESSION_PROTECTED");
        expect(error.retryAfterMs, label).toBeGreaterThan(0);
        expect(error.retryAfterMs, label).toBeLessThanOrEqual(leaseDefaultMs);
      };

      concurrentIf(secured)("connect with the client's bindingSecret protects the registration; no reply or route ever carries the secret", async () => {
        const secret = mintBindingSecret();
        const reply = await postJson(base(), connectRequest({ callerSession: uniqueName("secret-shown"), generation: crypto.randomUUID(), bindingSecret: secret }));
        const value = expectValue(reply, "connected");
        expect(Object.keys(value)).not.toContain("bindingSecret");
        expect(reply.text).not.toContain(secret);
        const a = await protectedSession("secret-shown");
        // A plain registration is unprotected; renewed with a secret, it is protected by it.
        const plain = await session("secret-plain");
        expectValue(await plain.call("health"), "health");
        const renewed = await plain.renew({ bindingSecret: secret });
        expect(Object.keys(expectValue(renewed, "connected"))).not.toContain("bindingSecret");
        expect(renewed.text).not.toContain(secret);
        expectError(await plain.call("health"), "BINDING_SECRET_REQUIRED");
        expectValue(await plain.call("health", { bindingSecret: secret }), "health");
        const shown = [
          await a.renew(),
          await statusOf(a.callerSession),
          await getPath(base(), SESSION_LIST_PATH),
          await a.call("health"),
          await a.call("resolve", { target: a.endpoint }),
        ];
        for (const shownReply of shown) {
          expect(shownReply.status, shownReply.text).toBe(HTTP_STATUS.ok);
          expect(shownReply.text).not.toContain(a.bindingSecret!);
        }
        // Protected: a bound operation without the secret is refused.
        expectError(await a.call("health", { bindingSecret: undefined }), "BINDING_SECRET_REQUIRED");
      });

      concurrentIf(secured)("every bound operation on a protected registration: no secret 401 BINDING_SECRET_REQUIRED, a wrong one 403 BINDING_SECRET_INVALID; nothing is read, acknowledged or ended", async () => {
        const sender = await session("secret-sender");
        const [owner, other] = await Promise.all([protectedSession("secret-owner"), protectedSession("secret-other")]);
        const { envelope } = await sender.sendOk(owner.endpoint);
        const operations: Record<string, Record<string, unknown>> = {
          resolve: { target: sender.endpoint },
          send: { envelope: owner.envelopeTo(sender.endpoint) },
          receive: { cursor: "0" },
          acknowledge: { envelopeId: envelope.envelopeId },
          health: {},
          disconnect: {},
          ...(hasFeature(FEATURE_WATCH) ? { watch: { cursor: "0", waitMs: watchMinWaitMs } } : {}),
        };
        for (const [operation, fields] of Object.entries(operations)) {
          const missing = await asOwner(owner, operation, fields, undefined);
          expect(missing.status, operation).toBe(HTTP_STATUS.unauthorized);
          expectError(missing, "BINDING_SECRET_REQUIRED");
          expect(missing.headers.get("www-authenticate"), operation).toBe(FEATURE_BINDING_SECRET);
          for (const secret of [mintBindingSecret(), other.bindingSecret]) {
            const wrong = await asOwner(owner, operation, fields, secret);
            expect(wrong.status, operation).toBe(HTTP_STATUS.forbidden);
            expectError(wrong, "BINDING_SECRET_INVALID");
          }
        }
        // Nothing happened: the owner is live and its mail unacknowledged; nobody sent as it.
        expect(idsOf(await owner.drain())).toEqual([envelope.envelopeId]);
        expect(expectValue(await owner.acknowledge(envelope.envelopeId), "acknowledged").duplicate).toBe(false);
        expect(await sender.drain()).toEqual([]);
        expectValue(await other.call("health"), "health");
      });

      concurrentIf(secured)("a secret on an unprotected registration is 403 BINDING_SECRET_INVALID", async () => {
        const plain = await session("secret-unasked");
        expectError(await plain.call("health", { bindingSecret: mintBindingSecret() }), "BINDING_SECRET_INVALID");
        expectValue(await plain.call("health"), "health");
      });

      concurrentIf(secured)("connect under a live protected registration's name without its secret: 403 SESSION_PROTECTED with retryAfterMs within its lease; it keeps its endpoint and mail", async () => {
        const sender = await session("protected-sender");
        const owner = await protectedSession("protected-owner");
        const { envelope } = await sender.sendOk(owner.endpoint);
        const attempts: Record<string, Record<string, unknown>> = {
          "a new generation": {},
          "a new generation with another secret": { bindingSecret: mintBindingSecret() },
          "the same generation": { generation: owner.generation },
          "the same generation with another secret": { generation: owner.generation, bindingSecret: mintBindingSecret() },
        };
        for (const [label, fields] of Object.entries(attempts)) expectProtected(await connectAs(owner, fields), label);
        expect((await statusOf(owner.callerSession)).body.taskEndpoint).toEqual(owner.endpoint);
        expect(idsOf(await owner.drain())).toEqual([envelope.envelopeId]);
        expect(expectValue(await owner.acknowledge(envelope.envelopeId), "acknowledged").duplicate).toBe(false);
      });

      concurrentIf(secured)("a connect repeated with the same secret (as after a lost reply) succeeds and keeps the registration; with another secret it is SESSION_PROTECTED", async () => {
        const sender = await session("retry-sender");
        const owner = await protectedSession("retry-owner");
        const { envelope } = await sender.sendOk(owner.endpoint);
        // The reply to the first connect never arrived: the client sends the very same connect again, at once.
        for (const attempt of ["first retry", "second retry"]) {
          const again = expectValue(await owner.renew(), "connected");
          expect(again.endpoint, attempt).toEqual(owner.endpoint);
          expect(Date.parse(again.leaseExpiresAt), attempt).toBeGreaterThanOrEqual(Date.parse(owner.leaseExpiresAt));
        }
        expectProtected(await owner.renew({ bindingSecret: mintBindingSecret() }), "the same generation with another secret");
        // Still the one registration, protected by the owner's secret, with its mail.
        expect((await statusOf(owner.callerSession)).body.taskEndpoint).toEqual(owner.endpoint);
        expectError(await asOwner(owner, "health", {}, mintBindingSecret()), "BINDING_SECRET_INVALID");
        expect(idsOf(await owner.drain())).toEqual([envelope.envelopeId]);
        expect(expectValue(await owner.acknowledge(envelope.envelopeId), "acknowledged").duplicate).toBe(false);
      });

      concurrentIf(secured)("the holder renews and replaces its registration (new generation) with its own secret; the retired generation cannot come back", async () => {
        const owner = await protectedSession("holder");
        expect(expectValue(await owner.renew(), "connected").endpoint).toEqual(owner.endpoint);
        expectProtected(await owner.renew({ bindingSecret: undefined }), "a renewal without the secret");
        expectValue(await owner.call("health"), "health");
        const successor = await protectedSession("holder", { callerSession: owner.callerSession, bindingSecret: owner.bindingSecret });
        expect(successor.endpoint.id).not.toBe(owner.endpoint.id);
        expect((await statusOf(owner.callerSession)).body.taskEndpoint).toEqual(successor.endpoint);
        expectError(await owner.call("health"), "REGISTRATION_EXPIRED");
        expectError(await owner.renew(), "REGISTRATION_EXPIRED");
        expectError(await successor.call("health", { bindingSecret: undefined }), "BINDING_SECRET_REQUIRED");
        expectValue(await successor.call("health"), "health");
        expectProtected(await connectAs(owner, { bindingSecret: mintBindingSecret() }), "another secret after the replacement");
      });

      concurrentIf(secured)("once a protected registration ended, a new generation may take the name; reviving the same generation needs the secret", async () => {
        const first = await protectedSession("ended");
        expectValue(await first.disconnect(), "disconnected");
        const missing = await first.renew({ bindingSecret: undefined });
        expect(missing.status).toBe(HTTP_STATUS.unauthorized);
        expectError(missing, "BINDING_SECRET_REQUIRED");
        expectError(await first.renew({ bindingSecret: mintBindingSecret() }), "BINDING_SECRET_INVALID");
        expect(expectValue(await first.renew(), "connected").endpoint).toEqual(first.endpoint);
        expectValue(await first.disconnect(), "disconnected");
        const taker = await session("ended", { callerSession: first.callerSession });
        expect(taker.endpoint.id).not.toBe(first.endpoint.id);
        expectError(await first.renew(), "REGISTRATION_EXPIRED");
        // A lapsed lease frees the name too, for a client with another secret.
        const lapsing = await protectedSession("lapsed", { leaseMs: leaseMinMs });
        await sleep(leaseMinMs + 20);
        const next = await protectedSession("lapsed", { callerSession: lapsing.callerSession });
        expect(next.endpoint.id).not.toBe(lapsing.endpoint.id);
      });

      concurrentIf(secured)("malformed binding-secret fields are 400 INVALID_REQUEST: a connect secret is a string of at least bindingSecretMinChars characters; previousSecret is no field", async () => {
        const owner = await protectedSession("secret-fields");
        const connect = () => connectRequest({ callerSession: uniqueName("secret-fields-c"), generation: crypto.randomUUID() });
        const tooShort = exactLength(bindingSecretMinChars - 1);
        for (const bindingSecret of [true, false, 1, null, "", tooShort, exactLength(maxWireIdChars + 1)]) {
          const reply = await postJson(base(), { ...connect(), bindingSecret });
          expectError(reply, "INVALID_REQUEST");
          expect(reply.text).not.toContain(tooShort);
        }
        expectValue(await postJson(base(), { ...connect(), bindingSecret: exactLength(bindingSecretMinChars) }), "connected");
        expectError(await postJson(base(), { ...connect(), bindingSecret: mintBindingSecret(), previousSecret: mintBindingSecret() }), "INVALID_REQUEST");
        for (const bindingSecret of [true, 7, "", exactLength(maxWireIdChars + 1)]) {
          expectError(await owner.call("health", { bindingSecret }), "INVALID_REQUEST");
        }
        expectValue(await owner.call("health"), "health");
      });
    });

    // -----------------------------------------------------------------------------------------
    describe("bounded admission", () => {
      test(
        "relayMaxConcurrentRequests slow requests hold every slot: the next gets 503 RELAY_CAPACITY with retryAfterMs",
        async () => {
          const a = await session("admission");
          const held: RawRequest[] = [];
          const hold = () => {
            const request = openRawRequest(base(), { contentLength: KiB, body: "{" });
            held.push(request);
            return request.sent;
          };
          const live = () => held.filter((request) => !request.closed());
          try {
            // Fill every slot with a request stuck in its body; a refused filler is replaced.
            let refused: Awaited<ReturnType<typeof getProfile>> | undefined;
            for (let attempt = 0; attempt < 10 && refused === undefined; attempt += 1) {
              await Promise.all(Array.from({ length: relayMaxConcurrentRequests - live().length }, hold));
              await sleep(150);
              const probe = await getProfile(base());
              if (probe.status !== 200 && live().length === relayMaxConcurrentRequests) refused = probe;
            }
            expect(refused, "the slow requests never filled the admission slots").toBeDefined();
            expect(live().length).toBe(relayMaxConcurrentRequests);
            const error = expectError(refused!, "RELAY_CAPACITY");
            expect(error.retryAfterMs).toBe(relayOverloadRetryAfterMs);
            expectError(await a.call("health"), "RELAY_CAPACITY");
            // One slot fewer held: requests are worked on again while the others still hold theirs.
            live()[0]!.close();
            let served = false;
            for (let attempt = 0; attempt < 50 && !served; attempt += 1) {
              served = (await getProfile(base())).status === 200;
              if (!served) await sleep(20);
            }
            expect(served, "closing one slow request did not free its slot").toBe(true);
            expect(live().length).toBe(relayMaxConcurrentRequests - 1);
            expectValue(await a.call("health"), "health");
          } finally {
            for (const request of held) request.close();
          }
          // Once all are closed, everything is served again.
          let recovered = false;
          for (let attempt = 0; attempt < 50 && !recovered; attempt += 1) {
            const replies = await Promise.all(Array.from({ length: 4 }, () => a.call("health")));
            recovered = replies.every((reply) => reply.status === 200);
            if (!recovered) await sleep(20);
          }
          expect(recovered).toBe(true);
          const { envelope } = await a.sendOk(a.endpoint);
          expect(idsOf(await a.drain())).toEqual([envelope.envelopeId]);
        },
        relayBodyReadDeadlineMs + TEST_SLACK_MS,
      );
    });
  });
}
