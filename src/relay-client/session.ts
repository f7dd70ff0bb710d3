/**
 * The relay session: one endpoint binding of one lifetime on a `volatile-v1` relay (docs/wire.md).
 *
 * - `connect` registers with a per-lifetime generation; the lease is renewed before an operation
 *   when less than (request deadline + 10 s) remains; renewals keep the endpoint id.
 * - Any reply carrying a different epoch, or a reset-set code (`RELAY_RESET`,
 *   `REGISTRATION_EXPIRED`, `SOURCE_MISMATCH`, `CALLER_DEAD`, `CALLER_NOT_FOUND`), retires the
 *   binding: in-flight calls are aborted and fail with `RELAY_RESET`; later calls fail with
 *   `RELAY_REBIND_REQUIRED` without a network call until `rebind()` binds a fresh endpoint.
 * - Replies are validated per operation against the reply schemas of src/protocol/wire.ts, then
 *   by the rules a schema cannot say (the acceptance names this envelope, page order and
 *   consistency, …): `INVALID_CONNECTION`, `INVALID_ACCEPTANCE`, `INVALID_INBOX`,
 *   `INVALID_TARGET`, `INVALID_RESPONSE`. Features come from the profile and are used only when
 *   advertised.
 * - `binding-secret-v1`, when advertised: the session picks its own secret once
 *   (`bindingSecretBytes` random bytes, base64url) and sends it on every connect (`bindingSecret`)
 *   and every bound operation, so its registration is protected and every connect of its own — a
 *   renewal, a rebind, a retry after a lost reply — is let through by the relay at once. The
 *   secret stays in this closure only — not in `Binding`, never in an error's details, never
 *   logged — and is dropped on close; a relay without the feature is never sent it. A connect
 *   refused `SESSION_PROTECTED` (another process's live registration holds the name; retryable,
 *   with `retryAfterMs`) is surfaced as is — except by `rebind`, which then binds under a derived
 *   name (`derivedName`): a stranger that took the name while this session was away (a relay
 *   restart) cannot lock it out; peers find it by its signed mail (src/core/reconnect.ts).
 */
import type { Static } from "@sinclair/typebox";
import { isUuid, sameEndpoint } from "../protocol/endpoint.ts";
import { deferral, type ErrorCode, errorSpec, TaskError } from "../protocol/errors.ts";
import { derivedNameSuffixChars, defaultLeaseMs, leaseRenewMarginMs, maxWireIdChars, maxReceivePageItems } from "../protocol/limits.ts";
import { DERIVED_NAME_SEPARATOR, RELAY_PROFILE, WIRE_PROTOCOL_VERSION } from "../protocol/names.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import { checkValue, isRecord } from "../protocol/validate.ts";
import {
  compareCursors,
  type EncodedEnvelope,
  FEATURE_BINDING_SECRET,
  FEATURE_SUCCESSOR,
  FEATURE_WATCH,
  FEATURE_ACK_BATCH,
  FEATURE_ACK_CARRY,
  FEATURE_SEND_BATCH,
  type AckOutcome,
  batchRequestText,
  mintBindingSecret,
  RELAY_REPLIES,
  type RelayOperation,
  requestText,
  type SendResult,
} from "../protocol/wire.ts";
import type { RelayAuth } from "./auth.ts";
import { type BindingHolder, type BindingState, createBindingHolder, isReady, type ReadyState } from "./binding-state.ts";
import { createSendCoalescer } from "./send-coalescer.ts";
import type { Binding, SendAcceptance, SentOutcome, SessionStatus } from "./session-types.ts";
import { createRelayTransport, type RelayTransport, relayRefusal, type SuccessReply } from "./transport.ts";

export type { Binding, SendAcceptance, SentOutcome, SessionStatus } from "./session-types.ts";

export interface InboxDelivery {
  readonly cursor: string;
  readonly envelopeId: string;
  readonly envelope: Record<string, unknown>;
}

export interface InboxPage {
  readonly deliveries: readonly InboxDelivery[];
  readonly nextCursor: string;
  readonly hasMore: boolean;
}

export interface Resolution {
  readonly endpoint: TaskEndpoint;
  readonly successorOf?: TaskEndpoint;
}

export interface WatchResult {
  readonly pending: boolean;
  readonly highestCursor: string;
}

