/**
 * Seeded fuzzing of the relay's HTTP endpoint (fast-check, fixed seed, so every run sends the
 * same bodies): random JSON, valid requests with one field replaced by an invalid value, removed
 * or added, wrong types, huge strings near the size limits, invalid UTF-8, wrong content types and
 * random bytes. Every case must be refused with a typed error body (`ok:false`,
 * `profile:"volatile-v1"`, the epoch, a registered code with its registry status), never hanging
 * and never with HTTP 500. Afterwards the relay must still serve `health` and a full
 * connect → send → receive → acknowledge cycle, and no fuzzed request may have changed state.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { expectWireError, expectWireValue } from "../../src/conformance/kit.ts";
import { connectRequest, postBody, uniqueName, type WireReply, WireSession } from "../../src/conformance/wire-client.ts";
import { canonicalBytes, utf8Bytes } from "../../src/protocol/canonical-json.ts";
import { isUuid } from "../../src/protocol/endpoint.ts";
import { errorSpec, isRegisteredCode } from "../../src/protocol/errors.ts";
import {
  maxEnvelopeAgeMs,
  KiB,
  defaultLeaseMs,
  maxLeaseMs,
  minLeaseMs,
  maxProtocolVersionsItems,
  maxRelayPayloadBytes,
  maxRequestBodyBytes,
  maxWireIdChars,
  maxReceivePageItems,
  maxWatchWaitMs,
  minWatchWaitMs,
} from "../../src/protocol/limits.ts";
import { RELAY_ID, RELAY_PROFILE, WIRE_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import { RECEIVE_LIMIT, RELAY_OPERATIONS, RELAY_REQUEST_KEYS, type RelayOperation } from "../../src/protocol/wire.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";

const SEED = 0x5eed_2026;
/**
 * How long a fuzzed request is waited for before it counts as hung: a budget for a loaded machine,
 * not a measurement (how fast the relay refuses is for `npm run bench`).
 */
const CASE_DEADLINE_MS = 15_000;
/** Requests in flight at once (well under the relay's admission slots). */
const FUZZ_CONCURRENCY = 4;

interface FuzzCase {
  readonly label: string;
  readonly body: string | Uint8Array;
  /** Default `application/json`; `null` sends no Content-Type. */
  readonly contentType?: string | null;
}

type Json = unknown;
type Request = Record<string, Json>;

let relay: RelayProcess | undefined;
let sender: WireSession;
let receiver: WireSession;
const connectName = uniqueName("fuzz-connect");
const connectGeneration = crypto.randomUUID();

beforeAll(async () => {
  relay = await startRelayProcess();
  sender = await WireSession.connect(relay.url, { label: "fuzz-sender", leaseMs: maxLeaseMs });
  receiver = await WireSession.connect(relay.url, { label: "fuzz-receiver", leaseMs: maxLeaseMs });
});

afterAll(async () => {
  await relay?.stop();
});

// ---------------------------------------------------------------------------------------------
// Arbitraries of values that are invalid for one field (so a mutated request can never succeed)
// ---------------------------------------------------------------------------------------------

const notAString = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 }),
);
const notAnInteger = fc.oneof(
  fc.double().filter((value) => !Number.isInteger(value)),
  fc.string({ maxLength: 6 }),
  fc.boolean(),
  fc.constant(null),
  fc.constant([]),
);
const badWireId = fc.oneof(
  notAString,
  fc.constant(""),
  fc.integer({ min: maxWireIdChars + 1, max: maxWireIdChars + 64 }).map((length) => "i".repeat(length)),
);
const badProfile = fc.oneof(
  notAString,
  fc.string({ maxLength: 20 }).filter((value) => value !== RELAY_PROFILE),
  fc.constant("VOLATILE-V1"),
);
const badOperation = fc.oneof(
  notAString,
  fc.string({ maxLength: 20 }).filter((value) => !(RELAY_OPERATIONS as readonly string[]).includes(value)),
  fc.constantFrom("Connect", "SEND", "receivePeer", "resolve-peer", " health"),
);
const badCursor = fc.oneof(
  notAString,
  // Any well-formed cursor but "0" is past the highest assigned (the receiver gets no mail).
  fc.string({ maxLength: 40 }).filter((value) => value !== "0"),
  fc.bigInt({ min: 1n, max: 10n ** 40n }).map(String),
);
const outsideRange = (minimum: number, maximum: number) =>
  fc.oneof(fc.integer({ max: minimum - 1 }), fc.integer({ min: maximum + 1 }), notAnInteger);
