/**
 * `agent_task_apply`: the origin applies the file content a worker's completed result carries (a
 * patch, or the changed files) into its own checkout — only when asked (src/workspace/result-content.ts),
 * and only inside the write scopes of any grant this session works under. Conflicts are listed and
 * nothing changes.
 */
import { applyContent } from "../../../src/workspace/result-content.ts";
import { TaskError } from "../../../src/protocol/errors.ts";
import { TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import type { TaskCore } from "../../../src/core/task-core.ts";
import { isRecord } from "../../../src/protocol/validate.ts";
import { grantVerdict } from "../grants.ts";
import { lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

/** The content of the task's latest completed result, as this origin received it. */
export function resultContent(core: TaskCore, taskId: string): unknown {
  const task = core.getTask(taskId);
  if (task.role !== "origin")
    throw new TaskError("NOT_PARTICIPANT", { message: "only the task's origin applies its result", details: { taskId } });
  const completed = [...task.events].reverse().find((event) => event.type === "task.completed");
  const result = completed?.payload.result;
  const content = isRecord(result) ? result.content : undefined;
  if (content === undefined) throw new TaskError("NO_RESULT_CONTENT", { details: { taskId, status: task.status } });
  return content;
}

/**
 * Applies a task's result content in `cwd`; the words both the tool and `/tasks apply` say. A session
 * that works under a grant applies only inside its write scopes (every path checked first).
 */
export function applyResult(core: TaskCore, taskId: string, cwd: string): { readonly text: string; readonly paths: readonly string[] } {
  const applied = applyContent(cwd, resultContent(core, taskId), (path) => grantVerdict(core, "write", { path }, cwd)?.reason);
  const text = lines(
    "## result applied",
    `- taskId: ${taskId}`,
    `- as: ${applied.mode === "patch" ? "a patch (git apply)" : "files"}`,
    `- into: ${cwd}`,
    `- changed: ${applied.paths.join(", ")}`,
    "",
    "Nothing is committed: review the change (git diff, git status) before you keep it.",
  );
  return { text, paths: applied.paths };
}

export function applyTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_apply> {
  return {
    name: "agent_task_apply",
    label: "Apply result",
    description:
      "Apply the file content a worker's completed result carries (its patch, or its changed files) into this session's checkout. Only the task's origin, only on request; conflicts are listed and nothing changes.",
    promptSnippet: "agent_task_apply: apply a completed result's patch or files into your checkout",
    promptGuidelines: [
      "When a completed result says it carries content and you accept it, use agent_task_apply to bring the worker's changes into your checkout (the worker may be on another machine); review them before acknowledging or committing.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_apply,
    async execute(_id, params, _signal, _onUpdate, ctx) {
      const cwd = ctx?.cwd ?? process.cwd();
      const applied = await deps.run(async (core) => applyResult(core, params.taskId, cwd));
      return ok(applied.text, { taskId: params.taskId, paths: applied.paths });
    },
  };
}
