/**
 * `agent_task_inbox`: every task this session knows in its current lifetime, both roles, in words.
 * Read only: no relay requests.
 */
import { InboxParams, TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { assertValid } from "../../../src/protocol/validate.ts";
import { taskWords } from "../describe.ts";
import { renderTask } from "../render.ts";
import { ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

export function inboxTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_inbox> {
  return {
    name: "agent_task_inbox",
    label: "Task inbox",
    description: "List every task this session knows in its current lifetime (both roles). Read only.",
    promptSnippet: "agent_task_inbox: list this session's tasks (read only)",
    promptGuidelines: [],
    parameters: TOOL_PARAMETERS.agent_task_inbox,
    async execute(_id, params) {
      assertValid(InboxParams, params, { subject: "agent_task_inbox" });
      const tasks = deps.current().listTasks();
      const text =
        tasks.length === 0
          ? "## task inbox\n(no tasks)"
          : ["## task inbox", ...tasks.map((task) => renderTask(task, taskWords(task)))].join("\n\n");
      return ok(text, { tasks });
    },
  };
}
