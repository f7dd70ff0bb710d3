/**
 * `agent_task_workers`: the sessions registered on this session's relay (with their
 * `taskEndpoint`), marking the workers pi-tasks spawned. Coordinators only.
 */
import { sessionList } from "../../../src/host/sessions.ts";
import { TaskError } from "../../../src/protocol/errors.ts";
import { TOOL_PARAMETERS, type TaskEndpoint, WorkersParams } from "../../../src/protocol/schemas.ts";
import { assertValid, isRecord } from "../../../src/protocol/validate.ts";
import { type WorkerProfile, loadProfiles } from "../profiles.ts";
import { oneLine } from "../quote.ts";
import { ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

interface Listed {
  readonly session: string;
  readonly taskEndpoint: TaskEndpoint;
}

function listed(value: unknown): Listed | undefined {
  if (!isRecord(value) || typeof value.session !== "string" || !isRecord(value.taskEndpoint)) return undefined;
  const { relay, id } = value.taskEndpoint;
  return typeof relay === "string" && typeof id === "string" ? { session: value.session, taskEndpoint: { relay, id } } : undefined;
}

function profileLine(profile: WorkerProfile): string {
  if (profile.problem !== undefined) return `- ${profile.name}: cannot be used (${profile.problem}; ${profile.source})`;
  const parts = [profile.model ?? "your model", ...(profile.grant === undefined ? [] : ["with a grant"]), profile.source];
  return `- ${profile.name}${profile.description === undefined ? "" : ` — ${oneLine(profile.description)}`} (${parts.join(", ")})`;
}

export function workersTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_workers> {
  return {
    name: "agent_task_workers",
    label: "List workers",
    description:
      "List the Pi sessions registered on this session's relay with their taskEndpoint {relay, id}, marking the workers pi-tasks spawned, and the worker profiles agent_task_spawn can start.",
    promptSnippet: "agent_task_workers: list sessions you can delegate to, with their taskEndpoint",
    promptGuidelines: ["Use agent_task_workers to select an existing worker session; pass its taskEndpoint unchanged to agent_task_send."],
    parameters: TOOL_PARAMETERS.agent_task_workers,
    async execute(_id, params, _signal, _onUpdate, ctx) {
      assertValid(WorkersParams, params, { subject: "agent_task_workers" });
      await deps.ready();
      const info = deps.info();
      if (info === undefined) throw new TaskError("TASKS_NOT_RUNNING");
      const listing = await sessionList(info.env, info.relay.url);
      const spawned = new Map(listing.spawned.map((worker) => [worker.session, worker]));
      const sessions = listing.sessions.map(listed).filter((item): item is Listed => item !== undefined);
      const text = ["## sessions on the relay"];
      for (const item of sessions) {
        deps.rememberPeer(item.session, item.taskEndpoint);
        const self = item.session === info.session.name ? " (this session)" : "";
        const worker = spawned.get(item.session);
        const mark = worker === undefined ? "" : ` (spawned by pi-tasks, pid ${worker.pid})`;
        text.push(`- ${item.session}${self}${mark}: taskEndpoint ${JSON.stringify(item.taskEndpoint)}`);
      }
      if (sessions.length === 0) text.push("(none)");
      const profiles = loadProfiles(info.env, ctx?.cwd ?? info.cwd, ctx?.isProjectTrusted?.() === true);
      text.push("", "## worker profiles (agent_task_spawn {name, profile})", ...profiles.map(profileLine));
      return ok(text.join("\n"), { sessions, spawned: [...spawned.values()], profiles });
    },
  };
}
