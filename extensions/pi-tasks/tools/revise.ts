/**
 * `agent_task_revise`: the origin sends a completed result back to the same worker with the reason,
 * for another round (src/core/revision.ts) — instead of delegating the task again from scratch. The
 * worker keeps its session and context; the task's history keeps every round.
 */
import { maxRevisionRounds } from "../../../src/protocol/limits.ts";
import { TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { lines, ok, RELAY_ACCEPTANCE_ONLY, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

export function reviseTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_revise> {
  return {
    name: "agent_task_revise",
    label: "Send back for revision",
    description: `Send a completed task you assigned back to its worker with the reason it is not done yet; the task becomes active again and the worker continues with its context. Only before you acknowledge it, at most ${maxRevisionRounds} times.`,
    promptSnippet: "agent_task_revise: send a completed result back to its worker for another round",
    promptGuidelines: [
      "Use agent_task_revise when a completed result falls short and the same worker should fix it: say exactly what is missing or wrong in reason. Acknowledge with agent_task_ack only the result you accept.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_revise,
    async execute(_id, params, signal) {
      const revised = await deps.run((core) => core.requestRevision(params, { signal }));
      return ok(
        lines(
          "## task sent back for revision",
          `- taskId: ${revised.taskId}`,
          `- round: ${revised.round} of at most ${maxRevisionRounds}`,
          `- ${RELAY_ACCEPTANCE_ONLY}`,
          "",
          "The task is active again; you will be woken by the worker's questions and its next result.",
        ),
        { ...revised },
      );
    },
  };
}