export interface VolatileTaskSessionOptions {
  readonly url: string;
  readonly callerSession: string;
  readonly fetch?: typeof fetch;
  readonly requestTimeoutMs?: number;
  readonly auth?: RelayAuth;
  /** Lease asked for on connect (default 60,000 ms). */
  readonly leaseMs?: number;
  /** Clock for lease decisions (default `Date.now`). */
  readonly now?: () => number;
}

export interface VolatileTaskSession {
  readonly callerSession: string;
  readonly url: string;
  readonly transport: RelayTransport;
  status(): SessionStatus;
  binding(): Binding | undefined;
  /** Additions the relay advertised in its profile (docs/wire.md; empty for a plain Wolfpack relay). */
  features(): ReadonlySet<string>;
  connect(signal?: AbortSignal): Promise<Binding>;
  /** The current binding, connecting first or renewing the lease when it is due (joins a running connect). */
  lease(signal?: AbortSignal): Promise<Binding>;
  rebind(signal?: AbortSignal): Promise<Binding>;
  resolve(target: TaskEndpoint, options?: { followSuccessor?: boolean; signal?: AbortSignal }): Promise<Resolution>;
  /** Sends an envelope already encoded (its text goes into the request as is: no re-serialization). */
  send(envelope: EncodedEnvelope, signal?: AbortSignal): Promise<SendAcceptance>;
  receive(cursor: string, options?: { limit?: number; signal?: AbortSignal }): Promise<InboxPage>;
  acknowledge(envelopeId: string, signal?: AbortSignal): Promise<{ duplicate: boolean }>;
  /**
   * `ack-batch-v1` (only when the relay advertises it; else `INCOMPATIBLE_PROTOCOL` before any
   * request): acknowledges up to `maxAckBatchItems` distinct ids in one request; each id's outcome
   * in order (`unknown` / `gone`: the relay does not hold it for this endpoint).
   */
  acknowledgeBatch(
    envelopeIds: readonly string[],
    signal?: AbortSignal,
  ): Promise<readonly { readonly envelopeId: string; readonly outcome: AckOutcome }[]>;
  /**
   * `send-batch-v1` (only when advertised; else `INCOMPATIBLE_PROTOCOL` before any request): up to
   * `maxSendBatchItems` distinct envelopes in one request, each envelope's outcome in order. `send`
   * itself puts the sends of one tick that share a signal into such a request when the relay
   * advertises the feature.
   */
  sendBatch(envelopes: readonly EncodedEnvelope[], signal?: AbortSignal): Promise<readonly SentOutcome[]>;
  /**
   * `ack-carry-v1` (only when advertised): `envelopes` admitted first, as by `sendBatch`, then the ids
   * acknowledged only if every envelope was accepted (else each id's outcome is `withheld`).
   */
  acknowledgeCarrying(
    envelopeIds: readonly string[],
    envelopes: readonly EncodedEnvelope[],
    signal?: AbortSignal,
  ): Promise<{
    readonly results: readonly { readonly envelopeId: string; readonly outcome: AckOutcome }[];
    readonly sent: readonly SentOutcome[];
  }>;
  watch(cursor: string, waitMs: number, signal?: AbortSignal): Promise<WatchResult>;
  health(signal?: AbortSignal): Promise<Record<string, unknown>>;
  disconnect(signal?: AbortSignal): Promise<void>;
  /** Called once per retired binding with the `RELAY_RESET` it raised. */
  onRetire(listener: (error: TaskError) => void): () => void;
  close(): void;
}

function malformed(code: ErrorCode, operation: RelayOperation, problem: string, details: Record<string, unknown> = {}): TaskError {
  return new TaskError(code, { details: { operation, problem, ...details } });
}

type ReplyOf<O extends RelayOperation> = Static<(typeof RELAY_REPLIES)[O]>;

/**
 * The reply value of `operation` as its wire schema says, or `code` naming the first problem.
 * `reportAs` is the operation the caller asked for (a lease renewal connects on behalf of another).
 */
function replyOf<O extends RelayOperation>(
  operation: O,
  value: unknown,
  code: ErrorCode,
  details: Record<string, unknown> = {},
  reportAs: RelayOperation = operation,
): ReplyOf<O> {
  const checked = checkValue(RELAY_REPLIES[operation], value, { code });
  if (checked.ok) return checked.value as ReplyOf<O>;
  const { path, problem } = checked.error.details as { path: string; problem: string };
  throw malformed(code, reportAs, `reply ${path === "" ? "value" : path}: ${problem}`, details);
}

