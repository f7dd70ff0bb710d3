/**
 * The relay engine: every `volatile-v1` operation (docs/wire.md) over a `RelayStore`, with the
 * request checks in this order after the body is parsed:
 * 1. strict keys (INVALID_REQUEST);
 * 2. profile (RELAY_PROFILE_REQUIRED);
 * 3. fields: the schema, then the rules it cannot say (INVALID_REQUEST; a malformed cursor or
 *    limit INVALID_CURSOR);
 * 4. binding, in order: epoch → RELAY_RESET; endpoint malformed or not local →
 *    SOURCE_MISMATCH; caller → CALLER_NOT_FOUND; registration unknown or not active →
 *    REGISTRATION_EXPIRED; registration of another caller → SOURCE_MISMATCH; the binding secret
 *    of a protected registration missing → BINDING_SECRET_REQUIRED, wrong (or any for an
 *    unprotected one) → BINDING_SECRET_INVALID. `connect` has no binding, only the epoch
 *    comparison (and the protection of the session's current registration, judged in the store
 *    against the connect's own `bindingSecret`);
 * 5. the operation (send's envelope checks among them).
 * It maps the store's outcomes to wire errors, knows nothing of HTTP and nothing of which store
 * it runs on.
 *
 * Fair shares (`quotas-v1`, `mail-expiry-v1`): the store enforces them
 * atomically; here a sender over its share becomes `RELAY_CAPACITY` with `retryAfterMs` (a
 * transient refusal the client already cools down and retries, byte-identical), a resend of mail
 * that expired unacknowledged `ENVELOPE_EXPIRED` (definitive: the client quarantines it), and
 * every acceptance says when its mail expires (`expiresAt`).
 */
import { CanonicalText, canonicalJson, sha256Hex, utf8Bytes } from "../protocol/canonical-json.ts";
import { isUuid, sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError } from "../protocol/errors.ts";
import {
  maxEnvelopeAgeMs,
  maxEnvelopeFutureSkewMs,
  defaultLeaseMs,
  maxRelayPayloadBytes,
  relayMailLifetimeMs,
  relayQuotaRetryAfterMs,
} from "../protocol/limits.ts";
import { RELAY_ENDPOINT_PATH, RELAY_ID, RELAY_PROFILE, WIRE_PROTOCOL_VERSION } from "../protocol/names.ts";
import { type TaskEndpoint, WireEnvelope } from "../protocol/schemas.ts";
import { checkValue, isRecord } from "../protocol/validate.ts";
import {
  cursorValue,
  type AckOutcome,
  FEATURE_ACK_BATCH,
  FEATURE_ACK_CARRY,
  FEATURE_BINDING_SECRET,
  FEATURE_MAIL_EXPIRY,
  FEATURE_STRICT_ANSWERS,
  FEATURE_QUOTAS,
  FEATURE_SEND_BATCH,
  FEATURE_SUCCESSOR,
  FEATURE_WATCH,
  type ProfileBody,
  RECEIVE_LIMIT,
  RELAY_REQUEST_KEYS,
  RELAY_REQUESTS,
  type RelayOperation,
  type RelayValue,
  type SendResult,
  type SessionStatusBody,
  wireRefusal,
} from "../protocol/wire.ts";
import { secretDigest } from "./binding-secret.ts";
import { ENVELOPE_CHECKER, REQUEST_CHECKERS } from "./checkers.ts";
import { createMemoryStore } from "./store/memory.ts";
import {
  type AcknowledgeOutcome,
  type AdmitOutcome,
  type AdmitRequest,
  type BindingLookup,
  type BindingRequest,
  type BoundOperation,
  type BoundOutcomes,
  type ConnectOutcome,
  isLive,
  isStateReplaced,
  type RegistrationView,
  type RelayStore,
  type SenderQuota,
  type StoreUsage,
} from "./store/store.ts";

export const RELAY_FEATURES = [
  FEATURE_WATCH,
  FEATURE_SUCCESSOR,
  FEATURE_BINDING_SECRET,
  FEATURE_ACK_BATCH,
  FEATURE_QUOTAS,
  FEATURE_MAIL_EXPIRY,
  FEATURE_STRICT_ANSWERS,
  FEATURE_SEND_BATCH,
  FEATURE_ACK_CARRY,
] as const;
const SUPPORTED_PROTOCOL_VERSION = WIRE_PROTOCOL_VERSION;