const badEndpoint = fc.oneof(
  notAString,
  fc.record({ relay: fc.string({ maxLength: 30 }).filter((relay) => relay !== RELAY_ID), id: fc.uuid() }),
  fc.record({ relay: fc.constant(RELAY_ID), id: fc.oneof(fc.uuid(), fc.string({ maxLength: 40 })) }),
  fc.record({ relay: fc.constant(RELAY_ID), id: fc.uuid(), extra: fc.integer() }),
  fc.record({ relay: fc.constant(RELAY_ID) }),
);
const badProtocolVersions = fc.oneof(
  fc.constant([]),
  fc.array(
    fc.integer().filter((value) => value !== WIRE_PROTOCOL_VERSION),
    { minLength: 1, maxLength: maxProtocolVersionsItems },
  ),
  fc.array(fc.constant(WIRE_PROTOCOL_VERSION), { minLength: maxProtocolVersionsItems + 1, maxLength: maxProtocolVersionsItems + 4 }),
  fc.array(
    fc.oneof(
      fc.string(),
      fc.double().filter((value) => !Number.isInteger(value)),
    ),
    { minLength: 1, maxLength: 3 },
  ),
  fc.integer(),
  fc.string(),
  fc.constant(null),
);
/** A `createdAt` that is no date, or a date far outside the freshness window. */
const badCreatedAt = fc.oneof(
  notAString,
  fc.string({ maxLength: 30 }).filter((value) => {
    const parsed = Date.parse(value);
    return Number.isNaN(parsed) || Math.abs(parsed - Date.now()) > 100 * maxEnvelopeAgeMs;
  }),
  fc.constantFrom(new Date(0).toISOString(), "9999-12-31T23:59:59.999Z", "2026-02-30T25:61:00Z", ""),
);
const randomKey = fc.string({ minLength: 1, maxLength: 12 });
/** Wrong-typed values every field is also tried with (none is valid for any field but `followSuccessor`). */
const TYPE_CONFUSION: readonly Json[] = [null, true, [], {}, [null], { a: 1 }, 1.5, -1, ""];

// ---------------------------------------------------------------------------------------------
// Valid request templates and their fields' invalid values
// ---------------------------------------------------------------------------------------------

interface Template {
  readonly make: () => Request;
  /** Required fields (removing one makes the request invalid). */
  readonly required: readonly string[];
  /** Per field, values that make the request invalid. */
  readonly invalid: Record<string, fc.Arbitrary<Json>>;
}

function templates(): Record<string, Template> {
  const binding = ["operation", "profile", "epoch", "callerSession", "endpoint"];
  const bindingInvalid = {
    operation: badOperation,
    profile: badProfile,
    epoch: fc.oneof(notAString, fc.string({ maxLength: 40 }), fc.uuid()),
    // Out of bounds, or a name that never connected.
    callerSession: fc.oneof(
      badWireId,
      fc.string({ minLength: 1, maxLength: 30 }).map((name) => `fuzz-unknown-${name}`),
    ),
    endpoint: badEndpoint,
  };
  const envelope = () => sender.envelopeTo(receiver.endpoint, { payload: { fuzz: true } });
  return {
    connect: {
      make: () => connectRequest({ callerSession: connectName, generation: connectGeneration, leaseMs: defaultLeaseMs }),
      required: ["operation", "profile", "callerSession", "generation", "protocolVersions"],
      invalid: {
        operation: badOperation,
        profile: badProfile,
        callerSession: badWireId,
        generation: badWireId,
        protocolVersions: badProtocolVersions,
        leaseMs: outsideRange(minLeaseMs, maxLeaseMs),
        epoch: fc.oneof(notAString, fc.string({ maxLength: 40 }), fc.uuid()),
      },
    },
    resolve: {
      make: () => sender.request("resolve", { target: receiver.endpoint }),
      required: [...binding, "target"],
      invalid: {
        ...bindingInvalid,
        target: fc.oneof(notAString, fc.record({ relay: fc.constant(RELAY_ID), id: fc.uuid() }), badEndpoint),
        followSuccessor: fc.oneof(fc.integer(), fc.string(), fc.constant(null)),
      },
    },
    send: {
      make: () => sender.request("send", { envelope: envelope() }),
      required: [...binding, "envelope"],
      invalid: {
        ...bindingInvalid,
        envelope: fc.oneof(
          notAString,
          fc.record({ key: fc.constant("envelopeId"), value: badWireId }),
          fc.record({
            key: fc.constant("protocolVersion"),
            value: fc.oneof(
              fc.integer().filter((value) => value !== WIRE_PROTOCOL_VERSION),
              notAnInteger,
            ),
          }),
          fc.record({ key: fc.constant("source"), value: fc.oneof(badEndpoint, fc.constant(receiver.endpoint)) }),
          fc.record({
            key: fc.constant("target"),
            value: fc.oneof(badEndpoint, fc.record({ relay: fc.constant(RELAY_ID), id: fc.uuid() })),
          }),
          fc.record({ key: fc.constant("createdAt"), value: badCreatedAt }),
          fc.record({
            key: fc.constant("payload"),
            value: fc.integer({ min: 1, max: 2 * KiB }).map((extra) => ({ d: "p".repeat(maxRelayPayloadBytes + extra) })),
          }),
          fc.record({
            key: fc.constant("remove"),
            value: fc.constantFrom("envelopeId", "protocolVersion", "source", "target", "payload", "createdAt"),
          }),
          fc.record({ key: fc.constant("add"), value: randomKey }),
        ),
      },
    },
    receive: {
      make: () => receiver.request("receive", { cursor: "0", limit: maxReceivePageItems }),
      required: [...binding, "cursor"],
      invalid: { ...bindingInvalid, cursor: badCursor, limit: outsideRange(RECEIVE_LIMIT.minimum, maxReceivePageItems) },
    },
    acknowledge: {
      // Never valid: nothing is ever admitted, so every envelopeId is unknown.
      make: () => receiver.request("acknowledge", { envelopeId: crypto.randomUUID() }),
      required: [...binding, "envelopeId"],
      invalid: { ...bindingInvalid, envelopeId: fc.oneof(badWireId, fc.string({ minLength: 1, maxLength: 20 })) },
    },
    disconnect: {
      make: () => sender.request("disconnect"),
      required: binding,
      invalid: bindingInvalid,
    },
    health: {
      make: () => sender.request("health"),
      required: binding,
      invalid: bindingInvalid,
    },
    watch: {
      make: () => receiver.request("watch", { cursor: "0", waitMs: minWatchWaitMs }),
      required: [...binding, "cursor", "waitMs"],
      invalid: { ...bindingInvalid, cursor: badCursor, waitMs: outsideRange(minWatchWaitMs, maxWatchWaitMs) },
    },
  };
}

