/**
 * `agent_task_done`: the worker reports a task's terminal outcome (completed, failed or cancelled) to
 * its origin — its last action on the task. A completed result carries its content (changed files,
 * or the worktree's branch and patch: src/workspace/result-content.ts); the origin decides the outcome.
 */
import { TaskError } from "../../../src/protocol/errors.ts";
import { isTerminalStatus } from "../../../src/protocol/events.ts";
import { checkChangedFiles, collectContent } from "../../../src/workspace/result-content.ts";
import { WORKTREE_BASE_ENV, WORKTREE_BRANCH_ENV, worktreeChanges } from "../../../src/workspace/worktree.ts";
import { isRecord } from "../../../src/protocol/validate.ts";
import { TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { errorResult, lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

/**
 * What the worker's report means, in words: the origin decides a task's outcome (its first terminal
 * event wins); the worker's report is a request until the origin's answer arrives.
 */
function outcomeWords(requested: string, observed: string, delivery: string): string {
  if (isTerminalStatus(observed as never)) {
    return observed === requested
      ? `the origin recorded the task as ${observed}`
      : `the origin had already ended the task as ${observed}; your report did not change it`;
  }
  const sent = delivery === "accepted" ? "your report reached the relay" : "your report is queued and sent when the relay answers";
  return `${sent}; the origin decides the outcome (you see its decision when it arrives). Nothing more to do on this task.`;
}

/**
 * A completed result travels with its content (src/workspace/result-content.ts): its changed files' paths
 * checked to be inside the project, and — in a worker with its own worktree (src/workspace/worktree.ts) —
 * its branch, what changed since the worktree's base and that change as a patch; elsewhere the
 * changed files themselves.
 */
function withContent(params: unknown, cwd: string | undefined): unknown {
  if (cwd === undefined || !isRecord(params) || params.status !== "completed") return params;
  const result = isRecord(params.result) ? params.result : {};
  const changedFiles = checkChangedFiles(cwd, result.changedFiles);
  const branch = process.env[WORKTREE_BRANCH_ENV];
  const base = process.env[WORKTREE_BASE_ENV];
  const inWorktree = branch !== undefined && base !== undefined;
  if (!inWorktree && changedFiles.length === 0) return params;
  const workspace = inWorktree ? { workspace: { branch, base, ...worktreeChanges(cwd, base) } } : {};
  const content = collectContent(cwd, { ...(inWorktree ? { base } : {}), changedFiles });
  return { ...params, result: { ...result, ...workspace, ...(content === undefined ? {} : { content }) } };
}

/** The worker's line on the content its result carries (or why it does not). */
function contentLine(sent: unknown): string | undefined {
  const content = isRecord(sent) && isRecord(sent.result) && isRecord(sent.result.content) ? sent.result.content : undefined;
  if (content === undefined) return undefined;
  const omitted = content.omitted as { bytes: number; maxBytes: number } | undefined;
  if (omitted !== undefined)
    return `- content: not attached (RESULT_TOO_LARGE: ${omitted.bytes} bytes, at most ${omitted.maxBytes}); the origin reads the rest on this machine`;
  const patch = content.patch as { text: string } | undefined;
  const files = (content.files as { path: string }[] | undefined)?.map((file) => file.path) ?? [];
  return patch !== undefined ? `- content: a patch of ${Buffer.byteLength(patch.text)} bytes` : `- content: ${files.join(", ")}`;
}

export function doneTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_done> {
  return {
    name: "agent_task_done",
    label: "Finish task",
    description:
      "Report the terminal outcome of a task assigned to you: completed, failed or cancelled, with a summary, an optional result object (put changed source paths in result.changedFiles), error and artifacts. This is the worker's last action on a task.",
    promptSnippet: "agent_task_done: report a task's terminal outcome to its origin (your last action on it)",
    promptGuidelines: [
      "Finish every assigned task with agent_task_done (not with prose). Report changed source paths in result.changedFiles; artifacts are receiver-project-relative files.",
      "A retry of agent_task_done with the same status is safe; a different status for the same task is refused.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_done,
    async execute(_id, params, signal, _onUpdate, ctx) {
      const sent = withContent(params, ctx?.cwd);
      const done = await deps.run((core) => core.done(sent, { signal }));
      const delivery = done.terminalDelivery;
      if (delivery.state === "delivery_blocked") {
        return {
          ...errorResult(
            new TaskError(delivery.error.code, { retryable: false, details: { taskId: done.taskId, terminalDelivery: delivery } }),
          ),
          details: { ...done },
        };
      }
      const finished = delivery.state === "accepted" || isTerminalStatus(done.observedCanonicalStatus as never);
      return ok(
        lines(
          `## task ${done.requestedStatus} reported`,
          `- taskId: ${done.taskId}`,
          `- terminalDelivery: ${delivery.state}`,
          `- outcome: ${outcomeWords(done.requestedStatus, done.observedCanonicalStatus, delivery.state)}`,
          contentLine(sent),
        ),
        { ...done },
        finished ? { terminate: true } : {},
      );
    },
  };
}
