/**
 * The relay session: one endpoint binding of one lifetime on a `volatile-v1` relay.
 *
 * - `connect` registers with a per-lifetime generation; the lease is renewed before an operation
 *   when less than (request deadline + 10 s) remains; renewals keep the endpoint id.
 * - Any reply carrying a different epoch, or a reset-set code (`RELAY_RESET`,
 *   `REGISTRATION_EXPIRED`, `SOURCE_MISMATCH`, `CALLER_DEAD`, `CALLER_NOT_FOUND`), retires the
 *   binding: in-flight calls are aborted and fail with `RELAY_RESET`; later calls fail with
 *   `RELAY_REBIND_REQUIRED` without a network call until `rebind()` binds a fresh endpoint.
 * - Replies are validated per operation (`INVALID_CONNECTION`, `INVALID_ACCEPTANCE`,
 *   `INVALID_INBOX`, `INVALID_TARGET`, `INVALID_RESPONSE`). Features come from the profile and are
 *   used only when advertised.
 */
import { nanoid } from "nanoid";
import { isUuid, sameEndpoint } from "../protocol/endpoint.ts";
import { errorSpec, TaskError } from "../protocol/errors.ts";
import { leaseDefaultMs, leaseRenewMarginMs, RELAY_PROFILE, receivePageMaxItems, WIRE_PROTOCOL_VERSION } from "../protocol/limits.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import { isRecord } from "../protocol/validate.ts";
import { CURSOR_PATTERN, FEATURE_SUCCESSOR, FEATURE_WATCH, type RelayOperation } from "../protocol/wire.ts";
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

export interface Acceptance {
  readonly envelopeId: string;
  readonly acceptanceId: string;
  readonly duplicate: boolean;
  readonly forwarding: "local" | "forwarded";
}

export interface Delivery {
  readonly cursor: string;
  readonly envelopeId: string;
  readonly envelope: Record<string, unknown>;
}

export interface Page {
  readonly deliveries: readonly Delivery[];
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
  /** Part B features the relay advertised (empty for a plain Wolfpack relay). */
  features(): ReadonlySet<string>;
  connect(signal?: AbortSignal): Promise<Binding>;
  /** The current binding, connecting first or renewing the lease when it is due (joins a running connect). */
  lease(signal?: AbortSignal): Promise<Binding>;
  rebind(signal?: AbortSignal): Promise<Binding>;
  resolve(target: TaskEndpoint, options?: { followSuccessor?: boolean; signal?: AbortSignal }): Promise<Resolution>;
  send(envelope: Record<string, unknown>, signal?: AbortSignal): Promise<Acceptance>;
  receive(cursor: string, options?: { limit?: number; signal?: AbortSignal }): Promise<Page>;
  acknowledge(envelopeId: string, signal?: AbortSignal): Promise<{ duplicate: boolean }>;
  watch(cursor: string, waitMs: number, signal?: AbortSignal): Promise<WatchResult>;
  health(signal?: AbortSignal): Promise<Record<string, unknown>>;
  disconnect(signal?: AbortSignal): Promise<void>;
  /** Called once per retired binding with the `RELAY_RESET` it raised. */
  onRetire(listener: (error: TaskError) => void): () => void;
  close(): void;
}

function isEndpoint(value: unknown): value is TaskEndpoint {
  return isRecord(value) && typeof value.relay === "string" && value.relay.length > 0 && typeof value.id === "string" && value.id.length > 0;
}

