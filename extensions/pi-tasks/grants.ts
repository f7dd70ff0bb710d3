/**
 * Grants in this Pi (src/protocol/grant.ts): the person's default grant for the tasks this session
 * sends (`PI_TASKS_GRANT`, JSON; the core narrows it further for a sub-delegation), and the check
 * of every model tool call against the grants of the tasks this session works on — fail-closed: a
 * call outside any of them is blocked with `PI_TASK_GRANT_DENIED` and the reason the model reads.
 * Without a task that carries a grant nothing is checked here (the worker gate still is).
 */
import type { TaskCore } from "../../src/core/task-core.ts";
import { ERROR_REGISTRY, TaskError } from "../../src/protocol/errors.ts";
import { toolVerdict } from "../../src/protocol/grant.ts";
import { Grant } from "../../src/protocol/schemas.ts";
import { assertValid } from "../../src/protocol/validate.ts";
import { toolPathOnDisk } from "../../src/workspace/tool-paths.ts";
import type { Env } from "../../src/relay-client/config.ts";
import { openWork } from "./work.ts";

export const GRANT_VARIABLE = "PI_TASKS_GRANT";

/** The person's default grant for tasks this session sends, or undefined; `INVALID_CONFIGURATION` when malformed. */
export function defaultGrant(env: Env): Grant | undefined {
  const text = env[GRANT_VARIABLE]?.trim();
  if (text === undefined || text === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new TaskError("INVALID_CONFIGURATION", { message: `${GRANT_VARIABLE} is not JSON`, details: { variable: GRANT_VARIABLE } });
  }
  try {
    return assertValid(Grant, value, { subject: GRANT_VARIABLE });
  } catch (error) {
    throw new TaskError("INVALID_CONFIGURATION", {
      message: `${GRANT_VARIABLE} is not a grant: ${error instanceof Error ? error.message : String(error)}`,
      details: { variable: GRANT_VARIABLE },
    });
  }
}

/** A block reason when a tool call is outside the grant of a task this session works on, else undefined. */
export function grantVerdict(
  core: TaskCore | undefined,
  toolName: string,
  input: unknown,
  cwd: string,
): { code: string; reason: string } | undefined {
  if (core === undefined) return undefined;
  for (const { taskId, grant } of openWork(core)) {
    if (grant === undefined) continue;
    // Paths as Pi's tools resolve them (`@`, `~`, `file://`), through symbolic links.
    const problem = toolVerdict(grant, toolName, input, cwd, toolPathOnDisk);
    if (problem !== undefined) {
      return {
        code: "PI_TASK_GRANT_DENIED",
        reason: `PI_TASK_GRANT_DENIED: ${ERROR_REGISTRY.PI_TASK_GRANT_DENIED.message} Task ${taskId}: ${problem}. If the task cannot be done without it, ask once with agent_task_request_grant.`,
      };
    }
  }
  return undefined;
}