function copyEndpoint(endpoint: TaskEndpoint): TaskEndpoint {
  return { relay: endpoint.relay, id: endpoint.id };
}

/** The name a session binds under when its own is held by another registration: `<name>~<8 chars of the generation>`. */
export function derivedName(callerSession: string, generation: string): string {
  const suffix = `${DERIVED_NAME_SEPARATOR}${generation.slice(0, derivedNameSuffixChars)}`;
  return `${callerSession.slice(0, maxWireIdChars - suffix.length)}${suffix}`;
}

/** A value shared by every part of one session. */
interface SessionContext {
  readonly transport: RelayTransport;
  readonly url: string;
  readonly callerSession: string;
  readonly leaseMs: number;
  readonly now: () => number;
  readonly state: BindingHolder;
  readonly secret: SecretKeeper;
  readonly retired: Listeners<TaskError>;
  /** The connect running now, which every caller needing a binding joins. */
  readonly connecting: SingleFlight<ReadyState>;
}

/**
 * This session's binding secret (`binding-secret-v1`). It lives for the session, not for one
 * binding — a rebind keeps it, so the relay recognises its own registration — and only here:
 * chosen once, sent only to a relay advertising the feature, dropped on close.
 */
interface SecretKeeper {
  /** The field to send under `features` (nothing to a relay without `binding-secret-v1`). */
  field(features: ReadonlySet<string> | undefined): { bindingSecret?: string };
  drop(): void;
}

function createSecretKeeper(): SecretKeeper {
  let secret: string | undefined = mintBindingSecret();
  return {
    field: (features) => (secret !== undefined && features?.has(FEATURE_BINDING_SECRET) === true ? { bindingSecret: secret } : {}),
    drop() {
      secret = undefined;
    },
  };
}

/** At most one task at a time; callers arriving while it runs join it. */
interface SingleFlight<T> {
  running(): Promise<T> | undefined;
  run(task: () => Promise<T>): Promise<T>;
}

function createSingleFlight<T>(): SingleFlight<T> {
  let running: Promise<T> | undefined;
  return {
    running: () => running,
    run(task) {
      const attempt = task().finally(() => {
        if (running === attempt) running = undefined;
      });
      running = attempt;
      return attempt;
    },
  };
}

interface Listeners<T> {
  add(listener: (value: T) => void): () => void;
  notify(value: T): void;
}

