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
import { nanoid } from "nanoid";
import { isUuid, sameEndpoint } from "../protocol/endpoint.ts";
import { type ErrorCode, errorSpec, TaskError } from "../protocol/errors.ts";
import {
  DERIVED_NAME_SEPARATOR,
  DERIVED_NAME_SUFFIX_CHARS,
  leaseDefaultMs,
  leaseRenewMarginMs,
  maxWireIdChars,
  RELAY_PROFILE,
  receivePageMaxItems,
  WIRE_PROTOCOL_VERSION,
} from "../protocol/limits.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import { checkValue, isRecord } from "../protocol/validate.ts";
import {
  compareCursors,
  type EncodedEnvelope,
  FEATURE_BINDING_SECRET,
  FEATURE_SUCCESSOR,
  FEATURE_WATCH,
  FEATURE_ACK_BATCH,
  type AckOutcome,
  mintBindingSecret,
  RELAY_REPLIES,
  type RelayOperation,
  requestText,
} from "../protocol/wire.ts";
import type { RelayAuth } from "./auth.ts";
import { createRelayTransport, type RelayTransport, type SuccessReply } from "./transport.ts";

export type SessionStatus = "unbound" | "ready" | "reset" | "closed";

export interface Binding {
  readonly epoch: string;
  readonly endpoint: TaskEndpoint;
  readonly generation: string;
  readonly callerSession: string;
  readonly url: string;
  /** Local lease deadline: request start + requested lease, on the local clock. */
  readonly leaseDeadline: number;
}

export interface SendAcceptance {
  readonly envelopeId: string;
  readonly acceptanceId: string;
  readonly duplicate: boolean;
  readonly forwarding: "local" | "forwarded";
}

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

export interface RelaySessionOptions {
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

export interface RelaySession {
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
   * request): acknowledges up to `ackBatchMaxItems` distinct ids in one request; each id's outcome
   * in order (`unknown` / `gone`: the relay does not hold it for this endpoint).
   */
  acknowledgeBatch(
    envelopeIds: readonly string[],
    signal?: AbortSignal,
  ): Promise<readonly { readonly envelopeId: string; readonly outcome: AckOutcome }[]>;
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
  const suffix = `${DERIVED_NAME_SEPARATOR}${generation.slice(0, DERIVED_NAME_SUFFIX_CHARS)}`;
  return `${callerSession.slice(0, maxWireIdChars - suffix.length)}${suffix}`;
}

