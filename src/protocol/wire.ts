/**
 * The `volatile-v1` relay wire in one place (docs/wire.md): the request schema and the reply
 * value of every operation, the response bodies (success, error, profile, session status and
 * list), and the cursor grammar. The relay server, the client and the conformance suite all use
 * these.
 *
 * Requests are strict (an unknown key is `INVALID_REQUEST`). Replies are open: a reader requires
 * the members named here and ignores others, so a newer relay may add members.
 *
 * Only the package root of `@sinclair/typebox` is imported: the client loads this module inside
 * Pi, where that name is served by typebox 1.x and `@sinclair/typebox/compiler` is not (0.34's
 * TypeCompiler refuses 1.x schemas). The relay compiles the request schemas once with
 * TypeCompiler (src/relay-server/checkers.ts); the client checks replies with `checkValue`.
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { canonicalJson } from "./canonical-json.ts";
import type { TaskError } from "./errors.ts";
import type { TaskEndpoint } from "./schemas.ts";
import {
  bindingSecretBytes,
  minBindingSecretChars,
  maxLeaseMs,
  minLeaseMs,
  maxCursorDigits,
  maxProtocolVersionsItems,
  maxAckBatchItems,
  maxWireIdChars,
  minProtocolVersionsItems,
  minWireIdChars,
  maxReceivePageItems,
  maxSendBatchItems,
  maxWatchWaitMs,
  minWatchWaitMs,
} from "./limits.ts";
import { RELAY_PROFILE } from "./names.ts";

const strict = { additionalProperties: false } as const;

// ---------------------------------------------------------------------------------------------
// Cursors
// ---------------------------------------------------------------------------------------------

/** A cursor: a decimal string of at most `maxCursorDigits` digits without leading zeros. */
export const CURSOR_PATTERN_SOURCE = `^(0|[1-9][0-9]{0,${maxCursorDigits - 1}})$`;
export const CURSOR_PATTERN = new RegExp(CURSOR_PATTERN_SOURCE);
export const Cursor = Type.String({ pattern: CURSOR_PATTERN_SOURCE });

/** The value of a cursor, or `undefined` for anything that is not one (any type, any format). */
export function cursorValue(cursor: unknown): bigint | undefined {
  return typeof cursor === "string" && CURSOR_PATTERN.test(cursor) ? BigInt(cursor) : undefined;
}

/**
 * Orders two well-formed cursors: negative when `a` comes first, 0 when equal, positive after.
 * Without leading zeros, a longer decimal is the larger one and equal lengths compare digit by
 * digit, so no BigInt is needed.
 */