function createListeners<T>(): Listeners<T> {
  const listeners = new Set<(value: T) => void>();
  return {
    add(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    notify(value) {
      for (const listener of [...listeners]) listener(value);
    },
  };
}

function checkUsable(status: SessionStatus, operation: RelayOperation): void {
  if (status === "closed") throw new TaskError("RELAY_CLOSED", { details: { operation } });
  if (status === "reset") throw new TaskError("RELAY_REBIND_REQUIRED", { details: { operation } });
}

/** Retires the current binding (once: listeners hear of it once) and returns the `RELAY_RESET` to throw. */
function retire(ctx: SessionContext, operation: RelayOperation, cause: Record<string, unknown>): TaskError {
  const bound = ctx.state.current().bound;
  const error = new TaskError("RELAY_RESET", {
    details: {
      operation,
      mayHaveBeenDelivered: true,
      ...(bound === undefined ? {} : { priorEndpoint: bound.endpoint, boundEpoch: bound.epoch }),
      ...cause,
    },
  });
  if (ctx.state.retire(error)) ctx.retired.notify(error);
  return error;
}

/** What a failed call becomes: binding retirement when it says the binding is gone, else itself. */
function failureAfter(
  ctx: SessionContext,
  error: unknown,
  operation: RelayOperation,
  callFence: AbortController,
  expectedEpoch: string | undefined,
): unknown {
  if (callFence.signal.aborted) {
    // Fenced by close or by a retired binding, not by the caller.
    if (ctx.state.current().status === "closed") return new TaskError("RELAY_CLOSED", { details: { operation } });
    return new TaskError("RELAY_RESET", { details: { operation, mayHaveBeenDelivered: true } });
  }
  if (!(error instanceof TaskError)) return error;
  const epoch = error.details.epoch;
  if (expectedEpoch !== undefined && typeof epoch === "string" && epoch !== expectedEpoch) {
    return retire(ctx, operation, { cause: error.code, epoch });
  }
  if (errorSpec(error.code).rebind) return retire(ctx, operation, { cause: error.code, ...(typeof epoch === "string" ? { epoch } : {}) });
  return error;
}

async function loadFeatures(transport: RelayTransport, signal: AbortSignal | undefined): Promise<ReadonlySet<string>> {
  const profile = await transport.profile({ signal });
  const advertised = Array.isArray(profile.features) ? profile.features.filter((item): item is string => typeof item === "string") : [];
  return new Set(advertised);
}

/** The connect request of the lifetime in `start` (a renewal names the bound epoch). */
function connectBody(ctx: SessionContext, start: BindingState, features: ReadonlySet<string>): Record<string, unknown> {
  return {
    operation: "connect",
    profile: RELAY_PROFILE,
    callerSession: start.registeredName,
    generation: start.generation,
    protocolVersions: [WIRE_PROTOCOL_VERSION],
    leaseMs: ctx.leaseMs,
    ...(start.bound === undefined ? {} : { epoch: start.bound.epoch }),
    ...ctx.secret.field(features),
  };
}

function connectionOf(reply: SuccessReply, operation: RelayOperation): ReplyOf<"connect"> {
  const value = replyOf("connect", reply.value, "INVALID_CONNECTION", {}, operation);
  if (!isUuid(value.endpoint.id)) throw malformed("INVALID_CONNECTION", operation, "the endpoint id is not a UUID");
  if (Number.isNaN(Date.parse(value.leaseExpiresAt))) throw malformed("INVALID_CONNECTION", operation, "leaseExpiresAt is not a date");
  return value;
}

/**
 * One connect (or lease renewal) for the current lifetime; binds its result in one step. A
 * renewal answered with another epoch or endpoint retires the binding instead.
 */
async function connectOnce(
  ctx: SessionContext,
  signal: AbortSignal | undefined,
  operation: RelayOperation = "connect",
): Promise<ReadyState> {
  const start = ctx.state.current();
  const previous = start.bound;
  const startedAt = ctx.now();
  const features = start.features ?? (await loadFeatures(ctx.transport, signal));
  if (start.features === undefined) ctx.state.withFeatures(start.fence, features);
  let reply: SuccessReply;
  try {
    reply = await ctx.transport.post("connect", requestText(connectBody(ctx, start, features)), {
      ...(signal === undefined ? {} : { signal }),
      fence: start.fence.signal,
    });
  } catch (error) {
    throw failureAfter(ctx, error, operation, start.fence, previous?.epoch);
  }
  const after = ctx.state.current();
  if (after.fence !== start.fence || after.status === "reset" || after.status === "closed")
    throw new TaskError("RELAY_RESET", { details: { operation } });
  const value = connectionOf(reply, operation);
  if (previous !== undefined && (reply.epoch !== previous.epoch || !sameEndpoint(previous.endpoint, value.endpoint))) {
    throw retire(ctx, operation, { epoch: reply.epoch, renewedEndpoint: value.endpoint });
  }
  return ctx.state.bind({
    epoch: reply.epoch,
    endpoint: copyEndpoint(value.endpoint),
    generation: start.generation,
    callerSession: start.registeredName,
    url: ctx.url,
    // Local clock only (the relay's clock may be skewed): the lease runs at least from when the
    // request was sent, so counting from then is conservative.
    leaseDeadline: startedAt + ctx.leaseMs,
  });
}

/** A ready state to run `operation` under: the current one, a running connect's, or a fresh connect's. */
async function ensureBound(ctx: SessionContext, operation: RelayOperation, signal: AbortSignal | undefined): Promise<ReadyState> {
  const state = ctx.state.current();
  checkUsable(state.status, operation);
  const running = ctx.connecting.running();
  if (running !== undefined) return running;
  if (isReady(state)) {
    const renewAt = state.bound.leaseDeadline - (ctx.transport.requestTimeoutMs + leaseRenewMarginMs);
    if (ctx.now() < renewAt) return state;
  }
  return ctx.connecting.run(() => connectOnce(ctx, signal, operation));
}

function connect(ctx: SessionContext, signal: AbortSignal | undefined): Promise<ReadyState> {
  if (ctx.connecting.running() !== undefined) throw new TaskError("RELAY_BUSY", { details: { operation: "connect" } });
  return ctx.connecting.run(() => connectOnce(ctx, signal));
}

/** A fresh lifetime; under a derived name when another registration holds this session's own. */
async function rebind(ctx: SessionContext, signal: AbortSignal | undefined): Promise<Binding> {
  if (ctx.state.current().status === "closed") throw new TaskError("RELAY_CLOSED", { details: { operation: "connect" } });
  if (ctx.connecting.running() !== undefined) throw new TaskError("RELAY_BUSY", { details: { operation: "connect" } });
  ctx.state.restart();
  try {
    return (await ctx.connecting.run(() => connectOnce(ctx, signal))).bound;
  } catch (error) {
    if (!(error instanceof TaskError) || error.code !== "SESSION_PROTECTED" || ctx.state.current().status === "closed") throw error;
    // Another registration holds the name (a stranger took it after a restart, and renews it):
    // bind under a name of our own instead of waiting for it forever. Peers find this session
    // by its signed mail and hellos, which still claim `callerSession` (src/core/reconnect.ts).
    ctx.state.rename(derivedName(ctx.callerSession, ctx.state.current().generation));
    return (await ctx.connecting.run(() => connectOnce(ctx, signal))).bound;
  }
}

/** A bound operation's reply value, with the binding (and its fence) it was sent under. */
interface BoundReply {
  readonly value: Record<string, unknown>;
  readonly bound: Binding;
  readonly fence: AbortController;
}

/** Envelopes a request carries: one (`envelope`) or a list (`envelopes`); their texts are spliced in as stored. */
type Carried = EncodedEnvelope | readonly EncodedEnvelope[];

/** A request's text with its carried envelopes; none may name an endpoint other than the bound one. */
function carriedText(operation: RelayOperation, body: Record<string, unknown>, carried: Carried | undefined, bound: Binding): string {
  if (carried === undefined) return requestText(body);
  const list = Array.isArray(carried) ? (carried as readonly EncodedEnvelope[]) : [carried as EncodedEnvelope];
  const stale = list.find((envelope) => envelope.source !== undefined && !sameEndpoint(envelope.source, bound.endpoint));
  if (stale !== undefined) {
    // Bound anew while this send waited: the relay would refuse the old source (SOURCE_MISMATCH).
    throw deferral("rebind", "the envelope names an endpoint that is no longer bound", { operation, envelopeId: stale.envelopeId });
  }
  return Array.isArray(carried)
    ? batchRequestText(
        body,
        list.map((envelope) => envelope.text),
      )
    : requestText(body, (carried as EncodedEnvelope).text);
}

/**
 * Sends one bound operation under one snapshot of the binding: its epoch, endpoint, name,
 * secret and fence all come from the same state.
 */
async function callBound(
  ctx: SessionContext,
  operation: RelayOperation,
  fields: Record<string, unknown>,
  signal: AbortSignal | undefined,
  extraDeadlineMs = 0,
  carried?: Carried,
): Promise<BoundReply> {
  const state = await ensureBound(ctx, operation, signal);
  const { bound, fence } = state;
  const body = {
    operation,
    profile: RELAY_PROFILE,
    epoch: bound.epoch,
    callerSession: state.registeredName,
    endpoint: bound.endpoint,
    ...ctx.secret.field(state.features),
    ...fields,
  };
  const text = carriedText(operation, body, carried, bound);
  let reply: SuccessReply;
  try {
    const options = { ...(signal === undefined ? {} : { signal }), fence: fence.signal, extraDeadlineMs };
    reply = await ctx.transport.post(operation, text, options);
  } catch (error) {
    throw failureAfter(ctx, error, operation, fence, bound.epoch);
  }
  const after = ctx.state.current();
  if (after.fence !== fence || after.status !== "ready")
    throw new TaskError("RELAY_RESET", { details: { operation, mayHaveBeenDelivered: true } });
  if (reply.epoch !== bound.epoch) throw retire(ctx, operation, { epoch: reply.epoch });
  return { value: reply.value, bound, fence };
}

async function call(
  ctx: SessionContext,
  operation: RelayOperation,
  fields: Record<string, unknown>,
  signal: AbortSignal | undefined,
  extraDeadlineMs = 0,
): Promise<Record<string, unknown>> {
  return (await callBound(ctx, operation, fields, signal, extraDeadlineMs)).value;
}

/** Binds first, then refuses with `INCOMPATIBLE_PROTOCOL` unless the relay advertised `feature`. */
async function requireFeature(
  ctx: SessionContext,
  operation: RelayOperation,
  feature: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  const state = await ensureBound(ctx, operation, signal);
  if (state.features?.has(feature) !== true) throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation, feature } });
}

