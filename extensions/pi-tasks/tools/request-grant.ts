/**
 * `agent_task_request_grant`: a worker whose grant falls short asks its origin's person for more —
 * tools, bash, network, read or write paths (never budgets) — with a reason, once per task
 * (src/core/grant-requests.ts). The person decides; the decision arrives as a task event.
 */
import { TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { lines, ok, RELAY_ACCEPTANCE_ONLY, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

export function requestGrantTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_request_grant> {
  return {
    name: "agent_task_request_grant",
    label: "Ask for a wider grant",
    description:
      "Ask the person who assigned your task for more than its grant allows: tools, bash, network, read or write paths — only what the task needs, with the reason. Once per task; their decision arrives as a task event (approved: your grant is wider from then on).",
    promptSnippet: "agent_task_request_grant: ask your task's origin for a wider grant, once, with a reason",
    promptGuidelines: [
      "Use agent_task_request_grant only when a tool call was refused with PI_TASK_GRANT_DENIED (or the sandbox stopped a command: a read-only or hidden path, no network) and the task cannot be done without it: ask once, for exactly what the task needs, and say why in reason. Never try to get around a grant another way.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_request_grant,
    async execute(_id, params, signal) {
      const sent = await deps.run((core) => core.requestGrant(params, { signal }));
      return ok(
        lines(
          "## grant request sent",
          `- taskId: ${sent.taskId}`,
          `- ${RELAY_ACCEPTANCE_ONLY}`,
          "",
          "The person at the origin decides; you are woken with their decision. Until then, go on with what your grant allows, or end your turn.",
        ),
        { ...sent },
      );
    },
  };
}
