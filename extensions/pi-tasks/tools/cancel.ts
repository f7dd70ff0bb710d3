/**
 * `agent_task_cancel`: the origin cancels a task it assigned. The cancel is canonical here at once;
 * telling the worker is best effort, so the answer is always `cancelled`, with the delivery in
 * words: to a worker known lost it is not required (the same words whatever the relay did with it),
 * else accepted, queued (pending, with why) or refused.
 */
import type { CancelResult } from "../../../src/core/results.ts";
import { TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { waitWords } from "../describe.ts";
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

export function cancelTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_cancel> {
  return {
    name: "agent_task_cancel",
    label: "Cancel task",
    description: "Cancel a task you assigned. Canonical at once; the worker is told to stop (best effort; not needed when it is lost).",
    promptSnippet: "agent_task_cancel: cancel a task you assigned",
    promptGuidelines: ["Use agent_task_cancel only for tasks you assigned and no longer need."],
    parameters: TOOL_PARAMETERS.agent_task_cancel,
    async execute(_id, params, signal) {
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
