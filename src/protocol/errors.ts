/**
 * The one error registry of pi-tasks.
 *
 * Every code the relay wire, the client, the core, the tools and the CLI can produce is listed
 * here with its status class, default message and explicit flags:
 * - `retryable`: the same request may succeed later (a per-throw `retryable` wins);
 * - `rebind`: the relay binding is unusable (the client retires it);
 * - `relayLoss`: the relay lost this endpoint's state: the configured core re-homes the lifetime on a fresh endpoint;
 * - `holdsSending`: a refusal about configuration (auth, profile, address policy), not about the
 *   envelope: sending holds with a bounded backoff until the user fixes it; nothing is quarantined.
 *   Any other non-retryable refusal of a send quarantines that envelope (`sendRefusal`);
 * - `httpStatus`: what our relay answers for a wire code.
 *
 * Messages shown to users always come from this table, never from server text.
 */

export interface ErrorSpec {
  /** Short status class used by the status line (`tasks: <class> (<CODE>) on <operation>`). */
  readonly class: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly rebind: boolean;
  readonly relayLoss: boolean;
  readonly holdsSending: boolean;
  /** HTTP status for codes the relay puts on the wire. */
  readonly httpStatus?: number;
}

type Flags = Partial<Pick<ErrorSpec, "retryable" | "rebind" | "relayLoss" | "holdsSending" | "httpStatus">>;

function spec(cls: string, message: string, flags: Flags = {}): ErrorSpec {
  return Object.freeze({
    class: cls,
    message,
    retryable: flags.retryable ?? false,
    rebind: flags.rebind ?? false,
    relayLoss: flags.relayLoss ?? false,
    holdsSending: flags.holdsSending ?? false,
    ...(flags.httpStatus === undefined ? {} : { httpStatus: flags.httpStatus }),
  });
}

