/**
 * The relay engine: every `volatile-v1` operation over the registry and the mailboxes, with the
 * request checks in the spec's order after the body is parsed:
 * 1. strict keys (INVALID_REQUEST);
 * 2. profile (RELAY_PROFILE_REQUIRED);
 * 3. fields: the schema, then the rules it cannot say (INVALID_REQUEST; a malformed cursor or
 *    limit INVALID_CURSOR);
 * 4. binding (§1.3, in order): epoch → RELAY_RESET; endpoint malformed or not local →
 *    SOURCE_MISMATCH; caller → CALLER_NOT_FOUND; registration unknown or not active →
 *    REGISTRATION_EXPIRED; registration of another caller → SOURCE_MISMATCH. `connect` has no
 *    binding, only the epoch comparison;
 * 5. the operation (send's envelope checks among them).
 * It knows nothing of HTTP.
 */
import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { CanonicalText, canonicalJson, sha256Hex, utf8Bytes } from "../protocol/canonical-json.ts";
import { isUuid, sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError } from "../protocol/errors.ts";
import {
  envelopeMaxAgeMs,
  envelopeMaxFutureSkewMs,
  leaseDefaultMs,
  maxRelayPayloadBytes,
  RELAY_ENDPOINT_PATH,
  RELAY_ID,
  RELAY_PROFILE,
  WIRE_PROTOCOL_VERSION,
} from "../protocol/limits.ts";
import { type TaskEndpoint, WireEnvelope } from "../protocol/schemas.ts";
import { checkValue, isRecord, type ValueModule } from "../protocol/validate.ts";
import {
  FEATURE_SUCCESSOR,
  FEATURE_WATCH,
  type ProfileBody,
  RECEIVE_LIMIT,
  RELAY_REQUEST_KEYS,
  RELAY_REQUESTS,
  type RelayOperation,
  type RelayValue,
  type SessionStatusBody,
} from "../protocol/wire.ts";
import { type BudgetUsage, createBudgets } from "./admission.ts";
import { createDoorbell } from "./doorbell.ts";
import { createMailboxes, cursorValue, parseCursor } from "./mailbox.ts";
import { createRegistry, type Registration } from "./registry.ts";

export const RELAY_FEATURES = [FEATURE_WATCH, FEATURE_SUCCESSOR] as const;
const SUPPORTED_PROTOCOL_VERSION = WIRE_PROTOCOL_VERSION;

/** A success the HTTP layer serialises; `rawValueJson` is spliced in as is (receive pages). */
export type EngineResult = { readonly value: RelayValue } | { readonly rawValueJson: string };

export interface EngineContext {
  readonly signal?: AbortSignal;
  /** Called before a watch starts waiting, so a parked watch holds no admission slot. */
  readonly releaseSlot?: () => void;
}

export interface RelayEngine {
  readonly epoch: string;
  handle(operation: RelayOperation, request: Record<string, unknown>, context?: EngineContext): Promise<EngineResult>;
  profile(): ProfileBody;
  sessionStatus(session: string): SessionStatusBody;
  sessionList(): SessionStatusBody[];
  maintain(): void;
  close(): void;
  usage(): BudgetUsage & { registrations: number; sessions: number; watching: number };
}

function compiled(schema: TSchema): ValueModule {
  const checker = TypeCompiler.Compile(schema);
  return { Check: (_schema, value) => checker.Check(value), Errors: (_schema, value) => checker.Errors(value) };
}

const REQUEST_CHECKERS = Object.fromEntries(
  Object.entries(RELAY_REQUESTS).map(([operation, schema]) => [operation, compiled(schema)]),
) as Record<RelayOperation, ValueModule>;
const ENVELOPE_CHECKER = compiled(WireEnvelope);

function invalid(path: string, problem: string): TaskError {
  return new TaskError("INVALID_REQUEST", { details: { path, problem } });
}

/** `receive.limit` (default `RECEIVE_LIMIT.default`); anything but an integer in range is `INVALID_CURSOR` (§1.3). */
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
      cursorValue(request.cursor);
      pageLimit(request.limit);
      return;
    case "watch":
      cursorValue(request.cursor);
      return;
    default:
      return;
  }
}

