/**
 * The names of pi-tasks that are not bounds: the wire's profile and versions, its paths and
 * headers, the domains that separate signatures and seals, and the default address of a relay.
 *
 * Bounds (counts, sizes, durations) live in src/protocol/limits.ts; these are fixed words and
 * defaults that every side must spell the same way. docs/wire.md lists the paths and headers.
 */

/** The relay profile this package speaks. */
export const RELAY_PROFILE = "volatile-v1" as const;
/** The relay id of a local Wolfpack-compatible endpoint. */
export const RELAY_ID = "wolfpack-pi-tasks-v2" as const;
/** Wire `protocolVersion` of a relay envelope. */
export const WIRE_PROTOCOL_VERSION = 2 as const;
/** Task-layer protocol version stored in every task record. */
export const TASK_PROTOCOL_VERSION = "pi-tasks/v2" as const;
/** Relay endpoint path. */
export const RELAY_ENDPOINT_PATH = "/api/task-relay/volatile-v1" as const;
/** Relay profile discovery path. */
export const RELAY_PROFILE_PATH = "/api/task-relay/profile" as const;
/** Session-control status path (docs/wire.md, "Our additions"). */
export const SESSION_STATUS_PATH = "/api/session-control/status" as const;
/** Session-control list path (live registrations; Wolfpack exposes the same route). */
export const SESSION_LIST_PATH = "/api/session-control/list" as const;
/** Default relay port when neither `PI_TASKS_RELAY_URL` nor `WOLFPACK_PORT` is set. */
export const DEFAULT_RELAY_PORT = 18790;
/** Default listen address of `pi-tasks relay` (its port: DEFAULT_RELAY_PORT). */
export const DEFAULT_RELAY_HOST = "127.0.0.1" as const;
/** Domain separation prefix of every signed task event (followed by a NUL byte). */
export const SIGNATURE_DOMAIN = "pi-tasks-v1" as const;
/** Domain separation of the seal keys: derived from an identity's key, bound to it by a signature, and their shared keys. */
export const SEAL_DOMAIN = "pi-tasks-seal-v1" as const;
/** Between a session name and the suffix of the name it binds under when its own is held by another registration. */
export const DERIVED_NAME_SEPARATOR = "~";
/** Port of a `redis://` or `rediss://` store URL that names none (Redis's own default). */
export const DEFAULT_REDIS_PORT = 6379;
/** The relay-secret headers and the instance route of our relay (docs/wire.md, "Our additions"). */
export const RELAY_CHALLENGE_HEADER = "x-pi-tasks-challenge" as const;
export const RELAY_CHALLENGE_PROOF_HEADER = "x-pi-tasks-relay-proof" as const;
export const RELAY_REPLY_PROOF_HEADER = "x-pi-tasks-reply-proof" as const;
export const RELAY_INSTANCE_PATH = "/api/pi-tasks/relay-instance" as const;