async function resolveTarget(
  ctx: SessionContext,
  target: TaskEndpoint,
  options: { followSuccessor?: boolean; signal?: AbortSignal },
): Promise<Resolution> {
  const followSuccessor = options.followSuccessor === true;
  if (followSuccessor) await requireFeature(ctx, "resolve", FEATURE_SUCCESSOR, options.signal);
  const fields = { target, ...(followSuccessor ? { followSuccessor: true } : {}) };
  const value = replyOf("resolve", await call(ctx, "resolve", fields, options.signal), "INVALID_TARGET");
  const endpoint = copyEndpoint(value.endpoint);
  if (sameEndpoint(endpoint, target)) return { endpoint };
  if (followSuccessor && value.successorOf !== undefined && sameEndpoint(value.successorOf, target))
    return { endpoint, successorOf: copyEndpoint(target) };
  throw malformed("INVALID_TARGET", "resolve", "resolved endpoint differs from the reference", { target, resolved: endpoint });
}

/** An acceptance of `envelopeId` as the client keeps it; one that names another envelope or no UUID is `INVALID_ACCEPTANCE`. */
function acceptanceOf(
  value: { envelopeId: string; acceptanceId: string; duplicate: boolean; forwarding: "local" | "forwarded" },
  envelopeId: string,
): SendAcceptance {
  const details = { envelopeId };
  if (value.envelopeId !== envelopeId) throw malformed("INVALID_ACCEPTANCE", "send", "the acceptance names another envelope", details);
  if (!isUuid(value.acceptanceId)) throw malformed("INVALID_ACCEPTANCE", "send", "acceptanceId is not a UUID", details);
  return { envelopeId: value.envelopeId, acceptanceId: value.acceptanceId, duplicate: value.duplicate, forwarding: value.forwarding };
}

