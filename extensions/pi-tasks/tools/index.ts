/**
 * Every `agent_task_*` tool, in the order the model sees them, each behind the one error boundary,
 * its task ids resolved first (short ids work: tools/shared.ts `withTaskIds`).
 */
import { ackTool } from "./ack.ts";
import { applyTool } from "./apply.ts";
import { cancelTool } from "./cancel.ts";
import { doneTool } from "./done.ts";
import { inboxTool } from "./inbox.ts";
import { messageTool } from "./message.ts";
import { reassignTool } from "./reassign.ts";
import { requestGrantTool } from "./request-grant.ts";
import { reviseTool } from "./revise.ts";
import { sendTool } from "./send.ts";
import { type TaskToolDefinition, type ToolDeps, withErrorResult, withTaskIds } from "./shared.ts";
import { spawnTool } from "./spawn.ts";
import { statusTool } from "./status.ts";
import { stopTool } from "./stop.ts";
import { waitTool } from "./wait.ts";
import { workersTool } from "./workers.ts";
import { workflowTool } from "./workflow.ts";
import { createWorkflowRunner, WORKFLOW_MESSAGE, type WorkflowRunner } from "../workflows.ts";

/** A runner of workflows whose end wakes the model through `deps`. */
export function workflowRunnerOf(deps: ToolDeps): WorkflowRunner {
  return createWorkflowRunner(deps, (content) => deps.wakeModel(WORKFLOW_MESSAGE, content));
}

export type { TaskToolDefinition, ToolDeps, ToolDetails, ToolResult } from "./shared.ts";
export { errorResult } from "./shared.ts";

/** The tools, sharing this Pi's running workflows (`agent_task_workflow` starts them, `agent_task_cancel` cancels one). */
export function createTaskTools(deps: ToolDeps, workflows: WorkflowRunner = workflowRunnerOf(deps)): TaskToolDefinition[] {
  const tools = [
    sendTool,
    (toolDeps) => workflowTool(toolDeps, workflows),
    messageTool,
    requestGrantTool,
    doneTool,
    ackTool,
    (toolDeps) => cancelTool(toolDeps, workflows),
    reviseTool,
    applyTool,
    reassignTool,
    statusTool,
    inboxTool,
    waitTool,
    spawnTool,
    workersTool,
    stopTool,
  ] as ((deps: ToolDeps) => TaskToolDefinition)[];
  return tools.map((tool): TaskToolDefinition => withErrorResult(withTaskIds(tool(deps), deps)));
}
