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

/** `tasks: <session> · 2 active · 1 question waiting · 3 rejected` (or `· idle`). */
export function healthyLabel(session: string, tasks: readonly TaskView[], rejections: Readonly<Record<string, number>> = {}): string {
  const active = tasks.filter((task) => task.status === "active").length;
  const questions = tasks.reduce((sum, task) => sum + openQuestions(task).length, 0);
  const rejected = rejectedCount(rejections);
  const orphaned = tasks.filter((task) => task.attention === "orphaned").length;
  const reconnecting = tasks.filter((task) => task.attention === "indeterminate" && task.status === "active").length;
  const parts = [session];
  if (active > 0) parts.push(`${active} active`);
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

/** The label of one failure, in words that say what happened and, where there is one, the fix. */
export function errorWords(error: TaskError, kind: FailureKind | undefined, relayUrl: string | undefined): string {
  const at = relayUrl === undefined ? "" : ` at ${relayUrl}`;
  const row = error.spec;
  if (row.relayLoss) return "tasks: relay state lost; rebinding automatically";
  switch (error.code) {
    case "RELAY_AUTH_REQUIRED":
      return "tasks: the relay needs authentication — set WOLFPACK_JWT_SECRET";
    case "RELAY_PROFILE_REQUIRED":
    case "INCOMPATIBLE_PROTOCOL":
      return `tasks: no volatile-v1 relay${at} — check PI_TASKS_RELAY_URL or WOLFPACK_PORT`;
    case "PEER_POLICY_REQUIRED":
      return "tasks: the relay refuses this address — start it with --allow";
    case "INVALID_CONFIGURATION":
      return `tasks: invalid configuration — ${error.message}`;
    case "RELAY_NOT_STARTED":
      return `tasks: no relay — ${error.message}`;
    // The relay secret (docs/security.md, "The relay secret").
    case "RELAY_NOT_PROVEN":
      return `tasks: the relay${at} cannot prove it is yours, so it is not used — stop what holds that port, or set PI_TASKS_RELAY_URL (see /tasks)`;
    case "RELAY_SECRET_INVALID":
      return `tasks: ${error.message}`;
    case "RELAY_UNAVAILABLE":
    case "RELAY_TIMEOUT":
      return `tasks: relay unreachable${at}; retrying`;
    case "RELAY_CAPACITY":
      return "tasks: the relay is at capacity; retrying";
    case "TASK_CAPACITY":
      return "tasks: task memory is full; finish or acknowledge tasks";
    case "TASK_DELIVERY_DEFERRED":
      return `tasks: delivery deferred (${reason(error)}); retrying`;
    case "SESSION_PROTECTED":
      return "tasks: another process holds this session name on the relay; retrying when its lease ends";
    case "UNKNOWN_PEER":
      return "tasks: refused mail from an unpaired key — pair with /tasks pair (see /tasks)";
    case "UNSIGNED_EVENT":
      return "tasks: refused unsigned mail from an older pi-tasks (PI_TASKS_TRUST=unsigned accepts it) — see /tasks";
    case "PEERS_INVALID":
    case "IDENTITY_INVALID":
      return `tasks: ${error.message}`;
    case "INVALID_RESPONSE":
    case "INVALID_INBOX":
    case "INVALID_ACCEPTANCE":
    case "INVALID_CONNECTION":
      return `tasks: the relay sent a malformed reply (${error.code}); retrying`;
  }
  if (kind === "intake" && FORGERY_CODES.has(error.code)) return `tasks: rejected forged or replayed mail (${error.code}) — see /tasks`;
  if (kind === "intake") return `tasks: rejected an invalid delivery (${error.code}) — see /tasks`;
  if (kind === "send" || kind === "fanout" || kind === "receipt" || kind === "retry") {
    return `tasks: a message could not be delivered (${error.code}) — see /tasks`;
  }
  const operation = error.details.operation;
  return `tasks: ${row.class} (${error.code})${typeof operation === "string" ? ` on ${operation}` : ""}`;
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