/** A success the HTTP layer serialises; `rawValueJson` is spliced in as is (receive pages). */
export type EngineResult = { readonly value: RelayValue } | { readonly rawValueJson: string };

export interface EngineContext {
  readonly signal?: AbortSignal;
  /** Called before a watch starts waiting, so a parked watch holds no admission slot. */
  readonly releaseSlot?: () => void;
}

export interface RelayEngineOptions {
  /** Clock for leases, freshness and receipts (tests). */
  readonly now?: () => number;
  /** Where the relay keeps its state; default a new memory store. The engine owns it (`close` closes it). */
  readonly store?: RelayStore;
}

export interface RelayEngine {
  /** The epoch of the state the relay serves now (a shared store's state can be replaced: store.ts). */
  readonly epoch: string;
  handle(operation: RelayOperation, request: Record<string, unknown>, context?: EngineContext): Promise<EngineResult>;
  profile(): ProfileBody;
  sessionStatus(session: string): Promise<SessionStatusBody>;
  sessionList(): Promise<SessionStatusBody[]>;
  maintain(): Promise<void>;
  close(): Promise<void>;
  usage(): Promise<StoreUsage>;
}

function invalid(path: string, problem: string): TaskError {
  return new TaskError("INVALID_REQUEST", { details: { path, problem } });
}

/** A request cursor's value; anything but a cursor string (any type, any format) is `INVALID_CURSOR`. */
function requestCursor(cursor: unknown): string {
  if (cursorValue(cursor) === undefined) throw new TaskError("INVALID_CURSOR", { details: { cursor: String(cursor) } });
  return cursor as string;
}

function cursorAhead(cursor: string, highestCursor: string): TaskError {
  return new TaskError("INVALID_CURSOR", { details: { cursor, highestCursor } });
}

/** `receive.limit` (default `RECEIVE_LIMIT.default`); anything but an integer in range is `INVALID_CURSOR`. */
function pageLimit(limit: unknown): number {
  if (limit === undefined) return RECEIVE_LIMIT.default;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < RECEIVE_LIMIT.minimum || limit > RECEIVE_LIMIT.maximum) {
    throw new TaskError("INVALID_CURSOR", { details: { limit: String(limit) } });
  }
  return limit;
}

/**
 * The field rules the request schema cannot say, checked after it and before any binding check:
 * a UUID `epoch`, `protocolVersions` that include the supported version, a UUID `resolve` target
 * id, and well-formed cursors and limits.
 */
function checkFields(operation: RelayOperation, request: Record<string, unknown>): void {
  if (request.epoch !== undefined && !isUuid(request.epoch)) throw invalid("/epoch", "not a UUID");
  switch (operation) {
    case "connect":
      if (!(request.protocolVersions as number[]).includes(SUPPORTED_PROTOCOL_VERSION)) {
        throw invalid("/protocolVersions", `must include ${SUPPORTED_PROTOCOL_VERSION}`);
      }
      return;
    case "resolve":
      if (!isUuid((request.target as TaskEndpoint).id)) throw invalid("/target/id", "not a UUID");
      return;
    case "receive":
      requestCursor(request.cursor);
      pageLimit(request.limit);
      return;
    case "watch":
      requestCursor(request.cursor);
      return;
    case "send":
      // One of the two forms (`envelopes` is send-batch-v1), never both; a batch names each envelope once.
      if ((request.envelopes === undefined) === (request.envelope === undefined))
        throw invalid("/envelope", "give exactly one of envelope and envelopes");
      checkDistinct("/envelopes", batchIds(request));
      return;
    case "acknowledge": {
      // One of the two forms (`envelopeIds` is ack-batch-v1), never both; a batch names each id once.
      const ids = request.envelopeIds as string[] | undefined;
      if ((ids === undefined) === (request.envelopeId === undefined))
        throw invalid("/envelopeId", "give exactly one of envelopeId and envelopeIds");
      checkDistinct("/envelopeIds", ids);
      // ack-carry-v1: carried envelopes only with the batch form, each named once.
      if (request.envelopes !== undefined && ids === undefined) throw invalid("/envelopes", "envelopes are carried only with envelopeIds");
      checkDistinct("/envelopes", batchIds(request));
      return;
    }
    default:
      return;
  }
}

