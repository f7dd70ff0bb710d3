/**
 * `agent_task_cancel`: the origin cancels a task it assigned. The cancel is canonical here at once;
 * telling the worker is best effort, so the answer is always `cancelled`, with the delivery in
 * words: to a worker known lost it is not required (the same words whatever the relay did with it),
 * else accepted, queued (pending, with why) or refused. Given a workflow's id (`wf-…`), it cancels
 * the workflow as a whole (workflows.ts): its running steps are cancelled, the rest never sent.
 */
import type { CancelResult } from "../../../src/core/results.ts";
import { TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { waitWords } from "../describe.ts";
import { isWorkflowId } from "../short-ids.ts";
import type { WorkflowCancel, WorkflowRunner } from "../workflows.ts";
import { lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

/** The delivery line: what the worker hears of the cancel, and whether anything waits for it. */
export function cancelDeliveryWords(cancelled: CancelResult): string {
  if (cancelled.workerLost) return "not required — its worker is lost (orphaned or no longer registered); the task is cancelled here";
  switch (cancelled.delivery) {
    case "accepted":
      return "accepted by the relay — the worker is told to stop";
    case "pending":
      return `pending — ${waitWords(cancelled.pending?.cause, "the worker")}; the task is cancelled here`;
    case "blocked":
      return "refused by the relay — the worker may not hear of it; the task is cancelled here";
  }
}

/** A workflow cancelled as a whole, in words: each running step's cancel, and what was never sent. */
export function workflowCancelLines(result: WorkflowCancel): string[] {
  const unsent = result.workflow.steps.filter((step) => step.taskId === undefined).length;
  return [
    "## workflow cancelled",
    `- workflow: ${result.workflow.id} (${result.workflow.mode}, ${result.workflow.steps.length} steps)`,
    ...result.cancelled.map(
      (cancelled) => `- step task cancelled: ${cancelled.taskId} — delivery to the worker: ${cancelDeliveryWords(cancelled)}`,
    ),
    ...result.failed.map((failed) => `- step task NOT cancelled: ${failed.taskId} — ${failed.error}`),
    `- steps never sent: ${unsent}`,
    "No workflow-ended wake follows; steps that had already ended keep their outcomes.",
  ];
}

export function cancelTool(deps: ToolDeps, workflows: WorkflowRunner): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_cancel> {
  return {
    name: "agent_task_cancel",
    label: "Cancel task",
    description:
      "Cancel a task you assigned, or a workflow as a whole (taskId: its wf-… id). Canonical at once; the worker is told to stop (best effort; not needed when it is lost).",
    promptSnippet: "agent_task_cancel: cancel a task you assigned, or a whole workflow",
    promptGuidelines: ["Use agent_task_cancel only for tasks (or workflows) you assigned and no longer need."],
    parameters: TOOL_PARAMETERS.agent_task_cancel,
    async execute(_id, params, signal) {
      if (isWorkflowId(params.taskId)) {
        const result = await workflows.cancel(params.taskId, params.reason);
        const details = { workflowId: result.workflow.id, cancelled: result.cancelled.map((cancelled) => cancelled.taskId) };
        return ok(lines(...workflowCancelLines(result)), details);
      }
      const cancelled = await deps.run((core) => core.cancel(params, { signal }));
      return ok(
        lines(
          "## task cancelled",
          `- taskId: ${cancelled.taskId}`,
          `- delivery to the worker: ${cancelDeliveryWords(cancelled)}`,
          ...cancelled.warnings.map((warning) => `- warning: ${warning.code}`),
        ),
        { ...cancelled },
      );
    },
  };
}
