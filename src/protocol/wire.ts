/**
 * The `volatile-v1` relay wire (relay-volatile-v1.md §1–3 and Part B): request schemas per
 * operation, response value shapes, and the error body. Shared by the relay server and client.
 */
import { type TSchema, Type } from "@sinclair/typebox";
import {
  leaseMaxMs,
  leaseMinMs,
  maxCursorDigits,
  maxProtocolVersionsItems,
  maxWireIdChars,
  minProtocolVersionsItems,
  minWireIdChars,
  RELAY_PROFILE,
  receivePageMaxItems,
  watchMaxWaitMs,
  watchMinWaitMs,
} from "./limits.ts";
import { TaskEndpoint } from "./schemas.ts";

const strict = { additionalProperties: false } as const;

export const CURSOR_PATTERN_SOURCE = `^(0|[1-9][0-9]{0,${maxCursorDigits - 1}})$`;
export const CURSOR_PATTERN = new RegExp(CURSOR_PATTERN_SOURCE);

export const WireString = Type.String({ minLength: minWireIdChars, maxLength: maxWireIdChars });

export const RELAY_OPERATIONS = ["connect", "resolve", "send", "receive", "acknowledge", "disconnect", "health", "watch"] as const;
export type RelayOperation = (typeof RELAY_OPERATIONS)[number];

/**
 * Operation-specific fields besides `operation`, `profile` and (for bound operations) the binding.
 *
 * What a schema cannot say the relay checks right after it, still before any binding check:
 * `epoch` is a UUID, `protocolVersions` includes 2, the `resolve` target id is a UUID
 * (`INVALID_REQUEST`), and `cursor` / `limit` are well formed (`INVALID_CURSOR`, so they are
 * `Unknown` here). A malformed binding `endpoint` is `SOURCE_MISMATCH`, a binding check (§1.3).
 */
const bindingFields = { epoch: Type.String(), callerSession: WireString, endpoint: Type.Unknown() };
const base = { operation: Type.String(), profile: Type.String() };
/** The `resolve` target `{relay, id}`; `id` must also be a UUID (§1.3). */
const ResolveTarget = Type.Object({ relay: Type.String(), id: Type.String() }, strict);

export const RELAY_REQUESTS = {
  connect: Type.Object(
    {
      ...base,
      callerSession: WireString,
      generation: WireString,
      protocolVersions: Type.Array(Type.Integer(), { minItems: minProtocolVersionsItems, maxItems: maxProtocolVersionsItems }),
      leaseMs: Type.Optional(Type.Integer({ minimum: leaseMinMs, maximum: leaseMaxMs })),
      epoch: Type.Optional(Type.String()),
    },
    strict,
  ),
  resolve: Type.Object({ ...base, ...bindingFields, target: ResolveTarget, followSuccessor: Type.Optional(Type.Boolean()) }, strict),
  // The envelope is checked by the send operation itself: malformed is SOURCE_MISMATCH (§1.3).
  send: Type.Object({ ...base, ...bindingFields, envelope: Type.Unknown() }, strict),
  receive: Type.Object({ ...base, ...bindingFields, cursor: Type.Unknown(), limit: Type.Optional(Type.Unknown()) }, strict),
  acknowledge: Type.Object({ ...base, ...bindingFields, envelopeId: WireString }, strict),
  disconnect: Type.Object({ ...base, ...bindingFields }, strict),
  health: Type.Object({ ...base, ...bindingFields }, strict),
  watch: Type.Object(
    { ...base, ...bindingFields, cursor: Type.Unknown(), waitMs: Type.Integer({ minimum: watchMinWaitMs, maximum: watchMaxWaitMs }) },
    strict,
  ),
} as const satisfies Record<RelayOperation, TSchema>;

/** Allowed top-level keys per operation (strict keys are checked before the profile). */
export const RELAY_REQUEST_KEYS: Readonly<Record<RelayOperation, ReadonlySet<string>>> = Object.fromEntries(
  RELAY_OPERATIONS.map((operation) => [operation, new Set(Object.keys(RELAY_REQUESTS[operation].properties))]),
) as never;

export function isRelayOperation(value: unknown): value is RelayOperation {
  return typeof value === "string" && (RELAY_OPERATIONS as readonly string[]).includes(value);
}

/** Limits of `receive.limit`. */
export const RECEIVE_LIMIT = { minimum: 1, maximum: receivePageMaxItems, default: receivePageMaxItems } as const;

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

export interface WireDelivery {
  readonly cursor: string;
  readonly envelope: unknown;
}

export type RelayValue =
  | { readonly kind: "connected"; readonly endpoint: TaskEndpoint; readonly leaseExpiresAt: string }
  | { readonly kind: "resolved"; readonly endpoint: TaskEndpoint; readonly successorOf?: TaskEndpoint }
  | {
      readonly kind: "accepted";
      readonly envelopeId: string;
      readonly acceptanceId: string;
      readonly duplicate: boolean;
      readonly forwarding: "local" | "forwarded";
    }
  | { readonly kind: "page"; readonly deliveries: readonly WireDelivery[]; readonly nextCursor: string; readonly hasMore: boolean }
  | { readonly kind: "acknowledged"; readonly duplicate: boolean }
  | { readonly kind: "disconnected" }
  | { readonly kind: "health"; readonly store: Readonly<Record<string, number | boolean>> }
  | { readonly kind: "watch"; readonly pending: boolean; readonly highestCursor: string };

export interface WireErrorBody {
  readonly ok: false;
  readonly profile: typeof RELAY_PROFILE;
  readonly epoch?: string;
  readonly error: {
    readonly code: string;
    readonly message: string;
    readonly retryable: boolean;
    readonly mayHaveBeenDelivered?: true;
    readonly retryAfterMs?: number;
  };
}

export interface ProfileBody {
  readonly ok: true;
  readonly profile: typeof RELAY_PROFILE;
  readonly epoch: string;
  readonly endpointPath: string;
  readonly federation: string;
  readonly features?: readonly string[];
}

/** Part B additions a relay may advertise in `features`. */
export const FEATURE_WATCH = "watch-v1";
export const FEATURE_SUCCESSOR = "successor-v1";

export interface SessionStatusBody {
  readonly session: string;
  readonly taskEndpoint: TaskEndpoint;
  readonly taskTransport: { readonly profile: typeof RELAY_PROFILE; readonly epoch: string; readonly endpoint: TaskEndpoint; readonly leaseExpiresAt: string };
}

/** Codes a relay may send without an epoch (relay-volatile-v1.md §4, client rules). */
export const EPOCHLESS_CODES: ReadonlySet<string> = new Set(["RELAY_CAPACITY", "RELAY_UNAVAILABLE", "INVALID_REQUEST", "PEER_POLICY_REQUIRED"]);
