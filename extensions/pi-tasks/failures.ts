/**
 * What a pass's failure means, in the words a person reads: the footer's words after the counts
 * (footer.ts), and the same words on `/tasks` with the fix (`failureLines`). A failed relay
 * operation reads `<class> (<CODE>) on <operation>`, then the plain words of what happens; relay
 * loss, a missing relay profile, required authentication and a relay that is not used (not the
 * user's, unsafe secret, not started, not answering) keep their dedicated words. A failure is never
 * called "relay unreachable" unless the relay did not answer: a local deferral, a rejected delivery,
 * a full task memory and relay capacity each have their own words.
 */
import type { PassReport } from "../../src/core/pass.ts";
import type { FailureKind } from "../../src/core/scope.ts";
import { type DeferralCause, deferralCause, type TaskError, toTaskError } from "../../src/protocol/errors.ts";
import { waitWords } from "./describe.ts";

/** The failure a pass reported, as the footer shows it and `/tasks` explains it. */
export interface FooterFailure {
  /** The footer's words (after the counts), also `/tasks`'s. */
  readonly words: string;
  readonly code: string;
  readonly kind?: FailureKind;
  /** What to do about it (or that nothing needs doing), for `/tasks`. */
  readonly fix: string;
}

/** Trust-gate codes: mail that was forged, altered, misrouted, stale or replayed. */
const FORGERY_CODES: ReadonlySet<string> = new Set([
  "SIGNATURE_INVALID",
  "NOT_ADDRESSED",
  "NOT_AUTHORIZED",
  "STALE_EVENT",
  "REPLAYED_EVENT",
]);

/** Failure kinds in the order their label matters most. */
const PRIORITY: readonly FailureKind[] = [
  "lease",
  "intake",
  "send",
  "fanout",
  "receipt",
  "retry",
  "ack",
  "repair",
  "presentation",
  "deferral",
];

/** Kinds of a message this side sent. */
const SENDING: ReadonlySet<FailureKind | undefined> = new Set<FailureKind | undefined>(["send", "fanout", "receipt", "retry"]);

function reason(error: TaskError): string {
  const value = error.details.reason;
  return typeof value === "string" ? value : error.code;
}

/** Failures with their own words: no class, code and operation in front of them. */
const DEDICATED_LABELS: ReadonlySet<string> = new Set([
  "RELAY_AUTH_REQUIRED",
  "RELAY_PROFILE_REQUIRED",
  "INCOMPATIBLE_PROTOCOL",
  // Which relay this is, not how one operation went: the relay is not used (yet, or at all).
  "RELAY_NOT_PROVEN",
  "RELAY_NOT_ANSWERING",
  "RELAY_SECRET_INVALID",
  "RELAY_NOT_STARTED",
  "RELAY_STOPPED",
]);

/** The words of a failure, without the footer's `tasks: `. */
export function failureWords(error: TaskError, kind: FailureKind | undefined, relayUrl: string | undefined): string {
  const words = plainWords(error, kind, relayUrl);
  const operation = error.details.operation;
  if (error.spec.relayLoss || DEDICATED_LABELS.has(error.code) || typeof operation !== "string") {
    return words ?? `${error.spec.class} (${error.code})`;
  }
  const named = `${error.spec.class} (${error.code}) on ${operation}`;
  return words === undefined ? named : `${named} — ${words}`;
}

/** A failure's words as a footer of their own (`tasks: …`): before this session's name is known. */
export function errorWords(error: TaskError, kind: FailureKind | undefined, relayUrl: string | undefined): string {
  return `tasks: ${failureWords(error, kind, relayUrl)}`;
}

