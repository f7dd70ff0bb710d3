/**
 * `agent_task_spawn`: start a dedicated worker Pi (a task worker on this session's relay) and
 * return its `taskEndpoint`, ready for `agent_task_send`. Coordinators only: the worker gate
 * forbids it to workers. The worker runs the origin's model unless another is named
 * (extensions/pi-tasks/start-worker.ts: its model, workspace and the spawn cap).
 */
import { SpawnParams, TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { assertValid } from "../../../src/protocol/validate.ts";
import type { Workspace } from "../../../src/workspace/workspace.ts";
import { startWorker } from "../start-worker.ts";
import { lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

/** Where the worker works, in words (a line of the spawn's answer). */
function workspaceLine(own: Workspace): string[] {
  if (own.worktree !== undefined)
    return [
      `- worktree: ${own.worktree.path} on branch ${own.worktree.branch}, from your checkout as it is now (its result names what changed; agent_task_apply brings it over)`,
    ];
  if (own.scratch !== undefined)
    return [
      `- workspace: a scratch copy of ${own.scratch.source} at ${own.scratch.path} (your files change only when you apply its result with agent_task_apply)`,
    ];
  return ["- workspace: your project directory itself (worktree: false): its edits land in your files directly"];
}

export function spawnTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_spawn> {
  return {
    name: "agent_task_spawn",
    label: "Start worker",
    description:
      "Start a dedicated worker Pi session that takes tasks, and wait until it is registered. Returns its taskEndpoint {relay, id} for agent_task_send. The worker runs in projectDir (default: this session's directory) with your model unless you name another (provider/id) or a profile (agent_task_workers lists them: model, grant, instructions). It works in a workspace of its own (a git worktree of your checkout as it is, or a scratch copy outside git) unless worktree is false: its edits reach your files when you apply its result with agent_task_apply. It stops when this Pi exits unless keep is true.",
    promptSnippet: "agent_task_spawn: start a worker Pi and get its taskEndpoint",
    promptGuidelines: [
      "Use agent_task_spawn to start a worker when you need one, then send it work with agent_task_send using the taskEndpoint it returns; stop workers you spawned with agent_task_stop when their tasks are acknowledged.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_spawn,
    async execute(_id, params, _signal, _onUpdate, ctx) {
      const input = assertValid(SpawnParams, params, { subject: "agent_task_spawn" });
      const { worker, own, profile } = await startWorker(deps, input, ctx);
      return ok(
        lines(
          "## worker started",
          `- session: ${worker.session}`,
          `- taskEndpoint: ${JSON.stringify(worker.taskEndpoint)}`,
          `- projectDir: ${worker.projectDir}`,
          `- pid: ${worker.pid}`,
          `- log: ${worker.log}`,
          ...workspaceLine(own),
          ...(profile === undefined
            ? []
            : [`- profile: ${profile.name}${profile.grant === undefined ? "" : " (tasks sent to it carry its grant)"}`]),
          `- stops: ${worker.owner === undefined ? "only by agent_task_stop (kept: it outlives this Pi)" : "when this Pi exits"}`,
          "",
          `Send it work with agent_task_send, to = ${JSON.stringify(worker.taskEndpoint)}. Stop it with agent_task_stop {name: "${worker.session}"} when you are done with it.`,
        ),
        { ...worker },
      );
    },
  };
}