function malformed(code: string, operation: RelayOperation, problem: string, details: Record<string, unknown> = {}): TaskError {
  return new TaskError(code, { details: { operation, problem, ...details } });
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
  const retireListeners = new Set<(error: TaskError) => void>();

  let status: SessionStatus = "unbound";
  // An opaque per-lifetime generation (the wire allows any 1–512 characters).
  let generation: string = nanoid();
  let bound: Binding | undefined;
  let features: ReadonlySet<string> | undefined;
  /** Aborted when the binding is retired or the session closes: fences in-flight calls. */
  let scope = new AbortController();
  let connecting: Promise<Binding> | undefined;

  function checkUsable(operation: RelayOperation): void {
    if (status === "closed") throw new TaskError("RELAY_CLOSED", { details: { operation } });
    if (status === "reset") throw new TaskError("RELAY_REBIND_REQUIRED", { details: { operation } });
  }

  function retire(operation: RelayOperation, cause: Record<string, unknown>): TaskError {
    const error = new TaskError("RELAY_RESET", {
      details: { operation, mayHaveBeenDelivered: true, ...(bound === undefined ? {} : { priorEndpoint: bound.endpoint, boundEpoch: bound.epoch }), ...cause },
    });
    if (status === "ready" || status === "unbound") {
      status = "reset";
      scope.abort(error);
      for (const listener of [...retireListeners]) listener(error);
    }
    return error;
  }

  /** Turns failures into binding retirement when they say the binding is gone. */
  function judge(error: unknown, operation: RelayOperation, callScope: AbortController, expectedEpoch: string | undefined): unknown {
    if (callScope.signal.aborted) {
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

  async function call(operation: RelayOperation, fields: Record<string, unknown>, signal: AbortSignal | undefined, extraDeadlineMs = 0): Promise<Record<string, unknown>> {
    const binding = await ensureBound(operation, signal);
    const callScope = scope;
    const body = {
      operation,
      profile: RELAY_PROFILE,
      epoch: binding.epoch,
      callerSession,
      endpoint: binding.endpoint,
      ...fields,
    };
    let reply: SuccessReply;
    try {
      reply = await transport.post(operation, body, {
        signal: signal === undefined ? callScope.signal : AbortSignal.any([signal, callScope.signal]),
        extraDeadlineMs,
      });
    } catch (error) {
      throw judge(error, operation, callScope, binding.epoch);
    }
    if (callScope !== scope || status !== "ready") throw new TaskError("RELAY_RESET", { details: { operation, mayHaveBeenDelivered: true } });
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
    const callScope = scope;
    const startedAt = now();
    if (features === undefined) features = await loadFeatures(signal);
    const body = {
      operation: "connect",
      profile: RELAY_PROFILE,
      callerSession,
      generation,
      protocolVersions: [WIRE_PROTOCOL_VERSION],
      leaseMs,
      ...(previous === undefined ? {} : { epoch: previous.epoch }),
    };
    let reply: SuccessReply;
    try {
      reply = await transport.post("connect", body, { signal: signal === undefined ? callScope.signal : AbortSignal.any([signal, callScope.signal]) });
    } catch (error) {
      throw judge(error, operation, callScope, previous?.epoch);
    }
    if (callScope !== scope || status === "reset" || status === "closed") throw new TaskError("RELAY_RESET", { details: { operation } });
    const value = reply.value;
    const expires = typeof value.leaseExpiresAt === "string" ? Date.parse(value.leaseExpiresAt) : Number.NaN;
    if (value.kind !== "connected" || !isEndpoint(value.endpoint) || !isUuid(value.endpoint.id) || Number.isNaN(expires)) {
      throw malformed("INVALID_CONNECTION", operation, "connect reply is not {kind:connected, endpoint, leaseExpiresAt}");
    }
    if (previous !== undefined && (reply.epoch !== previous.epoch || !sameEndpoint(previous.endpoint, value.endpoint))) {
      throw retire(operation, { epoch: reply.epoch, renewedEndpoint: value.endpoint });
    }
    bound = {
      epoch: reply.epoch,
      endpoint: { relay: value.endpoint.relay, id: value.endpoint.id },
      generation,
      callerSession,
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
      scope.abort(new TaskError("RELAY_RESET"));
      scope = new AbortController();
      generation = nanoid();
      bound = undefined;
      features = undefined;
      status = "unbound";
      return singleFlight(() => doConnect(signal));
    },
    async resolve(target, resolveOptions = {}) {
      const followSuccessor = resolveOptions.followSuccessor === true;
      if (followSuccessor) {
        await ensureBound("resolve", resolveOptions.signal);
        if (!session.features().has(FEATURE_SUCCESSOR)) {
          throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation: "resolve", feature: FEATURE_SUCCESSOR } });
        }
      }
      const value = await call("resolve", { target, ...(followSuccessor ? { followSuccessor: true } : {}) }, resolveOptions.signal);
      if (value.kind !== "resolved" || !isEndpoint(value.endpoint)) throw malformed("INVALID_TARGET", "resolve", "reply is not {kind:resolved, endpoint}");
      const endpoint = { relay: value.endpoint.relay, id: value.endpoint.id };
      if (sameEndpoint(endpoint, target)) return { endpoint };
      if (followSuccessor && isEndpoint(value.successorOf) && sameEndpoint(value.successorOf, target)) {
        return { endpoint, successorOf: { relay: target.relay, id: target.id } };
      }
      throw malformed("INVALID_TARGET", "resolve", "resolved endpoint differs from the reference", { target, resolved: endpoint });
    },
    async send(envelope, signal) {
      const value = await call("send", { envelope }, signal);
      const forwarding = value.forwarding;
      if (
        value.kind !== "accepted" ||
        value.envelopeId !== envelope.envelopeId ||
        !isUuid(value.acceptanceId) ||
        typeof value.duplicate !== "boolean" ||
        (forwarding !== "local" && forwarding !== "forwarded")
      ) {
        throw malformed("INVALID_ACCEPTANCE", "send", "reply is not a confirmed acceptance of this envelope", { envelopeId: envelope.envelopeId });
      }
      return { envelopeId: value.envelopeId as string, acceptanceId: value.acceptanceId, duplicate: value.duplicate, forwarding };
    },
    async receive(cursor, receiveOptions = {}) {
      const limit = receiveOptions.limit ?? receivePageMaxItems;
      const value = await call("receive", { cursor, limit }, receiveOptions.signal);
      return validatePage(value, cursor, limit, bound?.endpoint);
    },
    async acknowledge(envelopeId, signal) {
      const value = await call("acknowledge", { envelopeId }, signal);
      if (value.kind !== "acknowledged" || typeof value.duplicate !== "boolean") {
        throw malformed("INVALID_RESPONSE", "acknowledge", "reply is not {kind:acknowledged, duplicate}");
      }
      return { duplicate: value.duplicate };
    },
    async watch(cursor, waitMs, signal) {
      await ensureBound("watch", signal);
      if (!session.features().has(FEATURE_WATCH)) throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation: "watch", feature: FEATURE_WATCH } });
      const value = await call("watch", { cursor, waitMs }, signal, waitMs);
      if (value.kind !== "watch" || typeof value.pending !== "boolean" || typeof value.highestCursor !== "string" || !CURSOR_PATTERN.test(value.highestCursor)) {
        throw malformed("INVALID_RESPONSE", "watch", "reply is not {kind:watch, pending, highestCursor}");
      }
      return { pending: value.pending, highestCursor: value.highestCursor };
    },
    async health(signal) {
      const value = await call("health", {}, signal);
      if (value.kind !== "health" || !isRecord(value.store)) throw malformed("INVALID_RESPONSE", "health", "reply is not {kind:health, store}");
      return value.store;
    },
    async disconnect(signal) {
      const value = await call("disconnect", {}, signal);
      if (value.kind !== "disconnected") throw malformed("INVALID_RESPONSE", "disconnect", "reply is not {kind:disconnected}");
    },
    onRetire(listener) {
      retireListeners.add(listener);
      return () => retireListeners.delete(listener);
    },
    close() {
      if (status === "closed") return;
      status = "closed";
      scope.abort(new TaskError("RELAY_CLOSED"));
      transport.close();
    },
  };
  return session;
}

