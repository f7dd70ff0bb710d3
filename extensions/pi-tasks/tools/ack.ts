/**
 * `agent_task_ack`: the origin acknowledges a terminal task it assigned, after verifying its outcome
 * (`TaskCore.acknowledge`; once per task, terminal tasks only).
 */
import { TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

export function ackTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_ack> {
  return {
    name: "agent_task_ack",
    label: "Acknowledge task",
    description:
      "Acknowledge a terminal task you assigned, after verifying its outcome yourself. Origin only; terminal tasks only; one acknowledgement per task.",
    promptSnippet: "agent_task_ack: acknowledge a finished task you assigned, after verifying it",
    promptGuidelines: [
      "Verify a finished task's outcome independently, then call agent_task_ack with its taskId; then stop only the workers you spawned (agent_task_stop).",
    ],
    parameters: TOOL_PARAMETERS.agent_task_ack,
    async execute(_id, params, signal) {
      const acked = await deps.run((core) => core.acknowledge(params, { signal }));
      return ok(lines("## task acknowledged", `- taskId: ${acked.taskId}`, `- delivery: ${acked.delivery}`), { ...acked });
    },
  };
}