export function createRelayEngine(options: { now?: () => number } = {}): RelayEngine {
  const now = options.now ?? Date.now;
  const epoch = crypto.randomUUID();
  const registry = createRegistry();
  const doorbell = createDoorbell();
  const budgets = createBudgets();
  const mailboxes = createMailboxes(budgets, (endpointId) => doorbell.ring(endpointId));

  function checkRequest(operation: RelayOperation, request: Record<string, unknown>): void {
    const allowed = RELAY_REQUEST_KEYS[operation];
    for (const key of Object.keys(request)) if (!allowed.has(key)) throw invalid(`/${key}`, "unexpected property");
    if (request.profile !== RELAY_PROFILE) throw new TaskError("RELAY_PROFILE_REQUIRED", { details: { profile: String(request.profile) } });
    const result = checkValue(RELAY_REQUESTS[operation], request, { values: REQUEST_CHECKERS[operation] });
    if (!result.ok) throw result.error;
    checkFields(operation, request);
  }

  /** A (well-formed) epoch other than this relay's is RELAY_RESET. */
  function checkEpoch(value: unknown): void {
    if (value !== epoch) throw new TaskError("RELAY_RESET", { details: { epoch, mayHaveBeenDelivered: true } });
  }

  /**
   * The binding checks of every operation but connect, in the order of §1.3; returns the caller's
   * live registration. The registration must be active before its owner is compared, so another
   * caller's ended (or an unknown) endpoint is REGISTRATION_EXPIRED, a live one SOURCE_MISMATCH.
   */
  function bind(request: Record<string, unknown>): Registration {
    checkEpoch(request.epoch);
    const endpoint = request.endpoint;
    if (!isRecord(endpoint) || endpoint.relay !== RELAY_ID || !isUuid(endpoint.id) || Object.keys(endpoint).length !== 2) {
      throw new TaskError("SOURCE_MISMATCH", { details: { reason: "endpoint is malformed or not local" } });
    }
    const session = request.callerSession as string;
    if (registry.current(session) === undefined) throw new TaskError("CALLER_NOT_FOUND", { details: { callerSession: session } });
    const registration = registry.get(endpoint.id);
    if (registration === undefined) throw new TaskError("REGISTRATION_EXPIRED", { details: { reason: "endpoint is not registered" } });
    if (!registry.isLive(registration, now())) throw new TaskError("REGISTRATION_EXPIRED", { details: { state: registration.state } });
    if (registration.session !== session) throw new TaskError("SOURCE_MISMATCH", { details: { reason: "endpoint is not this caller's" } });
    return registration;
  }

  function liveTarget(target: TaskEndpoint): Registration | undefined {
    if (target.relay !== RELAY_ID) throw new TaskError("CROSS_RELAY_ENDPOINT", { details: { relay: target.relay } });
    const registration = registry.get(target.id);
    return registration !== undefined && registry.isLive(registration, now()) ? registration : undefined;
  }

  async function send(owner: Registration, envelope: unknown): Promise<RelayValue> {
    if (isRecord(envelope) && envelope.protocolVersion !== SUPPORTED_PROTOCOL_VERSION) {
      throw invalid("/envelope/protocolVersion", `must be ${SUPPORTED_PROTOCOL_VERSION}`);
    }
    const shape = checkValue(WireEnvelope, envelope, { values: ENVELOPE_CHECKER, pathPrefix: "/envelope", code: "SOURCE_MISMATCH" });
    if (!shape.ok) throw shape.error;
    const wire = shape.value;
    const createdAt = Date.parse(wire.createdAt);
    if (Number.isNaN(createdAt)) throw new TaskError("SOURCE_MISMATCH", { details: { path: "/envelope/createdAt", problem: "not a date" } });
    if (!sameEndpoint(wire.source, registry.endpointOf(owner))) {
      throw new TaskError("SOURCE_MISMATCH", { details: { path: "/envelope/source", problem: "source is not the bound endpoint" } });
    }
    const payloadText = canonicalJson(wire.payload);
    if (utf8Bytes(payloadText) > maxRelayPayloadBytes) {
      throw invalid("/envelope/payload", `canonical payload is larger than ${maxRelayPayloadBytes} bytes`);
    }
    const text = canonicalJson({ ...wire, payload: new CanonicalText(payloadText) });
    const digest = await sha256Hex(text);
    // Everything below is synchronous: concurrent identical sends coalesce on the receipt.
    if (liveTarget(wire.target) === undefined) throw new TaskError("TARGET_NOT_REGISTERED", { details: { target: wire.target } });
    const duplicate = mailboxes.dedupe(wire.envelopeId, digest);
    if (duplicate !== undefined) return { kind: "accepted", ...duplicate, forwarding: "local" };
    const at = now();
    if (createdAt > at + envelopeMaxFutureSkewMs || at >= createdAt + envelopeMaxAgeMs) {
      throw new TaskError("ENVELOPE_EXPIRED", { details: { createdAt: wire.createdAt } });
    }
    const accepted = mailboxes.admit({ target: wire.target, source: wire.source, envelopeId: wire.envelopeId, digest, text, now: at });
    return { kind: "accepted", ...accepted, forwarding: "local" };
  }

  function receive(owner: Registration, cursor: unknown, limit: unknown): EngineResult {
    const page = mailboxes.page(owner.endpointId, cursor as string, pageLimit(limit));
    return {
      rawValueJson: `{"kind":"page","deliveries":${page.itemsJson},"nextCursor":"${page.nextCursor}","hasMore":${page.hasMore}}`,
    };
  }

  async function watch(owner: Registration, cursor: unknown, waitMs: number, context: EngineContext): Promise<RelayValue> {
    const after = parseCursor(cursor, BigInt(mailboxes.highestCursor(owner.endpointId))).toString();
    if (!mailboxes.hasPendingAfter(owner.endpointId, after) && waitMs > 0) {
      context.releaseSlot?.();
      await doorbell.wait(owner.endpointId, waitMs, context.signal);
    }
    return { kind: "watch", pending: mailboxes.hasPendingAfter(owner.endpointId, after), highestCursor: mailboxes.highestCursor(owner.endpointId) };
  }

  function resolve(target: TaskEndpoint, followSuccessor: boolean): RelayValue {
    if (liveTarget(target) !== undefined) return { kind: "resolved", endpoint: { relay: RELAY_ID, id: target.id } };
    if (followSuccessor) {
      const successor = registry.successor(target.id, now());
      if (successor !== undefined) return { kind: "resolved", endpoint: registry.endpointOf(successor), successorOf: target };
    }
    throw new TaskError("TARGET_NOT_REGISTERED", { details: { target } });
  }

  function connect(request: Record<string, unknown>): RelayValue {
    // Runs before the registration is looked at (§1.3); the fields were checked already.
    if (request.epoch !== undefined) checkEpoch(request.epoch);
    const before = registry.current(request.callerSession as string);
    const registration = registry.connect({
      session: request.callerSession as string,
      generation: request.generation as string,
      leaseMs: (request.leaseMs as number | undefined) ?? leaseDefaultMs,
      now: now(),
    });
    if (before !== undefined && before.endpointId !== registration.endpointId) {
      // The old generation is retired: its mailbox can never be received again.
      mailboxes.drop(before.endpointId);
      doorbell.ring(before.endpointId);
    }
    return { kind: "connected", endpoint: registry.endpointOf(registration), leaseExpiresAt: new Date(registration.leaseExpiresAt).toISOString() };
  }

  function status(registration: Registration): SessionStatusBody {
    const endpoint = registry.endpointOf(registration);
    return {
      session: registration.session,
      taskEndpoint: endpoint,
      taskTransport: { profile: RELAY_PROFILE, epoch, endpoint, leaseExpiresAt: new Date(registration.leaseExpiresAt).toISOString() },
    };
  }

  function usage() {
    const counts = registry.counts();
    return { ...budgets.usage(), registrations: counts.registrations, sessions: counts.sessions, watching: doorbell.waiting() };
  }

  return {
    epoch,
    async handle(operation, request, context = {}) {
      checkRequest(operation, request);
      if (operation === "connect") return { value: connect(request) };
      const owner = bind(request);
      switch (operation) {
        case "resolve":
          return { value: resolve(request.target as TaskEndpoint, request.followSuccessor === true) };
        case "send":
          return { value: await send(owner, request.envelope) };
        case "receive":
          return receive(owner, request.cursor, request.limit);
        case "acknowledge":
          return { value: { kind: "acknowledged", ...mailboxes.acknowledge(owner.endpointId, request.envelopeId as string) } };
        case "disconnect":
          registry.disconnect(owner, now());
          doorbell.ring(owner.endpointId);
          return { value: { kind: "disconnected" } };
        case "health": {
          const counts = registry.counts();
          const used = budgets.usage();
          return {
            value: {
              kind: "health",
              store: {
                activeItems: used.activeItems,
                activeBytes: used.activeBytes,
                receipts: used.receipts,
                receiptBytes: used.receiptBytes,
                registrations: counts.registrations,
                sessions: counts.sessions,
                routes: 0,
                metadataBytes: counts.metadataBytes,
                expiryEntries: mailboxes.counts().expiryEntries,
                investigationEnabled: false,
                logDrops: 0,
              },
            },
          };
        }
        case "watch":
          return { value: await watch(owner, request.cursor, request.waitMs as number, context) };
      }
      throw invalid("/operation", "unknown operation");
    },
    profile: () => ({ ok: true, profile: RELAY_PROFILE, epoch, endpointPath: RELAY_ENDPOINT_PATH, federation: "disabled", features: [...RELAY_FEATURES] }),
    sessionStatus(session) {
      const registration = registry.current(session);
      if (registration === undefined || !registry.isLive(registration, now())) {
        throw new TaskError("CALLER_NOT_FOUND", { details: { session } });
      }
      return status(registration);
    },
    sessionList() {
      const at = now();
      return registry
        .sessions()
        .map((session) => registry.current(session))
        .filter((registration): registration is Registration => registration !== undefined && registry.isLive(registration, at))
        .map(status);
    },
    maintain() {
      const at = now();
      registry.reap(at, (endpointId) => mailboxes.pinsMail(endpointId));
      mailboxes.expireReceipts(at);
    },
    close() {
      doorbell.close();
    },
    usage,
  };
}