export function compareCursors(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

export const WireString = Type.String({ minLength: minWireIdChars, maxLength: maxWireIdChars });
/** A binding secret chosen by a client on connect (`binding-secret-v1`): `minBindingSecretChars`..`maxWireIdChars` characters. */
export const BindingSecret = Type.String({ minLength: minBindingSecretChars, maxLength: maxWireIdChars });

export const RELAY_OPERATIONS = ["connect", "resolve", "send", "receive", "acknowledge", "disconnect", "health", "watch"] as const;
export type RelayOperation = (typeof RELAY_OPERATIONS)[number];

/**
 * Operation-specific fields besides `operation`, `profile` and (for bound operations) the binding.
 *
 * What a schema cannot say the relay checks right after it, still before any binding check:
 * `epoch` is a UUID, `protocolVersions` includes 2, the `resolve` target id is a UUID
 * (`INVALID_REQUEST`), and `cursor` / `limit` are well formed (`INVALID_CURSOR`, so they are
 * `Unknown` here). A malformed binding `endpoint` is `SOURCE_MISMATCH`, a binding check. The
 * binding's `bindingSecret` (`binding-secret-v1`: the secret the client chose when it connected
 * the protected registration) may be any wire string; a wrong one is `BINDING_SECRET_INVALID`, also
 * a binding check.
 */
const bindingFields = {
  epoch: Type.String(),
  callerSession: WireString,
  endpoint: Type.Unknown(),
  bindingSecret: Type.Optional(WireString),
};
const base = { operation: Type.String(), profile: Type.String() };
/**
 * `send-batch-v1` / `ack-carry-v1`: 1–`maxSendBatchItems` envelopes, each an object naming its
 * `envelopeId` (distinct: checked after the schema); everything else about each is judged per
 * envelope, as a single send's envelope is.
 */
const BatchEnvelopes = Type.Array(Type.Object({ envelopeId: WireString }), { minItems: 1, maxItems: maxSendBatchItems });
/** The `resolve` target `{relay, id}`; `id` must also be a UUID. */
const ResolveTarget = Type.Object({ relay: Type.String(), id: Type.String() }, strict);

export const RELAY_REQUESTS = {
  connect: Type.Object(
    {
      ...base,
      callerSession: WireString,
      generation: WireString,
      protocolVersions: Type.Array(Type.Integer(), { minItems: minProtocolVersionsItems, maxItems: maxProtocolVersionsItems }),
      leaseMs: Type.Optional(Type.Integer({ minimum: minLeaseMs, maximum: maxLeaseMs })),
      epoch: Type.Optional(Type.String()),
      // binding-secret-v1: the client's own secret; protects this registration, and proves the
      // live protected one of this name to be the same client's.
      bindingSecret: Type.Optional(BindingSecret),
    },
    strict,
  ),
  resolve: Type.Object({ ...base, ...bindingFields, target: ResolveTarget, followSuccessor: Type.Optional(Type.Boolean()) }, strict),
  // The envelope is checked by the send operation itself: malformed is SOURCE_MISMATCH. Exactly one
  // of `envelope` and (with `send-batch-v1`) `envelopes`; checked after the schema.
  send: Type.Object(
    { ...base, ...bindingFields, envelope: Type.Optional(Type.Unknown()), envelopes: Type.Optional(BatchEnvelopes) },
    strict,
  ),
  receive: Type.Object({ ...base, ...bindingFields, cursor: Type.Unknown(), limit: Type.Optional(Type.Unknown()) }, strict),
  // Exactly one of `envelopeId` and (with `ack-batch-v1`) `envelopeIds`, distinct; checked after the schema.
  acknowledge: Type.Object(
    {
      ...base,
      ...bindingFields,
      envelopeId: Type.Optional(WireString),
      envelopeIds: Type.Optional(Type.Array(WireString, { minItems: 1, maxItems: maxAckBatchItems })),
      // ack-carry-v1: envelopes admitted first (only with `envelopeIds`); the ids are acknowledged only if all were accepted.
      envelopes: Type.Optional(BatchEnvelopes),
    },
    strict,
  ),
  disconnect: Type.Object({ ...base, ...bindingFields }, strict),
  health: Type.Object({ ...base, ...bindingFields }, strict),
  watch: Type.Object(
    { ...base, ...bindingFields, cursor: Type.Unknown(), waitMs: Type.Integer({ minimum: minWatchWaitMs, maximum: maxWatchWaitMs }) },
    strict,
  ),
} as const satisfies Record<RelayOperation, TSchema>;

/** Allowed top-level keys per operation (strict keys are checked before the profile). */
export const RELAY_REQUEST_KEYS: Readonly<Record<RelayOperation, ReadonlySet<string>>> = Object.fromEntries(
  RELAY_OPERATIONS.map((operation) => [operation, new Set(Object.keys(RELAY_REQUESTS[operation].properties))]),
) as never;

/** An envelope as stored and sent: its id and its JSON text, encoded once when it was made. */
export interface EncodedEnvelope {
  readonly envelopeId: string;
  readonly text: string;
  /**
   * The endpoint the envelope names as its source. When given, the session sends it only while
   * that endpoint is bound (after a rebind it must be re-addressed first).
   */
  readonly source?: TaskEndpoint;
}

/** Encodes an envelope value (canonical JSON), for callers that built it as an object. */
export function encodedEnvelope(envelope: { readonly envelopeId: string }): EncodedEnvelope {
  return { envelopeId: envelope.envelopeId, text: canonicalJson(envelope) };
}

/**
 * A request's JSON text. An envelope's stored text is spliced in as the `envelope` member, byte for
 * byte: a send serializes only its few header fields, never the envelope again.
 */
export function requestText(fields: Record<string, unknown>, envelopeText?: string): string {
  return envelopeText === undefined ? JSON.stringify(fields) : splicedText(fields, "envelope", envelopeText);
}

/** A request's JSON text with envelopes' stored texts spliced in as the `envelopes` array (`send-batch-v1`, `ack-carry-v1`). */
export function batchRequestText(fields: Record<string, unknown>, envelopeTexts: readonly string[]): string {
  return splicedText(fields, "envelopes", `[${envelopeTexts.join(",")}]`);
}

function splicedText(fields: Record<string, unknown>, member: string, json: string): string {
  const head = JSON.stringify(fields);
  return `${head.slice(0, -1)}${head.length > 2 ? "," : ""}"${member}":${json}}`;
}

/**
 * The envelopes a request body carries, in order: a send's `envelope`, or the `envelopes` of a
 * batched send (`send-batch-v1`) or of an acknowledgement (`ack-carry-v1`). For readers of
 * recorded requests (tests, the bench); anything that is not an object is left out.
 */
export function requestEnvelopes(body: unknown): Record<string, unknown>[] {
  if (typeof body !== "object" || body === null) return [];
  const { envelope, envelopes } = body as { envelope?: unknown; envelopes?: unknown };
  const all = Array.isArray(envelopes) ? envelopes : envelope === undefined ? [] : [envelope];
  return all.filter((item): item is Record<string, unknown> => typeof item === "object" && item !== null);
}

export function isRelayOperation(value: unknown): value is RelayOperation {
  return typeof value === "string" && (RELAY_OPERATIONS as readonly string[]).includes(value);
}

/** Limits of `receive.limit`. */
export const RECEIVE_LIMIT = { minimum: 1, maximum: maxReceivePageItems, default: maxReceivePageItems } as const;

// ---------------------------------------------------------------------------------------------
// Reply values (`value` of a success body), one per operation
// ---------------------------------------------------------------------------------------------

const NonEmpty = Type.String({ minLength: 1 });
/** An endpoint in a reply: `{relay, id}`, both non-empty. Endpoint ids minted by a relay are also UUIDs. */
export const ReplyEndpoint = Type.Object({ relay: NonEmpty, id: NonEmpty });

export const ConnectedValue = Type.Object({ kind: Type.Literal("connected"), endpoint: ReplyEndpoint, leaseExpiresAt: Type.String() });
/** `successorOf` only with `successor-v1` and `followSuccessor:true`. */
export const ResolvedValue = Type.Object({
  kind: Type.Literal("resolved"),
  endpoint: ReplyEndpoint,
  successorOf: Type.Optional(ReplyEndpoint),
});
export const AcceptedValue = Type.Object({
  kind: Type.Literal("accepted"),
  envelopeId: Type.String(),
  acceptanceId: Type.String(),
  duplicate: Type.Boolean(),
  forwarding: Type.Union([Type.Literal("local"), Type.Literal("forwarded")]),
  // mail-expiry-v1 (our relay): when the envelope leaves its mailbox unless acknowledged first.
  expiresAt: Type.Optional(Type.String()),
});
/** A refusal as the wire carries it: the `error` of an error body, or of one envelope's outcome in a batch. */
export const WireRefusal = Type.Object({
  code: NonEmpty,
  message: Type.String(),
  retryable: Type.Boolean(),
  mayHaveBeenDelivered: Type.Optional(Type.Literal(true)),
  retryAfterMs: Type.Optional(Type.Number({ minimum: 0 })),
});
export type WireRefusal = Static<typeof WireRefusal>;

/** A relay's refusal on the wire: its code, message (with its problem), retryability and hints. */
export function wireRefusal(error: TaskError): WireRefusal {
  const retryAfterMs = error.details.retryAfterMs;
  const problem = error.details.problem;
  const message = typeof problem === "string" && !error.message.includes(problem) ? `${error.message} (${problem})` : error.message;
  return {
    code: error.code,
    message,
    retryable: error.retryable,
    ...(error.details.mayHaveBeenDelivered === true ? { mayHaveBeenDelivered: true as const } : {}),
    ...(typeof retryAfterMs === "number" && Number.isFinite(retryAfterMs) && retryAfterMs >= 0 ? { retryAfterMs } : {}),
  };
}
/**
 * What became of one envelope of a batch (`send-batch-v1`, `ack-carry-v1`), in request order:
 * accepted as a single send would be, refused with the error a single send would get, or skipped
 * (not tried: an envelope before it in the request, to the same target, was not accepted).
 */
export const SendResult = Type.Union([
  Type.Object({
    envelopeId: Type.String(),
    outcome: Type.Literal("accepted"),
    acceptanceId: Type.String(),
    duplicate: Type.Boolean(),
    forwarding: Type.Union([Type.Literal("local"), Type.Literal("forwarded")]),
    expiresAt: Type.Optional(Type.String()),
  }),
  Type.Object({ envelopeId: Type.String(), outcome: Type.Literal("refused"), error: WireRefusal }),
  Type.Object({ envelopeId: Type.String(), outcome: Type.Literal("skipped") }),
]);
export type SendResult = Static<typeof SendResult>;
export const AcceptedBatchValue = Type.Object({
  kind: Type.Literal("accepted-batch"),
  results: Type.Array(SendResult, { maxItems: maxSendBatchItems }),
});
/** One page item; the envelope is the stored one, checked by whoever takes it in. */
export const WireDelivery = Type.Object({ cursor: Cursor, envelope: Type.Object({ envelopeId: NonEmpty }) });
export const PageValue = Type.Object({
  kind: Type.Literal("page"),
  deliveries: Type.Array(WireDelivery),
  nextCursor: Cursor,
  hasMore: Type.Boolean(),
});
export const AcknowledgedValue = Type.Object({ kind: Type.Literal("acknowledged"), duplicate: Type.Boolean() });
/** `ack-batch-v1`: what became of each id, in request order (`withheld`: `ack-carry-v1`, a carried envelope was not accepted). */
export const AckOutcome = Type.Union([
  Type.Literal("acknowledged"),
  Type.Literal("duplicate"),
  Type.Literal("unknown"),
  Type.Literal("gone"),
  Type.Literal("withheld"),
]);
export type AckOutcome = Static<typeof AckOutcome>;
export const AcknowledgedBatchValue = Type.Object({
  kind: Type.Literal("acknowledged-batch"),
  results: Type.Array(Type.Object({ envelopeId: Type.String(), outcome: AckOutcome }), { maxItems: maxAckBatchItems }),
  /** `ack-carry-v1`: the carried envelopes' outcomes, in request order. */
  sent: Type.Optional(Type.Array(SendResult, { maxItems: maxSendBatchItems })),
});
export const DisconnectedValue = Type.Object({ kind: Type.Literal("disconnected") });
export const HealthValue = Type.Object({ kind: Type.Literal("health"), store: Type.Record(Type.String(), Type.Unknown()) });
/** `watch-v1`. */
export const WatchValue = Type.Object({ kind: Type.Literal("watch"), pending: Type.Boolean(), highestCursor: Cursor });

export const RELAY_REPLIES = {
  connect: ConnectedValue,
  resolve: ResolvedValue,
  send: Type.Union([AcceptedValue, AcceptedBatchValue]),
  receive: PageValue,
  acknowledge: Type.Union([AcknowledgedValue, AcknowledgedBatchValue]),
  disconnect: DisconnectedValue,
  health: HealthValue,
  watch: WatchValue,
} as const satisfies Record<RelayOperation, TSchema>;

export type RelayValue = Static<(typeof RELAY_REPLIES)[RelayOperation]>;
export type WireDelivery = Static<typeof WireDelivery>;

// ---------------------------------------------------------------------------------------------
// Response bodies
// ---------------------------------------------------------------------------------------------

const Profile = Type.Literal(RELAY_PROFILE);

/** `{ok:true, profile, epoch, value}` of every successful operation. */
export const WireSuccessBody = Type.Object({
  ok: Type.Literal(true),
  profile: Profile,
  epoch: Type.String(),
  value: Type.Object({ kind: Type.String() }),
});

/** Every refusal: our relay always sets `epoch`; a Wolfpack relay may omit it for `EPOCHLESS_CODES`. */
export const WireErrorBody = Type.Object({
  ok: Type.Literal(false),
  profile: Profile,
  epoch: Type.Optional(Type.String()),
  error: WireRefusal,
});
export type WireErrorBody = Static<typeof WireErrorBody>;

/** `GET /api/task-relay/profile`; `features` only on a relay with additions (docs/wire.md). */
export const ProfileBody = Type.Object({
  ok: Type.Literal(true),
  profile: Profile,
  epoch: Type.String(),
  endpointPath: Type.String(),
  federation: Type.String(),
  features: Type.Optional(Type.Array(Type.String())),
});
export type ProfileBody = Static<typeof ProfileBody>;

/** `GET /api/session-control/status?session=NAME` while NAME holds a live registration. */
export const SessionStatusBody = Type.Object({
  session: Type.String(),
  taskEndpoint: ReplyEndpoint,
  taskTransport: Type.Object({ profile: Profile, epoch: Type.String(), endpoint: ReplyEndpoint, leaseExpiresAt: Type.String() }),
});
export type SessionStatusBody = Static<typeof SessionStatusBody>;

/** `GET /api/session-control/list`: every live registration. */
export const SessionListBody = Type.Object({ ok: Type.Literal(true), sessions: Type.Array(SessionStatusBody) });
export type SessionListBody = Static<typeof SessionListBody>;

/** Additions a relay may advertise in the profile's `features`. */
export const FEATURE_WATCH = "watch-v1";
export const FEATURE_SUCCESSOR = "successor-v1";
export const FEATURE_BINDING_SECRET = "binding-secret-v1";
export const FEATURE_ACK_BATCH = "ack-batch-v1";
/** `send` may carry `envelopes` (`maxSendBatchItems`): each admitted on its own, in order, its outcome reported (`SendResult`). */
export const FEATURE_SEND_BATCH = "send-batch-v1";
/**
 * An `acknowledge` with `envelopeIds` may carry `envelopes` (a delivery's receipts): admitted first as
 * a batched send; the ids are acknowledged only if every carried envelope was accepted (else `withheld`).
 */
export const FEATURE_ACK_CARRY = "ack-carry-v1";
// docs/wire.md, "Our additions": fair shares of the relay's budgets.
/** Per-sender quotas (refused with `RELAY_CAPACITY` and `retryAfterMs`); idle registrations reclaimed under contention. */
export const FEATURE_QUOTAS = "quotas-v1";
/** Queued mail expires after `relayMailLifetimeMs`; acceptances carry `expiresAt`; a resend of expired mail is `ENVELOPE_EXPIRED`. */
export const FEATURE_MAIL_EXPIRY = "mail-expiry-v1";

/**
 * Malformed input gets the one answer docs/wire.md names where Wolfpack's own relay gives a looser
 * one its spec allows (an extra key in an envelope, binding endpoint or resolve target; a malformed
 * connect epoch; an over-long bound `callerSession`; `leaseMs: null`; `retryAfterMs` on every
 * admission refusal, with `maxRelayConcurrentRequests` slots). Checked by conformance group
 * "strict answers".
 */
export const FEATURE_STRICT_ANSWERS = "strict-answers-v1";

/** A fresh binding secret for a client to choose (`binding-secret-v1`): `bindingSecretBytes` random bytes, base64url without padding. */
export function mintBindingSecret(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bindingSecretBytes))).toString("base64url");
}

/** Codes a relay may send without an epoch (client rule, docs/wire.md). */
export const EPOCHLESS_CODES: ReadonlySet<string> = new Set([
  "RELAY_CAPACITY",
  "RELAY_UNAVAILABLE",
  "INVALID_REQUEST",
  "PEER_POLICY_REQUIRED",
]);