export const ERROR_REGISTRY = Object.freeze({
  // -- relay wire codes (docs/wire.md, "Errors") -------------------------------------------------
  RELAY_CAPACITY: spec("capacity", "The relay is at capacity; try again later.", { retryable: true, httpStatus: 503 }),
  RELAY_UNAVAILABLE: spec("unavailable", "The relay is unavailable; the outcome is unknown.", { retryable: true, httpStatus: 503 }),
  PEER_UNREACHABLE: spec("unavailable", "The peer relay could not be reached; forwarding is pending or unknown.", {
    retryable: true,
    httpStatus: 503,
  }),
  RELAY_RESET: spec("reset", "The relay was reset (epoch changed or binding retired); accepted mail may be lost.", {
    rebind: true,
    relayLoss: true,
    httpStatus: 409,
  }),
  DELIVERY_UNCONFIRMED: spec("blocked", "Delivery could not be confirmed and will not be retried.", { httpStatus: 409 }),
  ENVELOPE_CONFLICT: spec("conflict", "An envelope with this id but different content already exists.", { httpStatus: 409 }),
  SOURCE_MISMATCH: spec("mismatch", "The endpoint or caller does not match the relay binding.", { rebind: true, httpStatus: 409 }),
  RELAY_PROFILE_REQUIRED: spec("profile", "A compatible volatile-v1 relay profile is required.", { holdsSending: true, httpStatus: 409 }),
  TARGET_NOT_REGISTERED: spec("not-registered", "The target endpoint is not registered on the relay.", { httpStatus: 404 }),
  CALLER_NOT_FOUND: spec("not-found", "The relay does not know this caller session.", { rebind: true, httpStatus: 404 }),
  CALLER_DEAD: spec("not-found", "The caller session is not alive.", { rebind: true, httpStatus: 410 }),
  REGISTRATION_EXPIRED: spec("expired", "This endpoint's registration expired, was disconnected or was superseded.", {
    rebind: true,
    httpStatus: 410,
  }),
  INVALID_REQUEST: spec("invalid", "The request is invalid.", { httpStatus: 400 }),
  INVALID_CURSOR: spec("invalid", "The cursor or limit is invalid.", { httpStatus: 400 }),
  CROSS_RELAY_ENDPOINT: spec("cross-relay", "The endpoint belongs to an unknown relay.", { httpStatus: 400 }),
  ENVELOPE_EXPIRED: spec("expired", "The envelope's createdAt is outside the accepted window.", { httpStatus: 400 }),
  PEER_POLICY_REQUIRED: spec("policy", "The client address is not allowed by the relay's peer policy.", {
    holdsSending: true,
    httpStatus: 403,
  }),
  INCOMPATIBLE_PROTOCOL: spec("profile", "The protocol version is not supported.", { holdsSending: true, httpStatus: 400 }),
  PAYLOAD_TOO_LARGE: spec("too-large", "The payload is larger than the relay allows.", { httpStatus: 413 }),
  STORE_UNAVAILABLE: spec("unavailable", "The relay store is unavailable.", { retryable: true, httpStatus: 503 }),
  INVARIANT_VIOLATED: spec("internal", "An internal invariant of the relay was violated (a bug); the relay answers RELAY_UNAVAILABLE."),
  RELAY_AUTH_REQUIRED: spec("auth", "Relay authentication is required (WOLFPACK_JWT_SECRET).", { holdsSending: true, httpStatus: 401 }),
  // binding-secret-v1 (our relay): a bound operation must carry the registration's secret.
  BINDING_SECRET_REQUIRED: spec("auth", "This endpoint's registration requires its binding secret, and the request carries none.", {
    rebind: true,
    httpStatus: 401,
  }),
  BINDING_SECRET_INVALID: spec("forbidden", "The request's binding secret is not this endpoint registration's.", {
    rebind: true,
    httpStatus: 403,
  }),
  SESSION_PROTECTED: spec(
    "forbidden",
    "A live registration holds this session name; only its holder may re-register it until its lease ends.",
    { retryable: true, httpStatus: 403 },
  ),
  // The Redis store (docs/multi-machine.md). Internal: no HTTP status, so a failing store call is
  // answered 503 RELAY_UNAVAILABLE; at start-up the relay exits with it.
  REDIS_UNAVAILABLE: spec("unavailable", "The relay's Redis store cannot be reached or did not answer in time.", { retryable: true }),
  REDIS_PERSISTENT: spec(
    "config",
    "The Redis store persists to disk (save or appendonly), or its configuration cannot be read; a volatile-v1 relay is memory-only, so it refuses unless started with --allow-persistent-store.",
  ),
  REDIS_CLIENT_MISSING: spec(
    "config",
    "The Redis store needs the @redis/client package, which this program does not have: npm install @redis/client (the pi-tasks command has it built in).",
  ),
  REDIS_EVICTS: spec(
    "config",
    "The Redis store may evict keys (maxmemory-policy is not noeviction); an evicted key would corrupt mailboxes and budgets, so the relay refuses it.",
  ),
  REDIS_LAYOUT: spec(
    "config",
    "The Redis store holds relay state written in another layout (another version of the relay); the relay refuses to read it. Upgrade every relay sharing it together: stop them, restart Redis empty (it keeps nothing on disk) or delete its {pi-tasks} keys, then start them.",
  ),

  // -- client codes ---------------------------------------------------------------------------
  RELAY_REBIND_REQUIRED: spec("reset", "The relay binding was retired; a fresh endpoint must be bound.", { relayLoss: true }),
  RELAY_TIMEOUT: spec("timeout", "The relay request passed its deadline; it may have been delivered.", { retryable: true }),
  RELAY_BUSY: spec("busy", "Another connect or rebind is running.", { retryable: true }),
  ABORTED: spec("aborted", "The operation was aborted before it completed.", { retryable: true }),
  INVALID_RESPONSE: spec("malformed", "The relay sent a malformed or oversized response.", { retryable: true }),
  RELAY_CLOSED: spec("closed", "The relay session is closed."),
  INVALID_CONNECTION: spec("malformed", "The relay's connect reply is invalid."),
  INVALID_ACCEPTANCE: spec("malformed", "The relay's send reply is not a confirmed acceptance; a resend of the same envelope is safe.", {
    retryable: true,
  }),
  INVALID_INBOX: spec("malformed", "The relay's receive page is invalid."),
  INVALID_TARGET: spec("invalid", "The target endpoint is invalid."),
  INVALID_RELAY_METADATA: spec("invalid", "The envelope metadata is invalid.", {}),
  INVALID_ENDPOINT_REFERENCE: spec("invalid", "An endpoint reference in the payload does not match the envelope."),
  RELAY_SESSION_REQUIRED: spec("config", "No relay session name: set WOLFPACK_SESSION_NAME or pass callerSession."),
  INVALID_CONFIGURATION: spec("config", "The pi-tasks configuration is invalid.", { holdsSending: true }),

  // -- core and tool codes --------------------------------------------------------------------
  TASK_ERROR: spec("error", "An unexpected task error occurred."),
  UNKNOWN_TASK: spec("not-found", "No such task in this endpoint's current lifetime."),
  INVALID_WORKFLOW: spec("invalid", "The workflow is invalid."),
  UNKNOWN_WORKFLOW: spec("not-found", "No such workflow in this Pi."),
  NOT_A_QUESTION: spec("invalid", "The id names a task, not a question waiting for you."),
  TASK_ID_AMBIGUOUS: spec(
    "invalid",
    "The short task id names more than one task this session knows; give more of the id (the candidates are named); nothing was done.",
  ),
  INVALID_TASK: spec("invalid", "The task is invalid."),
  INVALID_DELIVERY: spec("invalid", "The relay delivery is invalid."),
  INVALID_INTENT: spec("invalid", "The intent is invalid."),
  INVALID_ENVELOPE: spec("invalid", "The envelope is invalid."),
  INVALID_ASSIGNMENT: spec("invalid", "The assignment is invalid."),
  INVALID_EVENT: spec("invalid", "The task event is invalid."),
  INVALID_PAYLOAD: spec("invalid", "The payload is invalid."),
  UNKNOWN_EVENT: spec("invalid", "The task event type is unknown."),
  INVALID_INBOX_EVENT: spec("invalid", "The inbox event is invalid."),
  UNAUTHORIZED_INTENT: spec("forbidden", "The intent does not come from the task's target."),
  NOT_ORIGIN: spec("forbidden", "Only the task's origin may do this."),
  NOT_PARTICIPANT: spec("forbidden", "Only a participant of the task may do this."),
  TASK_NOT_TERMINAL: spec("state", "The task is not terminal yet."),
  TASK_TERMINAL: spec("state", "The task is already terminal."),
  TERMINAL_INTENT_CONFLICT: spec("conflict", "A different terminal outcome was already submitted for this task."),
  TASK_CAPACITY: spec("capacity", "This endpoint's task memory is full (records or bytes)."),
  TASK_DELIVERY_DEFERRED: spec(
    "deferred",
    "Delivery is deferred — it waits for its target to prove its key, for its peer after a relay restart, behind older mail to the same target, for relay capacity, or for a relay unreachable moments ago (details.cause says which); the envelope is kept and a later pass sends it.",
    { retryable: true },
  ),
  STALE_GENERATION: spec("rejected", "The mail belongs to an older generation of the task (its executor was replaced); it is refused."),
  DELEGATION_DEPTH_EXCEEDED: spec(
    "refused",
    "Delegating onward would make the chain longer than the depth cap (3 sessions by default); nothing was created.",
  ),
  DELEGATION_AMBIGUOUS: spec(
    "refused",
    "This session works on several tasks, so a new task has no single parent: finish or hand back all but one of them first (agent_task_done), then delegate; nothing was created.",
  ),
  FANOUT_LIMIT: spec(
    "refused",
    "This session already holds as many active tasks as it may (the fan-out cap): wait for one to end, or cancel one, then delegate; nothing was created.",
  ),
  SPAWN_LIMIT: spec(
    "refused",
    "This Pi already runs as many spawned workers as it may: send work to one of them, or stop one with agent_task_stop first; nothing was started.",
  ),
  DELEGATION_CYCLE: spec("refused", "The target is already in this task's delegation chain (A→B→A); nothing was created."),
  WORKTREE_UNAVAILABLE: spec(
    "invalid",
    "The worker cannot have a worktree of its own (the project is not a git repository with a commit, or git failed, or the person's uncommitted work could not be carried over); nothing was started. Spawn with worktree: false to let it work in the project itself.",
  ),
  WORKSPACE_TOO_LARGE: spec(
    "refused",
    "The project outside git is too large for a worker's scratch copy (maxScratchCopyBytes, maxScratchCopyEntries); nothing was started. Spawn with worktree: false, or make it a git repository.",
  ),
  INVALID_PROFILE: spec(
    "invalid",
    "The worker profile is unknown or cannot be read (agent_task_workers lists the profiles and their problems).",
  ),
  REVISION_REFUSED: spec(
    "refused",
    "The task cannot be sent back for revision: only a completed, not yet acknowledged task of this origin, at most maxRevisionRounds times.",
  ),
  GRANT_REQUEST_REFUSED: spec(
    "refused",
    "No grant request was made or decided: a worker asks once per active task and only for what its grant lacks; a decision names an open request of a task this session assigned.",
  ),
  INVALID_RESULT_PATH: spec(
    "invalid",
    "A path of the result (result.changedFiles, a file it carries, or a file its patch touches) is absolute, leaves the project, lies inside .git, is a symbolic link a patch would make, or is both a file and a directory; nothing was reported or applied.",
  ),
  RESULT_TOO_LARGE: spec("refused", "The result's file content is larger than maxResultContentBytes; it was not attached."),
  RESULT_CONTENT_INVALID: spec("invalid", "The result's content is malformed or does not match its hash; nothing was applied."),
  NO_RESULT_CONTENT: spec("invalid", "The task has no completed result carrying file content to apply."),
  APPLY_CONFLICT: spec(
    "refused",
    "The result's content does not apply cleanly to this checkout (the conflicts are listed); nothing was changed.",
  ),
  APPLY_FAILED: spec("error", "Writing the result's files failed midway (the cause is given); what was written was taken back."),
  RESUME_LIMIT: spec(
    "refused",
    "The session history names more delegated tasks than one resume takes back (maxResumeTasks); nothing was resumed.",
  ),
  REASSIGNMENT_REFUSED: spec("refused", "The task cannot be reassigned: its target is not known to be lost."),
  TASK_WAIT_TIMEOUT: spec("timeout", "The wait ended before the task reached a terminal status.", { retryable: true }),
  PERSISTENCE_UNSUPPORTED: spec("config", "pi-tasks keeps task state in RAM only; persistence options are not supported."),
  INVALID_TRANSACTION: spec("invalid", "A store transaction must be synchronous and not nested across commits."),
  TASKS_STARTING: spec("starting", "pi-tasks is still starting (finding or starting its relay); try again in a moment.", {
    retryable: true,
  }),
  SEAL_INVALID: spec("rejected", "The sealed envelope cannot be opened: it is not for this identity, or it was altered."),
  UNSEALED_EVENT: spec(
    "rejected",
    "Task mail arrived in the clear; pi-tasks seals every task event to its recipient (an older pi-tasks, or a forgery).",
  ),
  PAIRING_NOT_CONFIRMED: spec("usage", "Pairing was not confirmed by a person; nothing changed."),
  RELAY_NOT_STARTED: spec(
    "relay",
    "pi-tasks could not start its relay; see the relay log, or set PI_TASKS_RUNTIME to a node (>= 22.19) or bun that can run it.",
  ),
  RELAY_STOPPED: spec(
    "relay",
    "The person stopped pi-tasks' relay (/tasks relay stop); no Pi starts it again until /tasks relay start, or a new Pi session.",
  ),
  TASKS_NOT_RUNNING: spec("stopped", "pi-tasks is not running in this Pi session (it was shut down)."),
  PI_TASK_WORKER_ASSIGNMENT_REQUIRED: spec("gate", "This worker's tools are locked until an assignment arrives."),
  PI_TASK_SANDBOX_UNAVAILABLE: spec(
    "gate",
    "This task's grant needs an OS sandbox for commands (bubblewrap on Linux) and none can be made here; the command did not run.",
  ),
  PI_TASK_GRANT_DENIED: spec("gate", "This call is outside the grant of the task this session works on: the origin did not allow it."),
  BUDGET_EXHAUSTED: spec("refused", "The task's budget (turns, cost or time) granted by its origin ran out; the task ended failed."),
  PI_TASK_WORKER_COORDINATION_FORBIDDEN: spec("gate", "A task worker may not send, cancel or acknowledge tasks."),

  // -- trust gate: a received event that fails a check is rejected, counted and ACKed ---------
  SIGNATURE_INVALID: spec("rejected", "The event's signature does not verify (forged or altered on the way)."),
  NOT_ADDRESSED: spec("rejected", "The event is signed for another endpoint or task."),
  NOT_AUTHORIZED: spec("rejected", "The signer may not send this kind of event for this task."),
  STALE_EVENT: spec("rejected", "The event was signed more than 24 hours ago or more than 60 seconds in the future."),
  REPLAYED_EVENT: spec("rejected", "The event was already received in another envelope (a replay)."),
  UNSIGNED_EVENT: spec(
    "rejected",
    "The event is unsigned (an older pi-tasks); set PI_TASKS_TRUST=unsigned to accept such peers as unverified.",
  ),
  UNKNOWN_PEER: spec(
    "rejected",
    "The signer is neither this identity nor a paired peer (a person pairs with `/tasks pair NAME KEY` in Pi, or `pi-tasks peers add NAME KEY`).",
  ),
  ASSIGNMENT_REFUSED: spec(
    "refused",
    "The worker refused the assignment: it does not trust this identity (pair both sides with `pi-tasks peers add`).",
  ),
  PAIRING_PENDING: spec("pending", "The signer is unknown; the local human has not yet decided whether to pair with it.", {
    retryable: true,
  }),
  // -- identity and peers ---------------------------------------------------------------------
  IDENTITY_INVALID: spec("config", "The identity file is unreadable or invalid (identity.json in PI_TASKS_HOME)."),
  INVALID_PEER_KEY: spec("invalid", "Not an Ed25519 public key (expected ed25519:<base64url of 32 bytes>)."),
  INVALID_PEER_NAME: spec("invalid", "A peer name is 1–64 characters of letters, digits, '.', '_' or '-'."),
  PEER_CONFLICT: spec("conflict", "This peer name or key is already paired differently; remove it first."),
  PEER_NOT_FOUND: spec("not-found", "No peer of that name."),
  PEERS_BUSY: spec("busy", "Another process is changing peers.json; try again.", { retryable: true }),
  PEERS_INVALID: spec("config", "peers.json is unreadable or invalid."),
  PEERS_FULL: spec("capacity", "peers.json holds the most peers allowed; remove one first."),
  // -- files of PI_TASKS_HOME and the Redis password (docs/security.md, "Files") ----------------
  HOME_INVALID: spec(
    "config",
    "The pi-tasks home directory (PI_TASKS_HOME) must be a directory of this user's alone (mode 0700); fix it with chmod 700, or use a home of your own.",
  ),
  REDIS_PASSWORD_IN_URL: spec(
    "usage",
    "A password in the --store URL is visible to every user of the machine (ps); put it in a file named by PI_TASKS_REDIS_PASSWORD_FILE (mode 0600) or in PI_TASKS_REDIS_PASSWORD instead.",
  ),
  REDIS_PASSWORD_FILE_INVALID: spec(
    "config",
    "The file PI_TASKS_REDIS_PASSWORD_FILE names must be a regular file of this user's, mode 0600, holding the Redis password.",
  ),

  // -- CLI codes ------------------------------------------------------------------------------
  TASK_WORKER_PREFLIGHT_FAILED: spec("preflight", "The worker could not be started: a preflight check failed."),
  TASK_WORKER_NOT_READY: spec("not-ready", "The worker did not register its endpoint in time."),
  SESSION_NOT_FOUND: spec("not-found", "No such session."),
  SESSION_NOT_OWNED: spec("forbidden", "This session was not spawned by this CLI."),
  CLI_USAGE: spec("usage", "Invalid command line."),

  // -- the relay secret (docs/security.md, "The relay secret") -----------------------
  // Neither flag: refused at start-up, nothing is created; the transport throws it retryable once
  // the relay proved itself before (the user's relay may answer there again).
  RELAY_NOT_PROVEN: spec(
    "relay",
    "What answers at the relay's address cannot prove it holds this user's relay secret (another user's process, or a program on the port); pi-tasks sends it nothing.",
  ),
  // Not a stranger: something holds the port but did not answer in time (a busy machine); the
  // lifetime keeps challenging it and uses it once it proves the secret.
  RELAY_NOT_VOLATILE: spec(
    "profile",
    "What answers at the relay URL is not a volatile-v1 relay (a Wolfpack with only its older v2 task relay, or another server); pi-tasks keeps trying it in case it changes. Run your relay beside it (the default when the URL is the default one) or set PI_TASKS_RELAY_URL.",
  ),
  RELAY_NOT_ANSWERING: spec(
    "timeout",
    "The relay did not answer pi-tasks' start-up probes in time (a busy machine, or a program on the port that does not answer); pi-tasks keeps trying and uses it once it proves it is yours.",
    { retryable: true },
  ),
  RELAY_SECRET_INVALID: spec(
    "config",
    "The relay secret file (or its directory) is unsafe or unreadable: it must be this user's own, not a symlink, the directory mode 0700 and the file 0600.",
  ),
  RELAY_RECORD_STALE: spec(
    "relay",
    "The record of the relay pi-tasks started names a process that did not prove it is that relay; nothing was signalled and the stale record was removed.",
  ),
} satisfies Record<string, ErrorSpec>);

