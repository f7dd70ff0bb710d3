import type { TaskCore } from "../../../src/core/task-core.ts";
import { pause } from "../../../src/core/timers.ts";
import { TaskError } from "../../../src/protocol/errors.ts";
import { isTerminalStatus } from "../../../src/protocol/events.ts";
import { waitBackoffInitialMs, waitBackoffMaxMs, waitTimeoutDefaultMs } from "../../../src/protocol/limits.ts";
import { TOOL_PARAMETERS, WaitParams } from "../../../src/protocol/schemas.ts";
import { assertValid } from "../../../src/protocol/validate.ts";
import { renderTask } from "../render.ts";
import { errorResult, guarded, lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

/** Resolves on the next store commit or after `ms`, whichever comes first. */
function nextChange(core: TaskCore, signal: AbortSignal | undefined, ms: number): Promise<void> {
  return new Promise((resolve) => {
    let unsubscribe = () => {};
    const finish = () => {
      unsubscribe();
      resolve();
    };
    unsubscribe = core.onChange(finish) as () => void;
    pause(ms, signal).then(finish);
  });
}

export function waitTool(deps: ToolDeps): TaskToolDefinition {
  return {
    name: "agent_task_wait",
    label: "Wait for task",
    description: "Block until a task reaches a terminal status or timeoutMs passes. Use only when explicitly asked to block.",
    promptSnippet: "agent_task_wait: block until a task is terminal (only when asked to block)",
    promptGuidelines: ["Use agent_task_wait only when the user explicitly asks you to block on a task; otherwise keep working or end your turn and you will be woken."],
    parameters: TOOL_PARAMETERS.agent_task_wait,
    execute: (_id, params, signal) =>
      guarded(async () => {
        const input = assertValid(WaitParams, params, { subject: "agent_task_wait" });
        const timeoutMs = input.timeoutMs ?? waitTimeoutDefaultMs;
        const deadline = Date.now() + timeoutMs;
        await deps.ready();
        deps.requestRefresh();
        let delay = waitBackoffInitialMs;
        for (;;) {
          const core = deps.current();
          const task = core.getTask(input.taskId);
          if (isTerminalStatus(task.status)) return ok(lines(`## task ${task.status}`, renderTask(task)), { task, timedOut: false });
          const remaining = deadline - Date.now();
          if (remaining <= 0 || signal?.aborted) {
            const reason = signal?.aborted ? "ABORTED" : "TASK_WAIT_TIMEOUT";
            return errorResult(new TaskError(reason, { details: { taskId: task.taskId, status: task.status, timeoutMs } }));
          }
          await nextChange(core, signal, Math.min(delay, remaining));
          delay = Math.min(delay * 2, waitBackoffMaxMs);
        }
      }),
  };
}