/** Applies the `envelope` mutation spec `{key, value}` (or a whole replacement) to a fresh envelope. */
function mutateEnvelope(envelope: Request, spec: Json): Json {
  if (typeof spec !== "object" || spec === null || Array.isArray(spec) || !("key" in spec)) return spec;
  const { key, value } = spec as { key: string; value: Json };
  const copy: Request = { ...envelope };
  if (key === "remove") delete copy[value as string];
  else if (key === "add") copy[Object.hasOwn(copy, value as string) ? `${value}-extra` : (value as string)] = true;
  else copy[key] = value;
  return copy;
}

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

function sample<T>(arbitrary: fc.Arbitrary<T>, count: number, salt: number): T[] {
  return fc.sample(arbitrary, { seed: SEED + salt, numRuns: count });
}

const encoder = new TextEncoder();

function buildCases(): FuzzCase[] {
  const cases: FuzzCase[] = [];
  const all = templates();
  const names = Object.keys(all);

  // 1. Random JSON documents.
  for (const [index, text] of sample(fc.json({ maxDepth: 4 }), 60, 1).entries()) cases.push({ label: `json#${index}`, body: text });

  // 2. Random objects that name a real operation and the profile, with random other members.
  const looseObject = fc.record({
    operation: fc.constantFrom(...RELAY_OPERATIONS),
    extra: fc.dictionary(randomKey, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 }),
  });
  for (const [index, { operation, extra }] of sample(looseObject, 40, 2).entries()) {
    cases.push({ label: `loose#${index}:${operation}`, body: JSON.stringify({ ...extra, operation, profile: RELAY_PROFILE }) });
  }

  // 3. Valid requests with exactly one field replaced by invalid values, removed, or added:
  //    every field of every operation is covered.
  let salt = 100;
  for (const name of names) {
    const template = all[name]!;
    for (const [field, invalid] of Object.entries(template.invalid)) {
      for (const [index, value] of TYPE_CONFUSION.entries()) {
        if (field === "followSuccessor" && typeof value === "boolean") continue;
        const request = template.make();
        request[field] = value;
        cases.push({ label: `confuse:${name}.${field}#${index}`, body: JSON.stringify(request) });
      }
      // The envelope has many ways to be wrong: it gets more samples.
      for (const [index, value] of sample(invalid, field === "envelope" ? 20 : 3, (salt += 1)).entries()) {
        const request = template.make();
        request[field] = field === "envelope" ? mutateEnvelope(request.envelope as Request, value) : value;
        cases.push({ label: `replace:${name}.${field}#${index}`, body: JSON.stringify(request) });
      }
    }
    for (const field of template.required) {
      const request = template.make();
      delete request[field];
      cases.push({ label: `remove:${name}.${field}`, body: JSON.stringify(request) });
    }
    const added = fc.record({ key: randomKey, value: fc.jsonValue({ maxDepth: 2 }) });
    for (const [index, { key, value }] of sample(added, 2, (salt += 1)).entries()) {
      // Never a key the operation allows (an added optional field could make the request valid).
      const request = template.make();
      const allowed = RELAY_REQUEST_KEYS[name as RelayOperation];
      const unknown = allowed.has(key) || Object.hasOwn(request, key) ? `${key}-unknown` : key;
      request[unknown] = value;
      cases.push({ label: `add:${name}.${unknown}#${index}`, body: JSON.stringify(request) });
    }
  }

  // 4. Huge strings near the limits.
  const huge = fc.record({
    shape: fc.constantFrom("padded-body", "long-session", "payload", "long-envelope-id", "long-string-body"),
    overshoot: fc.integer({ min: 1, max: 4 * KiB }),
  });
  for (const [index, { shape, overshoot }] of sample(huge, 25, 4).entries()) {
    let body: string;
    if (shape === "padded-body") {
      const request = JSON.stringify(sender.request("health"));
      body = request + " ".repeat(maxRequestBodyBytes - utf8Bytes(request) + overshoot);
    } else if (shape === "long-session") {
      body = JSON.stringify(sender.request("health", { callerSession: "s".repeat(maxWireIdChars + overshoot) }));
    } else if (shape === "payload") {
      const padding = maxRelayPayloadBytes - canonicalBytes({ d: "" }) + Math.min(overshoot, KiB);
      body = JSON.stringify(
        sender.request("send", { envelope: sender.envelopeTo(receiver.endpoint, { payload: { d: "x".repeat(padding) } }) }),
      );
    } else if (shape === "long-envelope-id") {
      body = JSON.stringify(
        sender.request("send", { envelope: sender.envelopeTo(receiver.endpoint, { envelopeId: "e".repeat(maxWireIdChars + overshoot) }) }),
      );
    } else {
      body = JSON.stringify(sender.request("health", { note: "n".repeat(maxRequestBodyBytes - 2 * KiB + overshoot) }));
    }
    cases.push({ label: `huge#${index}:${shape}+${overshoot}`, body });
  }

  // 5. Invalid UTF-8 inside otherwise valid (or mutated) requests.
  const badBytes = fc.constantFrom(
    [0xff],
    [0xfe],
    [0xc0, 0xaf],
    [0xc1, 0xbf],
    [0xed, 0xa0, 0x80],
    [0xe2, 0x82],
    [0x80],
    [0xf8, 0x88, 0x80, 0x80, 0x80],
    [0xf4, 0x90, 0x80, 0x80],
  );
  const utf8Case = fc.record({
    template: fc.constantFrom(...names),
    bytes: badBytes,
    position: fc.double({ min: 0, max: 1, noNaN: true }),
  });
  for (const [index, spec] of sample(utf8Case, 30, 5).entries()) {
    const text = encoder.encode(JSON.stringify(all[spec.template]!.make()));
    const at = Math.floor(spec.position * text.length);
    const body = new Uint8Array([...text.slice(0, at), ...spec.bytes, ...text.slice(at)]);
    cases.push({ label: `utf8#${index}:${spec.template}@${at}`, body });
  }

  // 6. Valid requests with a wrong content type.
  const contentType = fc.oneof(
    fc.constantFrom(
      "text/plain",
      "text/json",
      "application/jsonx",
      "application/json-patch+json",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/xml",
      "json",
      "*/*",
      "application/javascript",
    ),
    fc
      .string({ maxLength: 30 })
      .filter((value) => value.split(";")[0]!.trim().toLowerCase() !== "application/json" && /^[\x21-\x7e][\x20-\x7e]*$/.test(value)),
  );
  const typeCase = fc.record({
    template: fc.constantFrom("health", "receive", "resolve"),
    contentType: fc.option(contentType, { nil: null, freq: 8 }),
  });
  for (const [index, spec] of sample(typeCase, 30, 6).entries()) {
    cases.push({
      label: `content-type#${index}:${spec.template}:${JSON.stringify(spec.contentType)}`,
      body: encoder.encode(JSON.stringify(all[spec.template]!.make())),
      contentType: spec.contentType,
    });
  }

  // 7. Random bytes.
  for (const [index, bytes] of sample(fc.uint8Array({ minLength: 0, maxLength: 512 }), 20, 7).entries()) {
    cases.push({ label: `bytes#${index}`, body: bytes });
  }
  return cases;
}