/** What happened and, where there is one, the fix; undefined when there is nothing to add to the code. */
function plainWords(error: TaskError, kind: FailureKind | undefined, relayUrl: string | undefined): string | undefined {
  const at = relayUrl === undefined ? "" : ` at ${relayUrl}`;
  if (error.spec.relayLoss) return "relay state lost; rebinding automatically";
  switch (error.code) {
    case "RELAY_AUTH_REQUIRED":
      return "the relay needs authentication — set WOLFPACK_JWT_SECRET";
    case "RELAY_PROFILE_REQUIRED":
    case "INCOMPATIBLE_PROTOCOL":
      return `no volatile-v1 relay${at} — check PI_TASKS_RELAY_URL or WOLFPACK_PORT`;
    case "PEER_POLICY_REQUIRED":
      return "the relay refuses this address — start it with --allow";
    case "INVALID_CONFIGURATION":
      return `invalid configuration — ${error.message}`;
    case "RELAY_NOT_STARTED":
      return `no relay — ${error.message}`;
    case "RELAY_STOPPED":
      return `${error.message} — /tasks relay start starts it again`;
    // The relay secret (docs/security.md, "The relay secret").
    case "RELAY_NOT_PROVEN":
      return `the relay${at} cannot prove it is yours, so it is not used — stop what holds that port, or set PI_TASKS_RELAY_URL (see /tasks)`;
    case "RELAY_NOT_ANSWERING":
      return `the relay${at} did not answer in time; retrying until it answers and proves it is yours (see /tasks)`;
    case "RELAY_SECRET_INVALID":
      return `${error.message}`;
    case "RELAY_NOT_VOLATILE":
      return error.message;
    case "RELAY_UNAVAILABLE":
    case "RELAY_TIMEOUT":
      return `relay unreachable${at}; retrying`;
    case "RELAY_CAPACITY":
      return "the relay is at capacity; retrying";
    case "TASK_CAPACITY":
      return "task memory is full; finish or acknowledge tasks";
    case "TASK_DELIVERY_DEFERRED": {
      const cause = deferralCause(error.details);
      return cause === undefined ? `delivery deferred (${reason(error)}); retrying` : `a message waits: ${waitWords(cause)}`;
    }
    case "SESSION_PROTECTED":
      return "another process holds this session name on the relay; retrying when its lease ends";
    case "UNKNOWN_PEER":
      return "refused mail from an unpaired key — pair with /tasks pair (see /tasks)";
    case "UNSIGNED_EVENT":
      return "refused unsigned mail from an older pi-tasks (PI_TASKS_TRUST=unsigned accepts it) — see /tasks";
    case "PEERS_INVALID":
    case "IDENTITY_INVALID":
      return `${error.message}`;
    case "INVALID_RESPONSE":
    case "INVALID_INBOX":
    case "INVALID_ACCEPTANCE":
    case "INVALID_CONNECTION":
      return `the relay sent a malformed reply (${error.code}); retrying`;
  }
  if (kind === "intake" && FORGERY_CODES.has(error.code)) return `rejected forged or replayed mail (${error.code}) — see /tasks`;
  if (kind === "intake") return `rejected an invalid delivery (${error.code}) — see /tasks`;
  if (SENDING.has(kind) && error.code === "TARGET_NOT_REGISTERED") return "its recipient is no longer on the relay — see /tasks";
  if (SENDING.has(kind)) return `a message could not be delivered (${error.code}) — see /tasks`;
  return undefined;
}