export type RegisteredErrorCode = keyof typeof ERROR_REGISTRY;
/** A code is any string: a newer relay may send codes this build does not know. */
export type ErrorCode = RegisteredErrorCode | (string & {});

const UNREGISTERED: ErrorSpec = spec("error", "An unrecognised error occurred.");

export function isRegisteredCode(code: string): code is RegisteredErrorCode {
  return Object.hasOwn(ERROR_REGISTRY, code);
}

/** The registry row of a code; unregistered codes get class `error` and no flags. */
export function errorSpec(code: string): ErrorSpec {
  return isRegisteredCode(code) ? ERROR_REGISTRY[code] : UNREGISTERED;
}

export interface TaskErrorOptions {
  /** Overrides the registry message (use for local, non-server text only). */
  readonly message?: string;
  /** Overrides the registry flag for this one throw. */
  readonly retryable?: boolean;
  readonly details?: Record<string, unknown>;
  readonly cause?: unknown;
}

/** The one error class of pi-tasks: a stable `code`, explicit `retryable`, structured `details`. */
export class TaskError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, options: TaskErrorOptions = {}) {
    const row = errorSpec(code);
    super(options.message ?? (isRegisteredCode(code) ? row.message : `${row.message} (${code})`), {
      cause: options.cause,
    });
    this.name = "TaskError";
    this.code = code;
    this.retryable = options.retryable ?? row.retryable;
    this.details = Object.freeze({ ...(options.details ?? {}) });
  }

  get spec(): ErrorSpec {
    return errorSpec(this.code);
  }

  /** A copy with more details (the code, message and retryable stay). */
  withDetails(details: Record<string, unknown>): TaskError {
    return new TaskError(this.code, {
      message: this.message,
      retryable: this.retryable,
      details: { ...this.details, ...details },
      cause: this.cause,
    });
  }

  toJSON(): ErrorShape {
    return { code: this.code, message: this.message, retryable: this.retryable, details: { ...this.details } };
  }
}

