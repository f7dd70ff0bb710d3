/**
 * `agent_task_send`: the origin assigns a task to another Pi session's task endpoint (or to a
 * specialist by its profile name: specialists.ts), with the grant
 * of the profile a spawned worker was started with, narrowed by this session's default grant. It
 * returns relay acceptance (or the wait for the worker's proof), never the worker's progress.
 */
import { sessionStatus } from "../../../src/host/sessions.ts";
import { listSpawned } from "../../../src/host/spawned.ts";
import { sameEndpoint } from "../../../src/protocol/endpoint.ts";
import { narrowGrant } from "../../../src/protocol/grant.ts";
import type { Grant, TaskEndpoint, TaskRecord } from "../../../src/protocol/schemas.ts";
import { taskRecordOf } from "../../../src/core/resume.ts";
import type { Env } from "../../../src/relay-client/config.ts";
import { defaultGrant } from "../grants.ts";
import { specialistEndpoint } from "../specialists.ts";
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

/**
 * The grant of the profile a worker this user spawned was started with, when `to` is that worker:
 * at the endpoint it registered when spawned, or — it rebound since (a relay restart gives every
 * session a fresh endpoint) — where the relay has its session now. A grant only narrows, so a
 * lookup that fails leaves the task with the grants it has and says nothing new.
 */
async function spawnedGrant(env: Env, relayUrl: string, params: unknown): Promise<Grant | undefined> {
  const to = (params as { to?: unknown } | undefined)?.to as TaskEndpoint | undefined;
  if (to === undefined || typeof to !== "object") return undefined;
  const granted = listSpawned(env).filter((worker) => worker.grant !== undefined);
  const atSpawn = granted.find((worker) => worker.taskEndpoint !== undefined && sameEndpoint(worker.taskEndpoint, to));
  if (atSpawn !== undefined) return atSpawn.grant;
  for (const worker of granted) {
    const now = await sessionStatus(worker.session, env, relayUrl).then(
      (found) => found.status.taskEndpoint,
      () => undefined,
    );
    if (now !== undefined && sameEndpoint(now, to)) return worker.grant;
  }
  return undefined;
}

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
      await deps.ready();
      // A specialist by name: a worker of that profile, warm or started now (specialists.ts).
      const specialist = typeof input.to === "string" ? await specialistEndpoint(deps, input.to, ctx) : undefined;
      const params = specialist === undefined ? input : { ...input, to: specialist.endpoint };
      const info = deps.info();
      // A relay that cannot prove it is the user's is asked nothing (its lifetime sends it nothing either).
      const spawned =
        info === undefined || info.relay.state === "untrusted" ? undefined : await spawnedGrant(info.env, info.relay.url, params);
      const grant = info === undefined ? undefined : narrowGrant(spawned, defaultGrant(info.env));
      // A sub-task draws from what this session's model left of its own task's turns and cost.
      const options = { signal, spentOn: (taskId: string) => deps.spentOn(taskId), ...(grant === undefined ? {} : { grant }) };
      const created = await deps.run((core) => core.createTask(params, options));
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