/** The envelope ids of a request's `envelopes` (`send-batch-v1`, `ack-carry-v1`), if it has them. */
function batchIds(request: Record<string, unknown>): string[] | undefined {
  return (request.envelopes as { envelopeId: string }[] | undefined)?.map((envelope) => envelope.envelopeId);
}

function checkDistinct(path: string, ids: readonly string[] | undefined): void {
  if (ids !== undefined && new Set(ids).size !== ids.length) throw invalid(path, "an envelope id appears twice");
}

function checkRequest(operation: RelayOperation, request: Record<string, unknown>): void {
  const allowed = RELAY_REQUEST_KEYS[operation];
  for (const key of Object.keys(request)) if (!allowed.has(key)) throw invalid(`/${key}`, "unexpected property");
  if (request.profile !== RELAY_PROFILE) throw new TaskError("RELAY_PROFILE_REQUIRED", { details: { profile: String(request.profile) } });
  const result = checkValue(RELAY_REQUESTS[operation], request, { values: REQUEST_CHECKERS[operation] });
  if (!result.ok) throw result.error;
  checkFields(operation, request);
}

function endpointOf(registration: RegistrationView): TaskEndpoint {
  return { relay: RELAY_ID, id: registration.endpointId };
}

/** What a refusal for a sender's share says (the error message carries it as its problem). */
const QUOTA_PROBLEM: Readonly<Record<SenderQuota, string>> = {
  "mailbox-share": "this sender holds its share of the target's mailbox until the target acknowledges",
  "sender-active": "this sender holds its share of the relay's queued envelopes until their targets acknowledge",
  "sender-receipts": "this sender spent its share of the relay's receipts (its sends of the last receipt retention)",
};

/** A send's store outcome on the wire: the acceptance value, or the error it is. */
function admission(outcome: AdmitOutcome, envelopeId: string, target: TaskEndpoint, createdAt: string): RelayValue {
  switch (outcome.kind) {
    case "accepted": {
      const expiresAt = new Date(outcome.acceptedAt + relayMailLifetimeMs).toISOString();
      return {
        kind: "accepted",
        envelopeId,
        acceptanceId: outcome.acceptanceId,
        duplicate: outcome.duplicate,
        forwarding: "local",
        expiresAt,
      };
    }
    case "target-not-live":
      throw new TaskError("TARGET_NOT_REGISTERED", { details: { target } });
    case "conflict":
      throw new TaskError("ENVELOPE_CONFLICT", { details: { envelopeId } });
    case "expired":
      throw new TaskError("ENVELOPE_EXPIRED", { details: { envelopeId, problem: "it expired unacknowledged in its target's mailbox" } });
    case "stale":
      throw new TaskError("ENVELOPE_EXPIRED", { details: { createdAt } });
    case "quota":
      // A share frees as the targets acknowledge: retryable, with a hint of when.
      throw new TaskError("RELAY_CAPACITY", {
        details: { budget: outcome.quota, ...outcome.details, retryAfterMs: relayQuotaRetryAfterMs, problem: QUOTA_PROBLEM[outcome.quota] },
      });
    case "full":
      // Store budgets carry no retryAfterMs (the caller's backoff policy applies).
      throw new TaskError("RELAY_CAPACITY", { details: { budget: outcome.budget, ...outcome.details } });
  }
}

/**
 * The epoch of the state the relay serves. It follows the store: a shared store's state may be
 * replaced under the relay, which then adopts the new epoch before it answers the reset.
 */
interface Epochs {
  current(): string;
  /** Reads the store's epoch anew (a shared store's state may have been replaced; see store.ts). */
  adopt(): Promise<void>;
  /**
   * A (well-formed) epoch other than the state's is RELAY_RESET. One this relay has not seen is
   * checked with the store first: another relay sharing it may have seen its new state already.
   */
  check(value: unknown): Promise<void>;
  /** Store work; when the store finds its state replaced, the relay adopts the new epoch before the reset is answered. */
  adoptingOnReplace<T>(work: () => Promise<T>): Promise<T>;
}