/** What is wrong with a fuzz reply, or `undefined` when it is a proper typed refusal. */
function problemWith(reply: WireReply, epoch: string): string | undefined {
  const body = reply.body;
  if (reply.status === 500) return "HTTP 500";
  if (typeof body !== "object" || body === null) return `HTTP ${reply.status} without a JSON body`;
  if (body.ok !== false) return `HTTP ${reply.status} not refused`;
  if (body.profile !== RELAY_PROFILE) return `profile ${JSON.stringify(body.profile)}`;
  if (body.epoch !== epoch) return `epoch ${JSON.stringify(body.epoch)}`;
  const code = body.error?.code;
  if (typeof code !== "string" || !isRegisteredCode(code)) return `unregistered code ${JSON.stringify(code)}`;
  // The relay answers an unexpected exception with RELAY_UNAVAILABLE: malformed input must never cause one.
  if (code === "RELAY_UNAVAILABLE") return "internal failure (RELAY_UNAVAILABLE)";
  if (typeof body.error.retryable !== "boolean" || body.error.retryable !== errorSpec(code).retryable)
    return `${code} retryable ${body.error.retryable}`;
  const status = errorSpec(code).httpStatus;
  const bodySizeRefusal = code === "INVALID_REQUEST" && reply.status === 413;
  if (reply.status !== status && !bodySizeRefusal) return `${code} with HTTP ${reply.status} (expected ${status})`;
  return undefined;
}