async function sendEnvelope(ctx: SessionContext, envelope: EncodedEnvelope, signal: AbortSignal | undefined): Promise<SendAcceptance> {
  const details = { envelopeId: envelope.envelopeId };
  const reply = await callBound(ctx, "send", {}, signal, 0, envelope);
  const value = replyOf("send", reply.value, "INVALID_ACCEPTANCE", details);
  if (value.kind !== "accepted") throw malformed("INVALID_ACCEPTANCE", "send", "a batch answer to a single send", details);
  return acceptanceOf(value, envelope.envelopeId);
}

/**
 * A batch answer's outcomes, which must name exactly the envelopes sent, in order. A refusal is the
 * error a single send would throw: one whose code retires the binding retires it (`RELAY_RESET`).
 */
function sentOutcomes(
  ctx: SessionContext,
  operation: RelayOperation,
  results: readonly SendResult[],
  envelopes: readonly EncodedEnvelope[],
  reply: BoundReply,
): SentOutcome[] {
  if (results.length !== envelopes.length || results.some((result, index) => result.envelopeId !== envelopes[index]!.envelopeId))
    throw malformed("INVALID_ACCEPTANCE", operation, "the batch answer does not name the envelopes sent, in order");
  return results.map((result): SentOutcome => {
    const envelopeId = result.envelopeId;
    if (result.outcome === "skipped") return { envelopeId, outcome: "skipped" };
    if (result.outcome === "accepted") return { envelopeId, outcome: "accepted", acceptance: acceptanceOf(result, envelopeId) };
    const retryAfterMs = result.error.retryAfterMs;
    const details = { operation, envelopeId, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
    const refusal = relayRefusal(result.error, details);
    const error = failureAfter(ctx, refusal, operation, reply.fence, reply.bound.epoch) as TaskError;
    return { envelopeId, outcome: "refused", error };
  });
}

async function sendEnvelopes(
  ctx: SessionContext,
  envelopes: readonly EncodedEnvelope[],
  signal: AbortSignal | undefined,
): Promise<SentOutcome[]> {
  await requireFeature(ctx, "send", FEATURE_SEND_BATCH, signal);
  const reply = await callBound(ctx, "send", {}, signal, 0, envelopes);
  const value = replyOf("send", reply.value, "INVALID_ACCEPTANCE");
  if (value.kind !== "accepted-batch") throw malformed("INVALID_ACCEPTANCE", "send", "a single answer to a batched send");
  return sentOutcomes(ctx, "send", value.results, envelopes, reply);
}

async function receivePage(ctx: SessionContext, cursor: string, options: { limit?: number; signal?: AbortSignal }): Promise<InboxPage> {
  const limit = options.limit ?? maxReceivePageItems;
  const reply = await callBound(ctx, "receive", { cursor, limit }, options.signal);
  // Checked against the endpoint the page was asked for, even if the session rebinds meanwhile.
  return validatePage(reply.value, cursor, limit, reply.bound.endpoint);
}

async function acknowledgeOne(ctx: SessionContext, envelopeId: string, signal: AbortSignal | undefined): Promise<{ duplicate: boolean }> {
  const value = replyOf("acknowledge", await call(ctx, "acknowledge", { envelopeId }, signal), "INVALID_RESPONSE");
  if (value.kind !== "acknowledged") throw malformed("INVALID_RESPONSE", "acknowledge", "a batch answer to a single acknowledgement");
  return { duplicate: value.duplicate };
}

async function acknowledgeMany(
  ctx: SessionContext,
  envelopeIds: readonly string[],
  signal: AbortSignal | undefined,
): Promise<readonly { readonly envelopeId: string; readonly outcome: AckOutcome }[]> {
  await requireFeature(ctx, "acknowledge", FEATURE_ACK_BATCH, signal);
  const value = replyOf("acknowledge", await call(ctx, "acknowledge", { envelopeIds }, signal), "INVALID_RESPONSE");
  // The answer must name exactly the ids asked for, in order.
  if (
    value.kind !== "acknowledged-batch" ||
    !namesInOrder(value.results, envelopeIds) ||
    value.results.some((r) => r.outcome === "withheld")
  ) {
    throw malformed("INVALID_RESPONSE", "acknowledge", "the batch answer does not name the ids asked for, in order");
  }
  return value.results;
}

async function acknowledgeCarrying(
  ctx: SessionContext,
  envelopeIds: readonly string[],
  envelopes: readonly EncodedEnvelope[],
  signal: AbortSignal | undefined,
): Promise<{ results: readonly { envelopeId: string; outcome: AckOutcome }[]; sent: readonly SentOutcome[] }> {
  await requireFeature(ctx, "acknowledge", FEATURE_ACK_CARRY, signal);
  const reply = await callBound(ctx, "acknowledge", { envelopeIds }, signal, 0, envelopes);
  const value = replyOf("acknowledge", reply.value, "INVALID_RESPONSE");
  if (value.kind !== "acknowledged-batch" || value.sent === undefined || !namesInOrder(value.results, envelopeIds))
    throw malformed("INVALID_RESPONSE", "acknowledge", "the answer does not name the ids asked for, in order, with the carried envelopes");
  const sent = sentOutcomes(ctx, "acknowledge", value.sent, envelopes, reply);
  const allAccepted = sent.every((outcome) => outcome.outcome === "accepted");
  if (value.results.some((result) => (result.outcome === "withheld") === allAccepted))
    throw malformed("INVALID_RESPONSE", "acknowledge", "ids are withheld exactly when a carried envelope was not accepted");
  return { results: value.results, sent };
}

function namesInOrder(results: readonly { envelopeId: string }[], envelopeIds: readonly string[]): boolean {
  return results.length === envelopeIds.length && results.every((result, index) => result.envelopeId === envelopeIds[index]);
}

async function watchInbox(ctx: SessionContext, cursor: string, waitMs: number, signal: AbortSignal | undefined): Promise<WatchResult> {
  await requireFeature(ctx, "watch", FEATURE_WATCH, signal);
  const value = replyOf("watch", await call(ctx, "watch", { cursor, waitMs }, signal, waitMs), "INVALID_RESPONSE");
  return { pending: value.pending, highestCursor: value.highestCursor };
}

function sessionContext(options: VolatileTaskSessionOptions): SessionContext {
  const transport = createRelayTransport({
    baseUrl: options.url,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }),
    ...(options.auth === undefined ? {} : { auth: options.auth }),
  });
  return {
    transport,
    url: transport.baseUrl,
    callerSession: options.callerSession,
    leaseMs: options.leaseMs ?? defaultLeaseMs,
    now: options.now ?? Date.now,
    state: createBindingHolder(options.callerSession),
    secret: createSecretKeeper(),
    retired: createListeners<TaskError>(),
    connecting: createSingleFlight<ReadyState>(),
  };
}