async function createEpochs(store: RelayStore): Promise<Epochs> {
  let epoch = await store.epoch();

  async function adopt(): Promise<void> {
    epoch = await store.epoch();
  }

  return {
    current: () => epoch,
    adopt,
    async check(value) {
      if (value === epoch) return;
      await adopt();
      if (value !== epoch) throw new TaskError("RELAY_RESET", { details: { epoch, mayHaveBeenDelivered: true } });
    },
    async adoptingOnReplace(work) {
      try {
        return await work();
      } catch (error) {
        if (isStateReplaced(error)) await adopt();
        throw error;
      }
    },
  };
}

/** What the operations below work with: the store, the clock and the epoch. */
interface Relay {
  readonly store: RelayStore;
  readonly now: () => number;
  readonly epochs: Epochs;
}

/**
 * The binding checks of every operation but connect, in order; returns the caller's live
 * registration. The registration must be active before its owner is compared, so another
 * caller's ended (or an unknown) endpoint is REGISTRATION_EXPIRED, a live one SOURCE_MISMATCH;
 * the secret is judged last, once the request names a live registration of its own caller.
 */
async function bind(relay: Relay, request: Record<string, unknown>): Promise<RegistrationView> {
  const binding = await bindingOf(relay, request);
  return judged(await relay.store.binding(binding.session, binding.endpointId, binding.secretDigest, binding.now), binding);
}

/** The request's binding, its epoch and endpoint checked first (RELAY_RESET, SOURCE_MISMATCH). */
async function bindingOf({ now, epochs }: Relay, request: Record<string, unknown>): Promise<BindingRequest> {
  if (request.epoch !== epochs.current()) await epochs.check(request.epoch);
  const endpoint = request.endpoint;
  if (!isRecord(endpoint) || endpoint.relay !== RELAY_ID || !isUuid(endpoint.id) || Object.keys(endpoint).length !== 2) {
    throw new TaskError("SOURCE_MISMATCH", { details: { reason: "endpoint is malformed or not local" } });
  }
  const presented = request.bindingSecret === undefined ? undefined : secretDigest(request.bindingSecret as string);
  return {
    session: request.callerSession as string,
    endpointId: endpoint.id as string,
    ...(presented === undefined ? {} : { secretDigest: presented }),
    now: now(),
  };
}

/** The binding checks on a lookup, in order; returns the caller's live registration. */
function judged({ callerKnown, registration, secret }: BindingLookup, { session, now }: BindingRequest): RegistrationView {
  if (!callerKnown) throw new TaskError("CALLER_NOT_FOUND", { details: { callerSession: session } });
  if (registration === undefined) throw new TaskError("REGISTRATION_EXPIRED", { details: { reason: "endpoint is not registered" } });
  if (!isLive(registration, now)) throw new TaskError("REGISTRATION_EXPIRED", { details: { state: registration.state } });
  if (registration.session !== session) throw new TaskError("SOURCE_MISMATCH", { details: { reason: "endpoint is not this caller's" } });
  if (secret === "missing") throw new TaskError("BINDING_SECRET_REQUIRED");
  if (secret === "mismatch") throw new TaskError("BINDING_SECRET_INVALID");
  return registration;
}

function checkLocal(target: TaskEndpoint): void {
  if (target.relay !== RELAY_ID) throw new TaskError("CROSS_RELAY_ENDPOINT", { details: { relay: target.relay } });
}