export interface ErrorShape {
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly details: Record<string, unknown>;
}

export function isTaskError(value: unknown): value is TaskError {
  return value instanceof TaskError;
}

/** Any thrown value as a TaskError; foreign errors become non-retryable `TASK_ERROR`. */
export function toTaskError(value: unknown): TaskError {
  if (value instanceof TaskError) return value;
  const message = value instanceof Error ? value.message : String(value);
  return new TaskError("TASK_ERROR", { details: { cause: message }, cause: value });
}

// ---------------------------------------------------------------------------------------------
// What a refused send means for its envelope
// ---------------------------------------------------------------------------------------------

/**
 * - `loss`: the relay lost this endpoint's state (the configured core re-homes the lifetime);
 * - `hold`: a configuration refusal: hold all sending (bounded backoff), quarantine nothing;
 * - `retry`: transient: the envelope stays pending and is resent byte-identical later;
 * - `quarantine`: a definitive refusal of this envelope (any other non-retryable code, also one
 *   this build does not know): never resent, it blocks nothing.
 */
export function sendRefusal(error: TaskError): "loss" | "hold" | "retry" | "quarantine" {
  const row = error.spec;
  if (row.relayLoss) return "loss";
  if (row.holdsSending) return "hold";
  return error.retryable ? "retry" : "quarantine";
}

