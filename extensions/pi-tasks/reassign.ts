/**
 * `/tasks reassign <task id> [<session name>]`: the person moves an orphaned task to another
 * worker — the named session's endpoint (looked up on the relay), or by default the lost worker's
 * restarted session of the same name.
 */
import type { TaskCore } from "../../src/core/task-core.ts";
import { sessionStatus } from "../../src/host/sessions.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import type { SessionInfo } from "./lifecycle.ts";
import { findTask, shortId } from "./short-ids.ts";

export interface ReassignDeps {
  readonly current: () => TaskCore;
  readonly run: <T>(operation: (core: TaskCore) => Promise<T>) => Promise<T>;
  readonly info: () => SessionInfo | undefined;
}

function usage(problem: string): TaskError {
  return new TaskError("CLI_USAGE", { message: `${problem} — usage: /tasks reassign <task id> [<worker session name>]` });
}

async function endpointOf(session: string, info: SessionInfo | undefined): Promise<TaskEndpoint> {
  if (info === undefined) throw new TaskError("TASKS_STARTING");
  const endpoint = (await sessionStatus(session, info.env, info.relay.url)).status.taskEndpoint;
  if (endpoint === undefined) throw usage(`no task endpoint is registered for session ${session}`);
  return { relay: endpoint.relay, id: endpoint.id };
}

export async function reassignCommand(words: readonly string[], deps: ReassignDeps): Promise<string[]> {
  const [prefix, session] = words;
  if (prefix === undefined || words.length > 2) throw usage("name the task");
  const found = findTask(deps.current().listTasks(), prefix);
  const to = session === undefined ? undefined : await endpointOf(session, deps.info());
  const moved = await deps.run((core) => core.reassignTask(found.taskId, to === undefined ? {} : { to }));
  return [
    `pi-tasks: task ${shortId(moved.taskId)} reassigned to ${session ?? "the restarted worker"} (${moved.target.relay}/${moved.target.id})${moved.historyTruncated ? "; its oldest history did not fit" : ""}`,
  ];
}