/** A sent envelope checked against its schema, its bound source and this relay, with its canonical text and that text's digest. */
function checkEnvelope(endpointId: string, envelope: unknown): { wire: WireEnvelope; createdAt: number; text: string; digest: string } {
  if (isRecord(envelope) && envelope.protocolVersion !== SUPPORTED_PROTOCOL_VERSION) {
    throw invalid("/envelope/protocolVersion", `must be ${SUPPORTED_PROTOCOL_VERSION}`);
  }
  const shape = checkValue(WireEnvelope, envelope, { values: ENVELOPE_CHECKER, pathPrefix: "/envelope", code: "SOURCE_MISMATCH" });
  if (!shape.ok) throw shape.error;
  const wire = shape.value;
  const createdAt = Date.parse(wire.createdAt);
  if (Number.isNaN(createdAt)) throw new TaskError("SOURCE_MISMATCH", { details: { path: "/envelope/createdAt", problem: "not a date" } });
  if (!sameEndpoint(wire.source, { relay: RELAY_ID, id: endpointId })) {
    throw new TaskError("SOURCE_MISMATCH", { details: { path: "/envelope/source", problem: "source is not the bound endpoint" } });
  }
  const payloadText = canonicalJson(wire.payload);
  if (utf8Bytes(payloadText) > maxRelayPayloadBytes) {
    throw invalid("/envelope/payload", `canonical payload is larger than ${maxRelayPayloadBytes} bytes`);
  }
  const text = canonicalJson({ ...wire, payload: new CanonicalText(payloadText) });
  checkLocal(wire.target);
  return { wire, createdAt, text, digest: sha256Hex(text) };
}

/** A sent envelope's admission request, checked as `checkEnvelope` does; `createdAt` as the envelope says. */
function admitRequest(binding: BindingRequest, envelope: unknown): { request: AdmitRequest; createdAt: string } {
  const { wire, createdAt, text, digest } = checkEnvelope(binding.endpointId, envelope);
  const at = binding.now;
  const fresh = createdAt <= at + maxEnvelopeFutureSkewMs && at < createdAt + maxEnvelopeAgeMs;
  // One atomic store call: concurrent identical sends coalesce on the receipt.
  const request = { envelopeId: wire.envelopeId, digest, text, source: wire.source, target: wire.target, fresh, now: at };
  return { request, createdAt: wire.createdAt };
}

/**
 * A send: its binding and its admission in one store call (one round trip to a shared store), the
 * binding's checks judged first, as for every operation. An envelope that is malformed, not from
 * the bound endpoint or for another relay is refused only after the binding passed (the lookup
 * alone), so a request with both faults gets the binding's error.
 */
async function send(relay: Relay, request: Record<string, unknown>): Promise<RelayValue> {
  const binding = await bindingOf(relay, request);
  const checked = attempt(() => admitRequest(binding, request.envelope));
  if (!checked.ok) {
    judged(await relay.store.binding(binding.session, binding.endpointId, binding.secretDigest, binding.now), binding);
    throw checked.error;
  }
  const admit = checked.value.request;
  const outcome = await boundRun(relay, binding, { kind: "admit", request: admit });
  return admission(outcome, admit.envelopeId, admit.target, checked.value.createdAt);
}

/** One envelope of a batch before the store: its admission, or its own refusal (`targetId` when its target could be read). */
type Planned =
  | { readonly kind: "admit"; readonly request: AdmitRequest; readonly createdAt: string }
  | { readonly kind: "done"; readonly result: SendResult; readonly targetId?: string };

function refusedResult(envelopeId: string, error: unknown): SendResult {
  if (!(error instanceof TaskError)) throw error;
  return { envelopeId, outcome: "refused", error: wireRefusal(error) };
}

/** The batch's envelopes checked in order; one to a target refused before it in the request is skipped. */
function planBatch(binding: BindingRequest, envelopes: readonly { envelopeId: string }[]): Planned[] {
  const refusedTargets = new Set<string>();
  return envelopes.map((envelope): Planned => {
    const checked = attempt(() => admitRequest(binding, envelope));
    if (!checked.ok) {
      const target = (envelope as { target?: unknown }).target;
      const targetId = isRecord(target) && typeof target.id === "string" ? target.id : undefined;
      if (targetId !== undefined) refusedTargets.add(targetId);
      return { kind: "done", result: refusedResult(envelope.envelopeId, checked.error), ...(targetId === undefined ? {} : { targetId }) };
    }
    if (refusedTargets.has(checked.value.request.target.id))
      return { kind: "done", result: { envelopeId: envelope.envelopeId, outcome: "skipped" } };
    return { kind: "admit", ...checked.value };
  });
}

