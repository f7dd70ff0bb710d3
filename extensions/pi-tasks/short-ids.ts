/**
 * Short ids: the id prefixes people read (`shortIdChars` of a task or question id, on the board, in
 * notices, the widget) and the one way a typed id is found again — by the tools (tools/index.ts),
 * the worker gate and every `/tasks` command. A typed id is a full id, or a prefix of at least
 * `minIdPrefixChars` characters matching exactly one of the tasks (or questions) this lifetime
 * knows; a prefix matching several is refused with the candidates named (`TASK_ID_AMBIGUOUS`), and
 * one matching none is an unknown task. Nothing is ever guessed.
 */
import type { TaskView } from "../../src/core/task-core.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { minIdPrefixChars, shortIdChars } from "../../src/protocol/limits.ts";
import { oneLine } from "./quote.ts";

/** What every workflow id starts with (workflows.ts): it is told apart from a task id wherever one is typed. */
export const WORKFLOW_ID_PREFIX = "wf-";

/** Whether a typed id names a workflow rather than a task (left for the workflow runner to find). */
export const isWorkflowId = (id: string): boolean => id.startsWith(WORKFLOW_ID_PREFIX);

/** An id as people read it: its first `shortIdChars` characters, on one escaped line (peers choose ids). */
export function shortId(id: string): string {
  return oneLine(id.slice(0, shortIdChars));
}

/** What a typed id names among `items`: exactly one, none, or several (a prefix too short to tell). */
export type IdMatch<T> =
  | { readonly kind: "one"; readonly item: T }
  | { readonly kind: "none" }
  | { readonly kind: "many"; readonly items: readonly T[] };

/**
 * The items `wanted` names: the one whose id it is, else those whose id it prefixes — when it is at
 * least `minIdPrefixChars` long (a shorter string names nothing but its exact id).
 */
export function matchId<T>(items: readonly T[], idOf: (item: T) => string, wanted: string): IdMatch<T> {
  const exact = items.find((item) => idOf(item) === wanted);
  if (exact !== undefined) return { kind: "one", item: exact };
  if (wanted.length < minIdPrefixChars) return { kind: "none" };
  const matches = items.filter((item) => idOf(item).startsWith(wanted));
  if (matches.length === 0) return { kind: "none" };
  return matches.length === 1 ? { kind: "one", item: matches[0]! } : { kind: "many", items: matches };
}

/**
 * The candidates' ids as short as they can be while still telling them apart (at least
 * `shortIdChars`): two tasks sharing their first 8 characters are named by more of them.
 */
export function distinctShortIds(ids: readonly string[]): string[] {
  let length = shortIdChars;
  while (new Set(ids.map((id) => id.slice(0, length))).size < new Set(ids).size) length += 1;
  return ids.map((id) => oneLine(id.slice(0, length)));
}

/** A prefix that names several tasks: refused, naming each candidate by an id that tells it apart. */
export function ambiguousTaskId(wanted: string, taskIds: readonly string[]): TaskError {
  const candidates = distinctShortIds(taskIds);
  return new TaskError("TASK_ID_AMBIGUOUS", {
    message: `The short task id ${oneLine(wanted)} names ${taskIds.length} tasks (${candidates.join(", ")}); give more of the id. Nothing was done.`,
    details: { taskId: wanted, candidates },
  });
}

function unknownTask(wanted: string): TaskError {
  const short = wanted.length < minIdPrefixChars ? ` (a short id has at least ${minIdPrefixChars} characters)` : "";
  return new TaskError("UNKNOWN_TASK", {
    message: `no task ${oneLine(wanted)} in this session's current lifetime${short}`,
    details: { taskId: wanted },
  });
}

/** The task `wanted` names (full id or unique prefix); `UNKNOWN_TASK` or `TASK_ID_AMBIGUOUS` otherwise. */
export function findTask(tasks: readonly TaskView[], wanted: string): TaskView {
  const match = matchId(tasks, (task) => task.taskId, wanted);
  if (match.kind === "one") return match.item;
  if (match.kind === "many")
    throw ambiguousTaskId(
      wanted,
      match.items.map((task) => task.taskId),
    );
  throw unknownTask(wanted);
}

/**
 * The full id of the task `wanted` names, for tool input: a unique prefix becomes its task's id; a
 * full id, and anything naming no task, stay as given (the core then validates the input and answers
 * `UNKNOWN_TASK` itself); a prefix naming several is `TASK_ID_AMBIGUOUS`.
 */
export function resolveTaskId(taskIds: readonly string[], wanted: string): string {
  const match = matchId(taskIds, (id) => id, wanted);
  if (match.kind === "many") throw ambiguousTaskId(wanted, match.items);
  return match.kind === "one" ? match.item : wanted;
}