/** What `/tasks` says to do about a failure (the footer's words say what happened). */
export function failureFix(error: TaskError, kind: FailureKind | undefined): string {
  switch (error.code) {
    case "RELAY_NOT_PROVEN":
    case "RELAY_NOT_ANSWERING":
    case "RELAY_NOT_STARTED":
    case "RELAY_SECRET_INVALID":
    case "RELAY_NOT_VOLATILE":
      return "the relay line above says what is wrong with the relay and how to fix it";
    case "RELAY_STOPPED":
      return "nothing is lost: /tasks relay start starts the relay again (in any of your Pis), and every Pi's tasks go on from there";
    case "RELAY_UNAVAILABLE":
    case "RELAY_TIMEOUT":
      return "nothing is lost: pi-tasks retries by itself; a relay pi-tasks started that went away is started again by the first of your Pis to notice (/tasks relay shows it)";
    case "TARGET_NOT_REGISTERED":
      return "the session that message was for is no longer registered on the relay (its Pi is gone); nothing more is sent to that endpoint. Its task below says so: reassign it (/tasks reassign <task id>) or cancel it";
    case "UNKNOWN_PEER":
      return "if you trust that key, compare fingerprints with its owner, then /tasks pair <name> <key>; until then its mail is refused";
    case "UNSIGNED_EVENT":
      return "set PI_TASKS_TRUST=unsigned to accept older pi-tasks peers as unverified";
    case "TASK_CAPACITY":
      return "acknowledge finished tasks (agent_task_ack) or cancel ones you no longer need";
  }
  if (kind === "intake")
    return "the mail was rejected and never shown to the model (counted under rejected mail); nothing to do unless it keeps coming";
  return "pi-tasks retries by itself; this line clears once a pass no longer reports it";
}

function isReport(value: unknown): value is PassReport {
  return typeof value === "object" && value !== null && "failures" in value && (value as PassReport).failures instanceof Map;
}

/**
 * Codes that say the relay did not answer, or did not answer as a volatile-v1 relay: the start-up's
 * own finding, when it has one, says it better (what answers there, and the fix).
 */
const UNREACHABLE_CODES: ReadonlySet<string> = new Set([
  "RELAY_UNAVAILABLE",
  "RELAY_TIMEOUT",
  "RELAY_PROFILE_REQUIRED",
  "INCOMPATIBLE_PROTOCOL",
  "INVALID_RESPONSE",
]);

/**
 * A pass's most important failure, or a thrown error's; undefined when healthy. `relayProblem` (why
 * the relay is not used: pi-tasks could not start it, it did not answer at start-up) replaces
 * "unreachable": it names the fix.
 */
export function passFailure(
  outcome: PassReport | unknown,
  relayUrl: string | undefined,
  relayProblem?: TaskError,
): FooterFailure | undefined {
  if (outcome === undefined) return undefined;
  const described = (raw: TaskError, kind: FailureKind | undefined): FooterFailure => {
    const error = relayProblem !== undefined && UNREACHABLE_CODES.has(raw.code) ? relayProblem : raw;
    return {
      words: failureWords(error, kind, relayUrl),
      code: error.code,
      ...(kind === undefined ? {} : { kind }),
      fix: failureFix(error, kind),
    };
  };
  if (!isReport(outcome)) return described(toTaskError(outcome), undefined);
  for (const kind of PRIORITY) {
    const failure = outcome.failures.get(kind);
    if (failure !== undefined && !healthyWait(failure)) return described(failure, kind);
  }
  return undefined;
}

/**
 * Waits that are how things work, not faults — for a peer's proof, for a peer after a relay
 * restart, behind older mail, for the next pass, for a new endpoint: no failure on the footer
 * (`/tasks <id>` lists what a task's mail waits for). Capacity, an outage or a hold are faults.
 */
const HEALTHY_WAITS: ReadonlySet<DeferralCause> = new Set<DeferralCause>(["proof", "reconnect", "order", "budget", "rebind"]);

function healthyWait(error: TaskError): boolean {
  const cause = error.code === "TASK_DELIVERY_DEFERRED" ? deferralCause(error.details) : undefined;
  return cause !== undefined && HEALTHY_WAITS.has(cause);
}

/** The footer label of a failure alone (`tasks: …`): a start-up that found no session to count for. */
export function failureLabel(outcome: PassReport | unknown, relayUrl: string | undefined, relayProblem?: TaskError): string | undefined {
  const failure = passFailure(outcome, relayUrl, relayProblem);
  return failure === undefined ? undefined : `tasks: ${failure.words}`;
}

/** `/tasks`'s lines for the failure the footer shows now: the same words, then the fix. */
export function failureLines(failure: FooterFailure | undefined): string[] {
  if (failure === undefined) return [];
  return [`problem (on the footer): ${failure.words}`, `  fix: ${failure.fix}`];
}