/** An admission's outcome as a batch result. */
function batchResult(outcome: AdmitOutcome | { kind: "skipped" }, planned: Extract<Planned, { kind: "admit" }>): SendResult {
  const { envelopeId, target } = planned.request;
  if (outcome.kind === "skipped") return { envelopeId, outcome: "skipped" };
  try {
    const { kind: _, ...accepted } = admission(outcome, envelopeId, target, planned.createdAt) as Extract<RelayValue, { kind: "accepted" }>;
    return { ...accepted, outcome: "accepted" };
  } catch (error) {
    return refusedResult(envelopeId, error);
  }
}

/**
 * `send-batch-v1` and `ack-carry-v1`: the binding, every admission and (`acknowledge`, only when every
 * envelope was accepted) the acknowledgements in one store call; each envelope's outcome in order.
 */
async function admitBatch(
  relay: Relay,
  request: Record<string, unknown>,
  acknowledge?: readonly string[],
): Promise<{ sent: SendResult[]; acknowledged?: readonly AcknowledgeOutcome[] }> {
  const binding = await bindingOf(relay, request);
  const planned = planBatch(binding, request.envelopes as { envelopeId: string }[]);
  const admits = planned.filter((item): item is Extract<Planned, { kind: "admit" }> => item.kind === "admit");
  if (admits.length === 0) {
    judged(await relay.store.binding(binding.session, binding.endpointId, binding.secretDigest, binding.now), binding);
    return { sent: planned.map((item) => (item as Extract<Planned, { kind: "done" }>).result) };
  }
  const clean = admits.length === planned.length;
  const requests = admits.map((item) => item.request);
  const outcome = await boundRun(relay, binding, { kind: "admitEach", requests, ...(clean && acknowledge ? { acknowledge } : {}) });
  let next = 0;
  const sent = planned.map((item) => (item.kind === "done" ? item.result : batchResult(outcome.admitted[next++]!, item)));
  return { sent, ...(clean && outcome.acknowledged !== undefined ? { acknowledged: outcome.acknowledged } : {}) };
}

/** `send-batch-v1`: each envelope's outcome in request order; none fails the request. */
async function sendBatch(relay: Relay, request: Record<string, unknown>): Promise<RelayValue> {
  return { kind: "accepted-batch", results: (await admitBatch(relay, request)).sent };
}

/** A bound operation and its binding in one store call; the binding's checks judged before its outcome is read. */
async function boundRun<K extends BoundOperation["kind"]>(
  relay: Relay,
  binding: BindingRequest,
  operation: Extract<BoundOperation, { kind: K }>,
): Promise<BoundOutcomes[K]> {
  const result = await relay.store.bound(binding, operation);
  judged(result.lookup, binding);
  return result.outcome!;
}