describe("relay fuzzing", () => {
  test("at least 300 seeded malformed requests are each refused with a typed error, never HTTP 500, none hanging", async () => {
    const cases = buildCases();
    expect(cases.length).toBeGreaterThanOrEqual(300);
    const epoch = relay!.epoch;
    const failures: string[] = [];
    const codes = new Map<string, number>();
    for (let start = 0; start < cases.length; start += FUZZ_CONCURRENCY) {
      await Promise.all(
        cases.slice(start, start + FUZZ_CONCURRENCY).map(async (fuzz) => {
          let reply: WireReply;
          try {
            reply = await postBody(relay!.url, fuzz.body, { contentType: fuzz.contentType, timeoutMs: CASE_DEADLINE_MS });
          } catch (error) {
            failures.push(`${fuzz.label}: ${String(error)}`);
            return;
          }
          const problem = problemWith(reply, epoch);
          if (problem !== undefined) failures.push(`${fuzz.label}: ${problem} — ${reply.text.slice(0, 200)}`);
          else codes.set(reply.body.error.code, (codes.get(reply.body.error.code) ?? 0) + 1);
        }),
      );
    }
    expect(failures).toEqual([]);
    // The cases reach past the body checks: several distinct refusals were produced.
    for (const code of [
      "INVALID_REQUEST",
      "RELAY_PROFILE_REQUIRED",
      "SOURCE_MISMATCH",
      "INVALID_CURSOR",
      "RELAY_RESET",
      "CALLER_NOT_FOUND",
    ]) {
      expect(codes.get(code) ?? 0, `no fuzz case produced ${code}: ${JSON.stringify([...codes])}`).toBeGreaterThan(0);
    }
  }, 60_000);

  test("afterwards the relay answers health and a full connect/send/receive/ack cycle works; nothing fuzzed was admitted", async () => {
    const url = relay!.url;
    const epoch = relay!.epoch;
    // The fuzzed sessions are intact: no mutated disconnect succeeded and no mutated send was admitted.
    expectWireValue(await sender.call("health"), "health", epoch);
    expect(await receiver.drain()).toEqual([]);
    // The fuzz connect name never registered.
    expectWireError(await postBody(url, JSON.stringify({ ...sender.request("health"), callerSession: connectName })), "CALLER_NOT_FOUND", {
      epoch,
    });

    const a = await WireSession.connect(url, { label: "after-fuzz-a" });
    const b = await WireSession.connect(url, { label: "after-fuzz-b" });
    expect(a.epoch).toBe(epoch);
    expect(isUuid(b.endpoint.id)).toBe(true);
    const { envelope, accepted } = await a.sendOk(b.endpoint, { payload: { after: "fuzz" } });
    expect(accepted.duplicate).toBe(false);
    const page = await b.page("0");
    expect(page.deliveries).toEqual([{ cursor: "1", envelope }]);
    expect(expectWireValue(await b.acknowledge(envelope.envelopeId), "acknowledged", epoch).duplicate).toBe(false);
    expect((await b.page("0")).deliveries).toEqual([]);
    expectWireValue(await b.call("health"), "health", epoch);
  });
});