export function createVolatileTaskSession(options: VolatileTaskSessionOptions): VolatileTaskSession {
  const ctx = sessionContext(options);
  const sends = createSendCoalescer({
    enabled: () => ctx.state.current().features?.has(FEATURE_SEND_BATCH) === true,
    single: (envelope, signal) => sendEnvelope(ctx, envelope, signal),
    batch: (envelopes, signal) => sendEnvelopes(ctx, envelopes, signal),
  });
  return {
    callerSession: ctx.callerSession,
    url: ctx.url,
    transport: ctx.transport,
    status: () => ctx.state.current().status,
    binding: () => ctx.state.current().bound,
    features: () => ctx.state.current().features ?? new Set(),
    async connect(signal) {
      checkUsable(ctx.state.current().status, "connect");
      return (await connect(ctx, signal)).bound;
    },
    lease: async (signal) => (await ensureBound(ctx, "connect", signal)).bound,
    rebind: (signal) => rebind(ctx, signal),
    resolve: (target, resolveOptions = {}) => resolveTarget(ctx, target, resolveOptions),
    send: (envelope, signal) => sends.send(envelope, signal),
    sendBatch: (envelopes, signal) => sendEnvelopes(ctx, envelopes, signal),
    receive: (cursor, receiveOptions = {}) => receivePage(ctx, cursor, receiveOptions),
    acknowledge: (envelopeId, signal) => acknowledgeOne(ctx, envelopeId, signal),
    acknowledgeBatch: (envelopeIds, signal) => acknowledgeMany(ctx, envelopeIds, signal),
    acknowledgeCarrying: (envelopeIds, envelopes, signal) => acknowledgeCarrying(ctx, envelopeIds, envelopes, signal),
    watch: (cursor, waitMs, signal) => watchInbox(ctx, cursor, waitMs, signal),
    async health(signal) {
      return replyOf("health", await call(ctx, "health", {}, signal), "INVALID_RESPONSE").store;
    },
    async disconnect(signal) {
      replyOf("disconnect", await call(ctx, "disconnect", {}, signal), "INVALID_RESPONSE");
    },
    onRetire: (listener) => ctx.retired.add(listener),
    close() {
      if (ctx.state.current().status === "closed") return;
      ctx.secret.drop();
      ctx.state.close();
      ctx.transport.close();
    },
  };
}