/** Validates a receive page; a bad page is `INVALID_INBOX` and must not move any checkpoint. */
export function validatePage(value: Record<string, unknown>, cursor: string, limit: number, me: TaskEndpoint | undefined): Page {
  const fail = (problem: string) => malformed("INVALID_INBOX", "receive", problem, { cursor });
  if (value.kind !== "page" || !Array.isArray(value.deliveries) || typeof value.hasMore !== "boolean" || typeof value.nextCursor !== "string") {
    throw fail("reply is not {kind:page, deliveries, nextCursor, hasMore}");
  }
  if (value.deliveries.length > limit) throw fail(`page has more than ${limit} deliveries`);
  if (!CURSOR_PATTERN.test(value.nextCursor)) throw fail("nextCursor is not a cursor");
  let previous = BigInt(cursor);
  const seen = new Set<string>();
  const deliveries: Delivery[] = [];
  for (const item of value.deliveries) {
    if (!isRecord(item) || typeof item.cursor !== "string" || !CURSOR_PATTERN.test(item.cursor) || !isRecord(item.envelope)) {
      throw fail("delivery is not {cursor, envelope}");
    }
    const position = BigInt(item.cursor);
    if (position <= previous) throw fail("cursors are not ascending after the requested cursor");
    previous = position;
    const envelopeId = item.envelope.envelopeId;
    if (typeof envelopeId !== "string" || envelopeId.length === 0) throw fail("delivery has no envelopeId");
    if (seen.has(envelopeId)) throw fail("duplicate envelopeId in one page");
    seen.add(envelopeId);
    if (me !== undefined && !(isEndpoint(item.envelope.target) && sameEndpoint(item.envelope.target, me))) {
      throw fail("delivery is addressed to another endpoint");
    }
    deliveries.push({ cursor: item.cursor, envelopeId, envelope: item.envelope });
  }
  const expectedNext = deliveries.at(-1)?.cursor ?? cursor;
  if (value.nextCursor !== expectedNext) throw fail("nextCursor is not the last delivered cursor");
  if (value.hasMore && deliveries.length === 0) throw fail("hasMore on an empty page");
  return { deliveries, nextCursor: value.nextCursor, hasMore: value.hasMore };
}
