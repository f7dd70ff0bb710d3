/**
 * The footer status line (key `pi-tasks`): counts when healthy, and a true label naming the fix
 * when not. A failure is never called "relay unavailable" unless the relay did not answer: a local
 * deferral, a rejected delivery, a full task memory and relay capacity each have their own words.
 */
import { openQuestions } from "../../src/core/attention.ts";
import type { PassReport } from "../../src/core/pass.ts";
import type { FailureKind } from "../../src/core/scope.ts";
import type { TaskView } from "../../src/core/task-core.ts";
import { type TaskError, toTaskError } from "../../src/protocol/errors.ts";

export const STATUS_KEY = "pi-tasks";
export const STARTING_LABEL = "tasks: starting…";

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/** Mail rejected this lifetime (the trust gate's and intake's rejections). */
export function rejectedCount(rejections: Readonly<Record<string, number>>): number {
  return Object.values(rejections).reduce((sum, count) => sum + count, 0);
}

/** `tasks: <session> · 2 active · 1 running · 1 question waiting · 3 rejected` (or `· idle`); running and stuck count workers' reports. */
export function healthyLabel(session: string, tasks: readonly TaskView[], rejections: Readonly<Record<string, number>> = {}): string {
  const active = tasks.filter((task) => task.status === "active").length;
  const questions = tasks.reduce((sum, task) => sum + openQuestions(task).length, 0);
  const rejected = rejectedCount(rejections);
  const orphaned = tasks.filter((task) => task.attention === "orphaned").length;
  const reconnecting = tasks.filter((task) => task.attention === "indeterminate" && task.status === "active").length;
  const reporting = (state: string) => tasks.filter((task) => task.status === "active" && task.activity?.state === state).length;
  const running = reporting("running");
  const stuck = reporting("stuck");
  const parts = [session];
  if (active > 0) parts.push(`${active} active`);
  if (running > 0) parts.push(`${running} running`);
  if (stuck > 0) parts.push(`${stuck} stuck`);
  if (orphaned > 0) parts.push(`${orphaned} orphaned`);
  if (reconnecting > 0) parts.push(`${reconnecting} reconnecting`);
  if (questions > 0) parts.push(`${plural(questions, "question")} waiting`);
  if (active === 0 && questions === 0) parts.push("idle");
  if (rejected > 0) parts.push(`${rejected} rejected`);
  return `tasks: ${parts.join(" · ")}`;
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

function reason(error: TaskError): string {
  const value = error.details.reason;
  return typeof value === "string" ? value : error.code;
}

/** Failures with their own label: no class, code and operation in front of it. */
const DEDICATED_LABELS: ReadonlySet<string> = new Set([
  "RELAY_AUTH_REQUIRED",
  "RELAY_PROFILE_REQUIRED",
  "INCOMPATIBLE_PROTOCOL",
  // Which relay this is, not how one operation went: the relay is not used at all.
  "RELAY_NOT_PROVEN",
  "RELAY_SECRET_INVALID",
  "RELAY_NOT_STARTED",
]);

/**
 * The footer's words for a failure. A failed relay operation reads `tasks: <class> (<CODE>) on
 * <operation>`, then the plain words of what happens and what to do; relay loss, a missing relay
 * profile, required authentication and a relay that is not used (not the user's, unsafe secret, not
 * started) keep their dedicated labels.
 */
export function errorWords(error: TaskError, kind: FailureKind | undefined, relayUrl: string | undefined): string {
  const words = plainWords(error, kind, relayUrl);
  const operation = error.details.operation;
  if (error.spec.relayLoss || DEDICATED_LABELS.has(error.code) || typeof operation !== "string") {
    return `tasks: ${words ?? `${error.spec.class} (${error.code})`}`;
  }
  const named = `${error.spec.class} (${error.code}) on ${operation}`;
  return `tasks: ${words === undefined ? named : `${named} — ${words}`}`;
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
    // The relay secret (docs/security.md, "The relay secret").
    case "RELAY_NOT_PROVEN":
      return `the relay${at} cannot prove it is yours, so it is not used — stop what holds that port, or set PI_TASKS_RELAY_URL (see /tasks)`;
    case "RELAY_SECRET_INVALID":
      return `${error.message}`;
    case "RELAY_UNAVAILABLE":
    case "RELAY_TIMEOUT":
      return `relay unreachable${at}; retrying`;
    case "RELAY_CAPACITY":
      return "the relay is at capacity; retrying";
    case "TASK_CAPACITY":
      return "task memory is full; finish or acknowledge tasks";
    case "TASK_DELIVERY_DEFERRED":
      return `delivery deferred (${reason(error)}); retrying`;
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
  if (kind === "send" || kind === "fanout" || kind === "receipt" || kind === "retry") {
    return `a message could not be delivered (${error.code}) — see /tasks`;
  }
  return undefined;
}

function isReport(value: unknown): value is PassReport {
  return typeof value === "object" && value !== null && "failures" in value && (value as PassReport).failures instanceof Map;
}

/** Codes that say the relay did not answer. */
const UNREACHABLE_CODES: ReadonlySet<string> = new Set(["RELAY_UNAVAILABLE", "RELAY_TIMEOUT"]);

/**
 * The label of a pass's most important failure, or of a thrown error; undefined when healthy.
 * `relayProblem` (why pi-tasks could not start the relay) replaces "unreachable": it names the fix.
 */
export function failureLabel(outcome: PassReport | unknown, relayUrl: string | undefined, relayProblem?: TaskError): string | undefined {
  if (outcome === undefined) return undefined;
  const words = (error: TaskError, kind: FailureKind | undefined) =>
    relayProblem !== undefined && UNREACHABLE_CODES.has(error.code)
      ? errorWords(relayProblem, kind, relayUrl)
      : errorWords(error, kind, relayUrl);
  if (!isReport(outcome)) return words(toTaskError(outcome), undefined);
  for (const kind of PRIORITY) {
    const failure = outcome.failures.get(kind);
    if (failure !== undefined) return words(failure, kind);
  }
  return undefined;
}

/** Where the footer label goes: the Pi context of the current session. */
export interface StatusTarget {
  setStatus(key: string, text: string | undefined): void;
}

export interface StatusLine {
  /** Writes to this context from now on (a new session), forgetting the last label. */
  bind(target: StatusTarget): void;
  /** Shows a label; an unchanged label is not written again. */
  show(label: string | undefined): void;
}

export function createStatusLine(): StatusLine {
  let target: StatusTarget | undefined;
  let last: string | undefined;
  return {
    bind(next) {
      target = next;
      last = undefined;
    },
    show(label) {
      if (last === label || target === undefined) return;
      last = label;
      const view = target;
      try {
        view.setStatus(STATUS_KEY, label);
      } catch {
        // A stale Pi context throws after reload or replacement; presentation simply stops.
      }
    },
  };
}
