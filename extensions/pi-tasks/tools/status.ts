/**
 * `agent_task_status`: one task's local snapshot in words (for a worker, with its assignment's
 * text). Read only: no relay requests.
 */
import type { TaskView } from "../../../src/core/task-core.ts";
import { latestAssignment } from "../../../src/protocol/events.ts";
import { StatusParams, TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { assertValid } from "../../../src/protocol/validate.ts";
import { taskWords } from "../describe.ts";
import { renderEvent, renderTask } from "../render.ts";
import { lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

function assignmentText(task: TaskView): string | undefined {
  if (task.role !== "worker") return undefined;
  const assignment = latestAssignment(task.events);
  return assignment === undefined ? undefined : `\n${renderEvent(assignment, task)}`;
}

export function statusTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_status> {
  return {
    name: "agent_task_status",
    label: "Task status",
    description: "Read one task's local snapshot: status, events, delivery evidence and terminal delivery. No relay requests.",
    promptSnippet: "agent_task_status: read one task's local snapshot",
    promptGuidelines: [
      "agent_task_status reads local state only; do not call it repeatedly to wait — you are woken when something happens.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_status,
    async execute(_id, params) {
      const input = assertValid(StatusParams, params, { subject: "agent_task_status" });
      const task = deps.current().getTask(input.taskId);
      return ok(lines(renderTask(task, taskWords(task)), assignmentText(task)), { task });
    },
  };
}
