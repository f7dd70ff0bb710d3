import { TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

export function cancelTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_cancel> {
  return {
    name: "agent_task_cancel",
    label: "Cancel task",
    description: "Cancel a task you assigned. Canonical at once; the worker is told to stop.",
    promptSnippet: "agent_task_cancel: cancel a task you assigned",
    promptGuidelines: ["Use agent_task_cancel only for tasks you assigned and no longer need."],
    parameters: TOOL_PARAMETERS.agent_task_cancel,
    async execute(_id, params, signal) {
      const cancelled = await deps.run((core) => core.cancel(params, { signal }));
      return ok(
        lines(
          "## task cancelled",
          `- taskId: ${cancelled.taskId}`,
          `- delivery to the worker: ${cancelled.delivery}`,
          ...cancelled.warnings.map((warning) => `- warning: ${warning.code}`),
        ),
        { ...cancelled },
      );
    },
  };
}
