/**
 * `agent_task_wait`: block until a task, or any of several, is terminal or the timeout passes;
 * says which finished and which are still open. Only when the person asks the model to block.
 */
import type { TaskCore, TaskView } from "../../../src/core/task-core.ts";
import { pause } from "../../../src/core/timers.ts";
import { TaskError } from "../../../src/protocol/errors.ts";
import { isTerminalStatus } from "../../../src/protocol/events.ts";
import { waitBackoffInitialMs, maxWaitBackoffMs, defaultWaitTimeoutMs } from "../../../src/protocol/limits.ts";
import { TOOL_PARAMETERS, WaitParams } from "../../../src/protocol/schemas.ts";
import { assertValid } from "../../../src/protocol/validate.ts";
import { renderTask } from "../render.ts";
import { errorResult, lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

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

/** The ids a wait names: `taskId`, or `taskIds` (exactly one of them). */
function waitedIds(input: WaitParams): string[] {
  if ((input.taskId === undefined) === (input.taskIds === undefined)) {
    throw new TaskError("INVALID_REQUEST", {
      message: "agent_task_wait takes taskId or taskIds (not both, not neither)",
      details: { path: "/taskIds" },
    });
  }
  return input.taskIds ?? [input.taskId!];
}

/** Which of the tasks are terminal now (`finished`), and which are still open. */
function sorted(core: TaskCore, ids: readonly string[]): { finished: TaskView[]; open: TaskView[] } {
  const tasks = ids.map((id) => core.getTask(id));
  return { finished: tasks.filter((task) => isTerminalStatus(task.status)), open: tasks.filter((task) => !isTerminalStatus(task.status)) };
}

function gathered(finished: readonly TaskView[], open: readonly TaskView[]) {
  const heading = `## ${finished.length} of ${finished.length + open.length} task${finished.length + open.length === 1 ? "" : "s"} finished`;
  const still = open.length === 0 ? [] : ["", `still open: ${open.map((task) => `${task.taskId} (${task.status})`).join(", ")}`];
  return ok(lines(heading, ...finished.map((task) => renderTask(task)), ...still), {
    finished: finished.map((task) => task.taskId),
    open: open.map((task) => task.taskId),
    tasks: finished,
    timedOut: false,
  });
}

export function waitTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_wait> {
  return {
    name: "agent_task_wait",
    label: "Wait for tasks",
    description:
      "Block until a task — or any of several (taskIds) — reaches a terminal status, or timeoutMs passes; says which finished and which are still open. Use only when explicitly asked to block.",
    promptSnippet: "agent_task_wait: block until a task (or any of taskIds) is terminal (only when asked to block)",
    promptGuidelines: [
      "Use agent_task_wait only when the user explicitly asks you to block on tasks; otherwise keep working or end your turn and you will be woken.",
      "To gather fanned-out work, call agent_task_wait with taskIds: it returns when any finishes and lists the ones still open; call it again with those.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_wait,
    async execute(_id, params, signal) {
      const input = assertValid(WaitParams, params, { subject: "agent_task_wait" });
      const ids = waitedIds(input);
      const timeoutMs = input.timeoutMs ?? defaultWaitTimeoutMs;
      const deadline = Date.now() + timeoutMs;
      await deps.ready();
      deps.requestRefresh();
      let delay = waitBackoffInitialMs;
      for (;;) {
        const core = deps.current();
        const { finished, open } = sorted(core, ids);
        const single = input.taskId !== undefined;
        if (finished.length > 0)
          return single
            ? ok(lines(`## task ${finished[0]!.status}`, renderTask(finished[0]!)), { task: finished[0], timedOut: false })
            : gathered(finished, open);
        const remaining = deadline - Date.now();
        if (remaining <= 0 || signal?.aborted) {
          const reason = signal?.aborted ? "ABORTED" : "TASK_WAIT_TIMEOUT";
          const still = open.map((task) => ({ taskId: task.taskId, status: task.status }));
          return errorResult(new TaskError(reason, { details: single ? { ...still[0], timeoutMs } : { open: still, timeoutMs } }));
        }
        await nextChange(core, signal, Math.min(delay, remaining));
        delay = Math.min(delay * 2, maxWaitBackoffMs);
      }
    },
  };
}
