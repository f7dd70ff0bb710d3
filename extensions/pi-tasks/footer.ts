/**
 * The footer status line (key `pi-tasks`): what matters most first — this session and its counts
 * (active work, questions and grant requests waiting, results to acknowledge, orphaned, …; what holds its commands under a
 * grant, when it works on one) — then, while a pass reports one, the failure after
 * them, never in place of the counts. A failure lasts exactly as long as the passes report it (each
 * pass replaces it; a pass without one clears it); its words, and the fix `/tasks` names beside the
 * same words, are failures.ts's.
 */
import { openQuestions } from "../../src/core/attention.ts";
import { openGrantRequests } from "../../src/core/grant-requests.ts";
import type { TaskView } from "../../src/core/task-core.ts";
import { awaitsAcknowledgement } from "./describe.ts";
import type { FooterFailure } from "./failures.ts";

export const STATUS_KEY = "pi-tasks";
export const STARTING_LABEL = "tasks: starting…";

/** `1 task`, `2 tasks`: a count with its word. */
export function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/** Mail rejected this lifetime (the trust gate's and intake's rejections). */
export function rejectedCount(rejections: Readonly<Record<string, number>>): number {
  return Object.values(rejections).reduce((sum, count) => sum + count, 0);
}

/** `tasks: <session> · 2 active · 1 running · 1 question waiting · 3 rejected` (or `· idle`); running and stuck count workers' reports. */
export function healthyLabel(session: string, tasks: readonly TaskView[], rejections: Readonly<Record<string, number>> = {}): string {
  return footerLabel(session, tasks, rejections, undefined);
}

/**
 * The footer: `tasks: <session> · <counts>`, then the failure's words when there is one — `idle`
 * only when nothing is active, nothing waits and nothing failed.
 */
export function footerLabel(
  session: string,
  tasks: readonly TaskView[],
  rejections: Readonly<Record<string, number>>,
  failure: FooterFailure | undefined,
  grantWord?: string,
): string {
  const { work, rejected } = countParts(tasks, rejections);
  const idle = work.length === 0 && failure === undefined ? ["idle"] : [];
  const words = failure === undefined ? [] : [failure.words];
  const grant = grantWord === undefined ? [] : [grantWord];
  return `tasks: ${[session, ...work, ...grant, ...idle, ...rejected, ...words].join(" · ")}`;
}

/**
 * The counts that matter, most important first: active work, what its workers do, lost workers,
 * questions waiting; then rejected mail.
 */
function countParts(tasks: readonly TaskView[], rejections: Readonly<Record<string, number>>): { work: string[]; rejected: string[] } {
  const active = tasks.filter((task) => task.status === "active").length;
  const questions = tasks.reduce((sum, task) => sum + openQuestions(task).length, 0);
  const asks = tasks.reduce((sum, task) => sum + openGrantRequests(task).length, 0);
  const rejected = rejectedCount(rejections);
  const orphaned = tasks.filter((task) => task.attention === "orphaned").length;
  const reconnecting = tasks.filter((task) => task.attention === "indeterminate" && task.status === "active").length;
  const reporting = (state: string) => tasks.filter((task) => task.status === "active" && task.activity?.state === state).length;
  const running = reporting("running");
  const stuck = reporting("stuck");
  const work: string[] = [];
  if (active > 0) work.push(`${active} active`);
  if (running > 0) work.push(`${running} running`);
  if (stuck > 0) work.push(`${stuck} stuck`);
  if (orphaned > 0) work.push(`${orphaned} orphaned`);
  if (reconnecting > 0) work.push(`${reconnecting} reconnecting`);
  if (questions > 0) work.push(`${plural(questions, "question")} waiting`);
  if (asks > 0) work.push(`${plural(asks, "grant request")} waiting`);
  // A finished task is not idle until its result is acknowledged (verified by the model or person).
  const results = tasks.filter(awaitsAcknowledgement).length;
  if (results > 0) work.push(`${plural(results, "result")} to acknowledge`);
  return { work, rejected: rejected > 0 ? [`${rejected} rejected`] : [] };
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