/** `run`'s value, or the error it threw (thrown again by the caller when its turn comes). */
function attempt<T>(run: () => T): { ok: true; value: T } | { ok: false; error: unknown } {
  try {
    return { ok: true, value: run() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** A receive: its binding and its page in one store call. */
async function receive(relay: Relay, request: Record<string, unknown>): Promise<EngineResult> {
  const cursor = request.cursor as string;
  const page = await boundRun(relay, await bindingOf(relay, request), { kind: "page", after: cursor, limit: pageLimit(request.limit) });
  if (page.kind === "cursor-ahead") throw cursorAhead(cursor, page.highestCursor);
  return { rawValueJson: `{"kind":"page","deliveries":${page.itemsJson},"nextCursor":"${page.nextCursor}","hasMore":${page.hasMore}}` };
}

/** An acknowledgement's outcome in a batch answer. */
function ackOutcome(outcome: AcknowledgeOutcome): AckOutcome {
  return outcome.kind === "acknowledged" ? (outcome.duplicate ? "duplicate" : "acknowledged") : outcome.kind;
}

/**
 * `ack-batch-v1`: each id acknowledged on its own (each atomic), its outcome reported in order; none
 * fails the request. With carried `envelopes` (`ack-carry-v1`) they are admitted first, as a batched
 * send, and the ids acknowledged only if every one was accepted (else each is `withheld`).
 */
async function acknowledgeBatch(relay: Relay, request: Record<string, unknown>): Promise<RelayValue> {
  const envelopeIds = request.envelopeIds as string[];
  if (request.envelopes !== undefined) {
    const { sent, acknowledged } = await admitBatch(relay, request, envelopeIds);
    const results = envelopeIds.map((envelopeId, index) => ({
      envelopeId,
      outcome: acknowledged === undefined ? ("withheld" as const) : ackOutcome(acknowledged[index]!),
    }));
    return { kind: "acknowledged-batch", results, sent };
  }
  // One store call with the binding; the ids are distinct, so their order is free.
  const outcomes = await boundRun(relay, await bindingOf(relay, request), { kind: "acknowledgeBatch", envelopeIds });
  const results = envelopeIds.map((envelopeId, index) => ({ envelopeId, outcome: ackOutcome(outcomes[index]!) }));
  return { kind: "acknowledged-batch", results };
}

/** An acknowledgement: its binding and the acknowledgement in one store call. */
async function acknowledge(relay: Relay, request: Record<string, unknown>): Promise<RelayValue> {
  const envelopeId = request.envelopeId as string;
  const outcome = await boundRun(relay, await bindingOf(relay, request), { kind: "acknowledge", envelopeId });
  switch (outcome.kind) {
    case "acknowledged":
      return { kind: "acknowledged", duplicate: outcome.duplicate };
    case "unknown":
      throw new TaskError("INVALID_REQUEST", { message: "unknown envelope for this endpoint", details: { envelopeId } });
    case "gone":
      throw new TaskError("INVALID_REQUEST", { message: "envelope is no longer in the mailbox", details: { envelopeId } });
  }
}

async function watch(
  store: RelayStore,
  owner: RegistrationView,
  cursor: string,
  waitMs: number,
  context: EngineContext,
): Promise<RelayValue> {
  const outcome = await store.watch({
    endpointId: owner.endpointId,
    after: cursor,
    waitMs,
    ...(context.signal === undefined ? {} : { signal: context.signal }),
    ...(context.releaseSlot === undefined ? {} : { onPark: context.releaseSlot }),
  });
  if (outcome.kind === "cursor-ahead") throw cursorAhead(cursor, outcome.highestCursor);
  return { kind: "watch", pending: outcome.pending, highestCursor: outcome.highestCursor };
}

async function resolve({ store, now }: Relay, target: TaskEndpoint, followSuccessor: boolean): Promise<RelayValue> {
  checkLocal(target);
  const registration = await store.registration(target.id);
  if (registration !== undefined && isLive(registration, now())) return { kind: "resolved", endpoint: endpointOf(registration) };
  if (followSuccessor) {
    const successor = await store.successor(target.id, now());
    if (successor !== undefined) return { kind: "resolved", endpoint: endpointOf(successor), successorOf: target };
  }
  throw new TaskError("TARGET_NOT_REGISTERED", { details: { target } });
}

/** A connect's store outcome on the wire: the connection, or the error it is (`at` is the connect's time). */
function connection(outcome: ConnectOutcome, at: number): RelayValue {
  switch (outcome.kind) {
    case "connected":
      return {
        kind: "connected",
        endpoint: endpointOf(outcome.registration),
        leaseExpiresAt: new Date(outcome.registration.leaseExpiresAt).toISOString(),
      };
    case "session-protected":
      throw new TaskError("SESSION_PROTECTED", { details: { retryAfterMs: Math.max(0, outcome.leaseExpiresAt - at) } });
    case "secret-missing":
      throw new TaskError("BINDING_SECRET_REQUIRED");
    case "secret-mismatch":
      throw new TaskError("BINDING_SECRET_INVALID");
    case "generation-retired":
      throw new TaskError("REGISTRATION_EXPIRED", { details: { reason: "generation was superseded" } });
    case "full":
      throw new TaskError("RELAY_CAPACITY", { details: { budget: "registrations", ...outcome.details } });
  }
}

/**
 * `binding-secret-v1`: the connect's `bindingSecret` is the client's own (the schema holds it to
 * `minBindingSecretChars`); only its digest goes to the store, which decides in one call whether
 * it may take the name. The reply never carries a secret.
 */
async function connect({ store, now, epochs }: Relay, request: Record<string, unknown>): Promise<RelayValue> {
  // Runs before the registration is looked at; the fields were checked already. A connect without
  // an epoch is judged against the state as it is now (a shared store may have been replaced).
  if (request.epoch !== undefined) await epochs.check(request.epoch);
  else await epochs.adopt();
  const secret = request.bindingSecret as string | undefined;
  const at = now();
  const outcome = await store.connect({
    session: request.callerSession as string,
    generation: request.generation as string,
    leaseMs: (request.leaseMs as number | undefined) ?? defaultLeaseMs,
    now: at,
    ...(secret === undefined ? {} : { secretDigest: secretDigest(secret) }),
  });
  return connection(outcome, at);
}

async function health(store: RelayStore): Promise<RelayValue> {
  const used = await store.usage();
  return {
    kind: "health",
    store: {
      activeItems: used.activeItems,
      activeBytes: used.activeBytes,
      receipts: used.receipts,
      receiptBytes: used.receiptBytes,
      registrations: used.registrations,
      sessions: used.sessions,
      routes: 0,
      metadataBytes: used.metadataBytes,
      expiryEntries: used.expiryEntries,
      investigationEnabled: false,
      logDrops: 0,
    },
  };
}

function status(epoch: string, registration: RegistrationView): SessionStatusBody {
  const endpoint = endpointOf(registration);
  return {
    session: registration.session,
    taskEndpoint: endpoint,
    taskTransport: { profile: RELAY_PROFILE, epoch, endpoint, leaseExpiresAt: new Date(registration.leaseExpiresAt).toISOString() },
  };
}

async function operate(
  relay: Relay,
  operation: RelayOperation,
  request: Record<string, unknown>,
  context: EngineContext,
): Promise<EngineResult> {
  if (operation === "connect") return { value: await connect(relay, request) };
  // The operations that each cost one store call with their binding (one round trip to a shared store).
  if (operation === "send")
    return { value: request.envelopes === undefined ? await send(relay, request) : await sendBatch(relay, request) };
  if (operation === "receive") return receive(relay, request);
  if (operation === "acknowledge") {
    return { value: request.envelopeIds === undefined ? await acknowledge(relay, request) : await acknowledgeBatch(relay, request) };
  }
  const { store, now } = relay;
  const owner = await bind(relay, request);
  switch (operation) {
    case "resolve":
      return { value: await resolve(relay, request.target as TaskEndpoint, request.followSuccessor === true) };
    case "disconnect":
      await store.disconnect(owner.endpointId, now());
      return { value: { kind: "disconnected" } };
    case "health":
      return { value: await health(store) };
    case "watch":
      return { value: await watch(store, owner, request.cursor as string, request.waitMs as number, context) };
  }
}

/** The session-control routes carry no epoch of the caller's: they answer the state as it is now. */
async function sessionStatus({ store, now, epochs }: Relay, session: string): Promise<SessionStatusBody> {
  await epochs.adopt();
  const registration = await epochs.adoptingOnReplace(() => store.sessionRegistration(session));
  if (registration === undefined || !isLive(registration, now())) throw new TaskError("CALLER_NOT_FOUND", { details: { session } });
  return status(epochs.current(), registration);
}

async function sessionList({ store, now, epochs }: Relay): Promise<SessionStatusBody[]> {
  await epochs.adopt();
  return (await epochs.adoptingOnReplace(() => store.liveRegistrations(now()))).map((registration) =>
    status(epochs.current(), registration),
  );
}

export async function createRelayEngine(options: RelayEngineOptions = {}): Promise<RelayEngine> {
  const now = options.now ?? Date.now;
  const store = options.store ?? createMemoryStore();
  const epochs = await createEpochs(store);
  const relay: Relay = { store, now, epochs };

  return {
    get epoch() {
      return epochs.current();
    },
    async handle(operation, request, context = {}) {
      checkRequest(operation, request);
      return epochs.adoptingOnReplace(() => operate(relay, operation, request, context));
    },
    profile: () => ({
      ok: true,
      profile: RELAY_PROFILE,
      epoch: epochs.current(),
      endpointPath: RELAY_ENDPOINT_PATH,
      federation: "disabled",
      features: [...RELAY_FEATURES],
    }),
    sessionStatus: (session) => sessionStatus(relay, session),
    sessionList: () => sessionList(relay),
    async maintain() {
      await epochs.adoptingOnReplace(() => store.maintain(now()));
    },
    close: () => store.close(),
    usage: () => epochs.adoptingOnReplace(() => store.usage()),
  };
}
