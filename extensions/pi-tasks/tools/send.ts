/**
 * `agent_task_send`: the origin assigns a task to another Pi session's task endpoint, or to a
 * specialist by its profile name (delegate.ts: the grant it carries, the worker it goes to). It
 * returns relay acceptance (or the wait for the worker's proof), never the worker's progress.
 */
import type { TaskRecord } from "../../../src/protocol/schemas.ts";
import { taskRecordOf } from "../../../src/core/resume.ts";
import { delegate } from "../delegate.ts";
import { formatEndpoint } from "../../../src/protocol/endpoint.ts";
import { TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import {
  awaitProof,
  lines,
  ok,
  PROOF_PENDING,
  reportedNotSent,
  RELAY_ACCEPTANCE_ONLY,
  type TaskToolDefinition,
  type ToolDeps,
} from "./shared.ts";

/** The task's record as sent, when the lifetime still holds it. */
function sentRecord(deps: ToolDeps, taskId: string): TaskRecord | undefined {
  try {
    const task = deps.current().findTask(taskId);
    return task === undefined ? undefined : taskRecordOf(task);
  } catch {
    // The lifetime ended meanwhile: the result stands; only a later resume lacks this task.
    return undefined;
  }
}

export function sendTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_send> {
  return {
    name: "agent_task_send",
    label: "Send task",
    description:
      'Assign a task to another Pi session (a worker) by its opaque task endpoint {relay, id}, or to a specialist by its profile name (e.g. "reviewer": a worker of that profile, reused when idle, else started). Returns when the relay accepted the assignment — not when the worker ran it. A worker new to this session first proves its key; until it has, the task waits and nothing of it leaves.',
    promptSnippet: "agent_task_send: delegate a task to another Pi session's task endpoint",
    promptGuidelines: [
      "Use agent_task_send with the worker's taskEndpoint {relay, id} exactly as agent_task_spawn or agent_task_workers reported it; never derive an endpoint from a name.",
      'To delegate to a specialist, pass its profile name as to (agent_task_send {to: "reviewer", task}): a worker of that profile is reused when one is idle, else started; agent_task_workers lists the profiles.',
      "Put complete instructions in agent_task_send.task: the worker sees only that text. After sending, keep doing useful work; you will be woken when the worker asks a question or finishes — do not poll agent_task_status or agent_task_inbox to wait.",
      "If agent_task_send fails with a taskId in its details, the task exists: inspect it with agent_task_status instead of sending it again.",
      "A '## task refused by the worker' event after agent_task_send means the worker does not trust your identity: tell your operator; pairing (pi-tasks peers add) is their decision, never yours.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_send,
    async execute(_id, input, signal, _onUpdate, ctx) {
      const { created, specialist } = await delegate(deps, input, { ctx, signal });
      const delivery = created.delivery === "accepted" ? "accepted" : await awaitProof(deps, created.taskId, signal);
      if (typeof delivery !== "string") return await reportedNotSent(deps, delivery);
      return ok(
        lines(
          "## task sent",
          `- taskId: ${created.taskId}`,
          `- target: ${formatEndpoint(created.target)}`,
          ...(specialist === undefined
            ? []
            : [
                `- specialist: ${String(input.to)} — worker ${specialist.session}, ${specialist.started ? "started for this task" : "already running and idle"} (it stops when this Pi exits)`,
              ]),
          `- ${delivery === "accepted" ? RELAY_ACCEPTANCE_ONLY : PROOF_PENDING}`,
          "",
          "Keep working; you will be woken by the worker's questions and its result.",
        ),
        // The record stays in the session: a restarted Pi resumes from it when asked to (resume.ts).
        {
          taskId: created.taskId,
          envelopeId: created.envelopeId,
          target: created.target,
          delivery,
          record: sentRecord(deps, created.taskId),
        },
      );
    },
  };
}