/**
 * Validates a receive page: its schema, then what a schema cannot say — at most `limit` items,
 * cursors ascending after the requested one, no envelope id twice, every envelope addressed to
 * `me`, `nextCursor` the last cursor (or the requested one on an empty page), no `hasMore` on an
 * empty page. A bad page is `INVALID_INBOX` and must not move any checkpoint.
 */
export function validatePage(value: Record<string, unknown>, cursor: string, limit: number, me: TaskEndpoint | undefined): InboxPage {
  const fail = (problem: string) => malformed("INVALID_INBOX", "receive", problem, { cursor });
  const page = replyOf("receive", value, "INVALID_INBOX", { cursor });
  if (page.deliveries.length > limit) throw fail(`page has more than ${limit} deliveries`);
  let previous = cursor;
  const seen = new Set<string>();
  const deliveries: InboxDelivery[] = [];
  for (const item of page.deliveries) {
    if (compareCursors(item.cursor, previous) <= 0) throw fail("cursors are not ascending after the requested cursor");
    previous = item.cursor;
    const envelope = item.envelope as Record<string, unknown> & { envelopeId: string };
    const envelopeId = envelope.envelopeId;
    if (seen.has(envelopeId)) throw fail("duplicate envelopeId in one page");
    seen.add(envelopeId);
    if (me !== undefined && !(isRecord(envelope.target) && sameEndpoint(envelope.target as TaskEndpoint, me))) {
      throw fail("delivery is addressed to another endpoint");
    }
    deliveries.push({ cursor: item.cursor, envelopeId, envelope });
  }
  const expectedNext = deliveries.at(-1)?.cursor ?? cursor;
  if (page.nextCursor !== expectedNext) throw fail("nextCursor is not the last delivered cursor");
  if (page.hasMore && deliveries.length === 0) throw fail("hasMore on an empty page");
  return { deliveries, nextCursor: page.nextCursor, hasMore: page.hasMore };
}
