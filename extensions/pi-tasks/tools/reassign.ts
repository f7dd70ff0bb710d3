/**
 * `agent_task_reassign`: the origin moves an orphaned task to another worker (`to`), or by default to
 * the lost worker's restarted session (src/core/reassign.ts); nothing of it reaches the new worker
 * before that worker proves its key.
 */
import { ReassignParams, TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { assertValid } from "../../../src/protocol/validate.ts";
import {
  awaitProof,
  lines,
  ok,
  PROOF_PENDING,
  reportedNotSent,
  RELAY_ACCEPTANCE_ONLY,
  type TaskToolDefinition,
  type ToolDeps,
} from "./shared.ts";

export function reassignTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_reassign> {
  return {
    name: "agent_task_reassign",
    label: "Reassign task",
    description:
      "Move an orphaned task (its worker is gone) to another worker: `to` (a taskEndpoint from agent_task_spawn or agent_task_workers), or by default the lost worker's restarted session of the same name. The task keeps its history; mail from the old worker is refused from then on. Nothing of the task reaches the new worker before it proves the key the task expects.",
    promptSnippet: "agent_task_reassign: move an orphaned task to another worker",
    promptGuidelines: [
      "Use agent_task_reassign when a '## task orphaned' event says a task's worker is gone: spawn or pick a worker first and pass its taskEndpoint as `to`, or omit `to` when the same worker session was restarted.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_reassign,
    async execute(_id, params, signal) {
      const input = assertValid(ReassignParams, params, { subject: "agent_task_reassign" });
      const moved = await deps.run((core) =>
        core.reassignTask(input.taskId, { signal, ...(input.to === undefined ? {} : { to: input.to }) }),
      );
      const delivery = moved.delivery === "accepted" ? "accepted" : await awaitProof(deps, moved.taskId, signal);
      deps.requestRefresh();
      if (typeof delivery !== "string") return await reportedNotSent(deps, delivery);
      return ok(
        lines(
          "## task reassigned",
          `- taskId: ${moved.taskId}`,
          `- previousTarget: ${moved.previousTarget.relay}/${moved.previousTarget.id}`,
          `- target: ${moved.target.relay}/${moved.target.id}`,
          `- historyTruncated: ${moved.historyTruncated}`,
          `- ${delivery === "accepted" ? RELAY_ACCEPTANCE_ONLY : PROOF_PENDING}`,
        ),
        { ...moved, delivery },
      );
    },
  };
}
