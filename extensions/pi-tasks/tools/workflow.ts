/**
 * `agent_task_workflow`: several tasks in one call, run by the extension without a turn of this
 * model between them — `all` at once, a `chain` that hands each step's result to the next, or
 * `lanes` (chains side by side) — and one wake when the workflow ends, with every step's outcome
 * (extensions/pi-tasks/workflows.ts). `agent_task_cancel` with its id cancels it as a whole.
 */
import { maxWorkflowSteps } from "../../../src/protocol/limits.ts";
import { TOOL_PARAMETERS, WorkflowParams } from "../../../src/protocol/schemas.ts";
import { assertValid } from "../../../src/protocol/validate.ts";
import type { WorkflowRunner } from "../workflows.ts";
import { lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

export function workflowTool(_deps: ToolDeps, runner: WorkflowRunner): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_workflow> {
  return {
    name: "agent_task_workflow",
    label: "Run a workflow",
    description: `Run up to ${maxWorkflowSteps} tasks as one workflow, without a turn of yours between them: mode "all" sends every step at once; mode "chain" sends each step when the one before completed, with that step's result appended to its task; mode "lanes" runs several chains side by side, each step naming its chain in "lane". Each step goes to an endpoint or a specialist by profile name (like agent_task_send). You are woken once, when the workflow ends, with every step's outcome. agent_task_cancel with the workflow's id cancels it as a whole.`,
    promptSnippet: "agent_task_workflow: several tasks at once or as a chain, one wake at the end",
    promptGuidelines: [
      'Use agent_task_workflow when a job splits into independent parts (mode "all") or into steps that each need the last one\'s result (mode "chain"), e.g. {mode: "chain", steps: [{to: "scout", task}, {to: "implementer", task}, {to: "reviewer", task}]}; then keep working or end your turn: you are woken once, with every step\'s outcome.',
    ],
    parameters: TOOL_PARAMETERS.agent_task_workflow,
    async execute(_id, params, _signal, _onUpdate, ctx) {
      const input = assertValid(WorkflowParams, params, { subject: "agent_task_workflow" });
      const workflow = await runner.start(input, ctx);
      const sent = workflow.steps.filter((step) => step.taskId !== undefined);
      return ok(
        lines(
          "## workflow started",
          `- workflow: ${workflow.id} (agent_task_cancel {taskId: "${workflow.id}"} cancels it as a whole)`,
          `- mode: ${workflow.mode}, ${workflow.steps.length} steps`,
          ...sent.map((step) => `- step task: ${step.taskId}`),
          ...workflow.steps.filter((step) => step.notSent !== undefined).map((step) => `- not sent: ${step.notSent}`),
          "",
          "Keep working or end your turn: you are woken once, when the workflow ends, with every step's outcome. Questions of its steps still reach you.",
        ),
        { workflowId: workflow.id, taskIds: sent.map((step) => step.taskId!) },
      );
    },
  };
}