// ---------------------------------------------------------------------------------------------
// Why a delivery waits
// ---------------------------------------------------------------------------------------------

/**
 * What a deferred delivery (`TASK_DELIVERY_DEFERRED`, its `details.cause`) waits for — so the
 * person and the model can tell a healthy wait from a fault:
 * - `proof`: its target has yet to prove the key its task expects (a new worker, or a peer at a new
 *   endpoint after a relay restart); it was asked, and the mail leaves once it answers;
 * - `reconnect`: after a relay restart the task looks for its peer's new endpoint;
 * - `order`: older mail to the same target goes first (per-target order);
 * - `capacity`: the relay (or the target's mailbox) is full; retried after a cooldown;
 * - `outage`: the relay did not answer moments ago; sent with the first pass that reaches it;
 * - `hold`: the relay refused this session's configuration; all sending waits a bounded backoff;
 * - `rebind`: this session got a new endpoint while it waited; re-addressed and sent again;
 * - `budget`: this pass ran out of its time or send budget; the next pass sends it.
 */
export const DEFERRAL_CAUSES = ["proof", "reconnect", "order", "capacity", "outage", "hold", "rebind", "budget"] as const;
export type DeferralCause = (typeof DEFERRAL_CAUSES)[number];

/** A `TASK_DELIVERY_DEFERRED` that names what it waits for (`cause`) and how (`reason`, for logs). */
export function deferral(cause: DeferralCause, reason: string, details: Record<string, unknown> = {}): TaskError {
  return new TaskError("TASK_DELIVERY_DEFERRED", { details: { cause, reason, ...details } });
}

/** The cause a deferral's details name, when they name one this build knows. */
export function deferralCause(details: Readonly<Record<string, unknown>>): DeferralCause | undefined {
  const cause = details.cause;
  return typeof cause === "string" && (DEFERRAL_CAUSES as readonly string[]).includes(cause) ? (cause as DeferralCause) : undefined;
}