export function createRelaySession(options: RelaySessionOptions): RelaySession {
  const now = options.now ?? Date.now;
  const leaseMs = options.leaseMs ?? leaseDefaultMs;
  const transport = createRelayTransport({
    baseUrl: options.url,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }),
    ...(options.auth === undefined ? {} : { auth: options.auth }),
  });
  const url = transport.baseUrl;
  const callerSession = options.callerSession;
  /**
   * The name this session registers under: `callerSession`, unless a rebind found it held by
   * another registration (`SESSION_PROTECTED`: someone else took it while this session was away)
   * and bound under a derived name instead (`rebind`).
   */
  let registeredName = callerSession;
  const retireListeners = new Set<(error: TaskError) => void>();

  let status: SessionStatus = "unbound";
  // An opaque per-lifetime generation (the wire allows any 1–512 characters).
  let generation: string = nanoid();
  let bound: Binding | undefined;
  let features: ReadonlySet<string> | undefined;
  /**
   * This session's binding secret (`binding-secret-v1`), chosen here once for the session's life:
   * sent on connect and with every bound operation when the relay advertises the feature;
   * dropped on close.
   */
  let secret: string | undefined = mintBindingSecret();
  /** Aborted when the binding is retired or the session closes: fences in-flight calls. */
  let bindingFence = new AbortController();
  let connecting: Promise<Binding> | undefined;

  function checkUsable(operation: RelayOperation): void {
    if (status === "closed") throw new TaskError("RELAY_CLOSED", { details: { operation } });
    if (status === "reset") throw new TaskError("RELAY_REBIND_REQUIRED", { details: { operation } });
  }

  function retire(operation: RelayOperation, cause: Record<string, unknown>): TaskError {
    const error = new TaskError("RELAY_RESET", {
      details: {
        operation,
        mayHaveBeenDelivered: true,
        ...(bound === undefined ? {} : { priorEndpoint: bound.endpoint, boundEpoch: bound.epoch }),
        ...cause,
      },
    });
    if (status === "ready" || status === "unbound") {
      status = "reset";
      bindingFence.abort(error);
      for (const listener of [...retireListeners]) listener(error);
    }
    return error;
  }

  /** Turns failures into binding retirement when they say the binding is gone. */
  function judge(error: unknown, operation: RelayOperation, callFence: AbortController, expectedEpoch: string | undefined): unknown {
    if (callFence.signal.aborted) {
      // Fenced by close or by a retired binding, not by the caller.
      if (status === "closed") return new TaskError("RELAY_CLOSED", { details: { operation } });
      return new TaskError("RELAY_RESET", { details: { operation, mayHaveBeenDelivered: true } });
    }
    if (!(error instanceof TaskError)) return error;
    const epoch = error.details.epoch;
    if (expectedEpoch !== undefined && typeof epoch === "string" && epoch !== expectedEpoch) {
      return retire(operation, { cause: error.code, epoch });
    }
    if (errorSpec(error.code).rebind) return retire(operation, { cause: error.code, ...(typeof epoch === "string" ? { epoch } : {}) });
    return error;
  }

  /** The secret to send, when the relay advertises `binding-secret-v1` (never to one that does not). */
  function secretField(): { bindingSecret?: string } {
    return secret !== undefined && features?.has(FEATURE_BINDING_SECRET) === true ? { bindingSecret: secret } : {};
  }

  async function call(
    operation: RelayOperation,
    fields: Record<string, unknown>,
    signal: AbortSignal | undefined,
    extraDeadlineMs = 0,
    envelope?: EncodedEnvelope,
  ): Promise<Record<string, unknown>> {
    const binding = await ensureBound(operation, signal);
    if (envelope?.source !== undefined && !sameEndpoint(envelope.source, binding.endpoint)) {
      // Bound anew while this send waited: the relay would refuse the old source (SOURCE_MISMATCH).
      throw new TaskError("TASK_DELIVERY_DEFERRED", {
        details: { operation, envelopeId: envelope.envelopeId, reason: "the envelope names an endpoint that is no longer bound" },
      });
    }
    const callFence = bindingFence;
    const body = {
      operation,
      profile: RELAY_PROFILE,
      epoch: binding.epoch,
      callerSession: registeredName,
      endpoint: binding.endpoint,
      ...secretField(),
      ...fields,
    };
    let reply: SuccessReply;
    try {
      reply = await transport.post(operation, requestText(body, envelope?.text), {
        ...(signal === undefined ? {} : { signal }),
        fence: callFence.signal,
        extraDeadlineMs,
      });
    } catch (error) {
      throw judge(error, operation, callFence, binding.epoch);
    }
    if (callFence !== bindingFence || status !== "ready")
      throw new TaskError("RELAY_RESET", { details: { operation, mayHaveBeenDelivered: true } });
    if (reply.epoch !== binding.epoch) throw retire(operation, { epoch: reply.epoch });
    return reply.value;
  }

  async function loadFeatures(signal: AbortSignal | undefined): Promise<ReadonlySet<string>> {
    const profile = await transport.profile({ signal });
    const advertised = Array.isArray(profile.features) ? profile.features.filter((item): item is string => typeof item === "string") : [];
    return new Set(advertised);
  }

  async function doConnect(signal: AbortSignal | undefined, operation: RelayOperation = "connect"): Promise<Binding> {
    const previous = bound;
    const callFence = bindingFence;
    const startedAt = now();
    if (features === undefined) features = await loadFeatures(signal);
    const body = {
      operation: "connect",
      profile: RELAY_PROFILE,
      callerSession: registeredName,
      generation,
      protocolVersions: [WIRE_PROTOCOL_VERSION],
      leaseMs,
      ...(previous === undefined ? {} : { epoch: previous.epoch }),
      ...secretField(),
    };
    let reply: SuccessReply;
    try {
      reply = await transport.post("connect", requestText(body), { ...(signal === undefined ? {} : { signal }), fence: callFence.signal });
    } catch (error) {
      throw judge(error, operation, callFence, previous?.epoch);
    }
    if (callFence !== bindingFence || status === "reset" || status === "closed")
      throw new TaskError("RELAY_RESET", { details: { operation } });
    const value = replyOf("connect", reply.value, "INVALID_CONNECTION", {}, operation);
    if (!isUuid(value.endpoint.id)) throw malformed("INVALID_CONNECTION", operation, "the endpoint id is not a UUID");
    if (Number.isNaN(Date.parse(value.leaseExpiresAt))) throw malformed("INVALID_CONNECTION", operation, "leaseExpiresAt is not a date");
    if (previous !== undefined && (reply.epoch !== previous.epoch || !sameEndpoint(previous.endpoint, value.endpoint))) {
      throw retire(operation, { epoch: reply.epoch, renewedEndpoint: value.endpoint });
    }
    bound = {
      epoch: reply.epoch,
      endpoint: copyEndpoint(value.endpoint),
      generation,
      callerSession: registeredName,
      url,
      // Local clock only (the relay's clock may be skewed): the lease runs at least from when the
      // request was sent, so counting from then is conservative.
      leaseDeadline: startedAt + leaseMs,
    };
    status = "ready";
    return bound;
  }

  function singleFlight(run: () => Promise<Binding>): Promise<Binding> {
    const attempt = run().finally(() => {
      if (connecting === attempt) connecting = undefined;
    });
    connecting = attempt;
    return attempt;
  }

  async function ensureBound(operation: RelayOperation, signal: AbortSignal | undefined): Promise<Binding> {
    checkUsable(operation);
    if (connecting !== undefined) return connecting;
    if (bound !== undefined && status === "ready") {
      const renewAt = bound.leaseDeadline - (transport.requestTimeoutMs + leaseRenewMarginMs);
      if (now() < renewAt) return bound;
    }
    return singleFlight(() => doConnect(signal, operation));
  }

  const session: RelaySession = {
    callerSession,
    url,
    transport,
    status: () => status,
    binding: () => bound,
    features: () => features ?? new Set(),
    async connect(signal) {
      checkUsable("connect");
      if (connecting !== undefined) throw new TaskError("RELAY_BUSY", { details: { operation: "connect" } });
      return singleFlight(() => doConnect(signal));
    },
    lease: (signal) => ensureBound("connect", signal),
    async rebind(signal) {
      if (status === "closed") throw new TaskError("RELAY_CLOSED", { details: { operation: "connect" } });
      if (connecting !== undefined) throw new TaskError("RELAY_BUSY", { details: { operation: "connect" } });
      bindingFence.abort(new TaskError("RELAY_RESET"));
      bindingFence = new AbortController();
      generation = nanoid();
      bound = undefined;
      features = undefined;
      status = "unbound";
      registeredName = callerSession;
      try {
        return await singleFlight(() => doConnect(signal));
      } catch (error) {
        if (!(error instanceof TaskError) || error.code !== "SESSION_PROTECTED" || session.status() === "closed") throw error;
        // Another registration holds the name (a stranger took it after a restart, and renews it):
        // bind under a name of our own instead of waiting for it forever. Peers find this session
        // by its signed mail and hellos, which still claim `callerSession` (src/core/reconnect.ts).
        registeredName = derivedName(callerSession, generation);
        return await singleFlight(() => doConnect(signal));
      }
    },
    async resolve(target, resolveOptions = {}) {
      const followSuccessor = resolveOptions.followSuccessor === true;
      if (followSuccessor) {
        await ensureBound("resolve", resolveOptions.signal);
        if (!session.features().has(FEATURE_SUCCESSOR)) {
          throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation: "resolve", feature: FEATURE_SUCCESSOR } });
        }
      }
      const value = replyOf(
        "resolve",
        await call("resolve", { target, ...(followSuccessor ? { followSuccessor: true } : {}) }, resolveOptions.signal),
        "INVALID_TARGET",
      );
      const endpoint = copyEndpoint(value.endpoint);
      if (sameEndpoint(endpoint, target)) return { endpoint };
      if (followSuccessor && value.successorOf !== undefined && sameEndpoint(value.successorOf, target))
        return { endpoint, successorOf: copyEndpoint(target) };
      throw malformed("INVALID_TARGET", "resolve", "resolved endpoint differs from the reference", { target, resolved: endpoint });
    },
    async send(envelope, signal) {
      const details = { envelopeId: envelope.envelopeId };
      const value = replyOf("send", await call("send", {}, signal, 0, envelope), "INVALID_ACCEPTANCE", details);
      if (value.envelopeId !== envelope.envelopeId)
        throw malformed("INVALID_ACCEPTANCE", "send", "the acceptance names another envelope", details);
      if (!isUuid(value.acceptanceId)) throw malformed("INVALID_ACCEPTANCE", "send", "acceptanceId is not a UUID", details);
      return { envelopeId: value.envelopeId, acceptanceId: value.acceptanceId, duplicate: value.duplicate, forwarding: value.forwarding };
    },
    async receive(cursor, receiveOptions = {}) {
      const limit = receiveOptions.limit ?? receivePageMaxItems;
      const value = await call("receive", { cursor, limit }, receiveOptions.signal);
      return validatePage(value, cursor, limit, bound?.endpoint);
    },
    async acknowledge(envelopeId, signal) {
      const value = replyOf("acknowledge", await call("acknowledge", { envelopeId }, signal), "INVALID_RESPONSE");
      if (value.kind !== "acknowledged") throw malformed("INVALID_RESPONSE", "acknowledge", "a batch answer to a single acknowledgement");
      return { duplicate: value.duplicate };
    },
    async acknowledgeBatch(envelopeIds, signal) {
      await ensureBound("acknowledge", signal);
      if (!session.features().has(FEATURE_ACK_BATCH))
        throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation: "acknowledge", feature: FEATURE_ACK_BATCH } });
      const value = replyOf("acknowledge", await call("acknowledge", { envelopeIds }, signal), "INVALID_RESPONSE");
      // The answer must name exactly the ids asked for, in order.
      if (
        value.kind !== "acknowledged-batch" ||
        value.results.length !== envelopeIds.length ||
        value.results.some((result, index) => result.envelopeId !== envelopeIds[index])
      ) {
        throw malformed("INVALID_RESPONSE", "acknowledge", "the batch answer does not name the ids asked for, in order");
      }
      return value.results;
    },
    async watch(cursor, waitMs, signal) {
      await ensureBound("watch", signal);
      if (!session.features().has(FEATURE_WATCH))
        throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation: "watch", feature: FEATURE_WATCH } });
      const value = replyOf("watch", await call("watch", { cursor, waitMs }, signal, waitMs), "INVALID_RESPONSE");
      return { pending: value.pending, highestCursor: value.highestCursor };
    },
    async health(signal) {
      return replyOf("health", await call("health", {}, signal), "INVALID_RESPONSE").store;
    },
    async disconnect(signal) {
      replyOf("disconnect", await call("disconnect", {}, signal), "INVALID_RESPONSE");
    },
    onRetire(listener) {
      retireListeners.add(listener);
      return () => retireListeners.delete(listener);
    },
    close() {
      if (status === "closed") return;
      status = "closed";
      secret = undefined;
      bindingFence.abort(new TaskError("RELAY_CLOSED"));
      transport.close();
    },
  };
  return session;
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
