/**
 * `agent_task_spawn`: start a dedicated worker Pi (a task worker on this session's relay) and
 * return its `taskEndpoint`, ready for `agent_task_send`. Coordinators only: the worker gate
 * forbids it to workers. The worker runs the origin's model unless another is named. At most
 * `maxSpawnedWorkers` (or the person's lower `PI_TASKS_MAX_WORKERS`) run spawned by one Pi.
 */
import { isAbsolute, resolve } from "node:path";
import { spawnWorker } from "../../../src/host/spawn.ts";
import { loweredLimit } from "../../../src/core/lowered.ts";
import { listSpawned } from "../../../src/host/spawned.ts";
import { isAlive } from "../../../src/platform/processes.ts";
import { maxSpawnedWorkers } from "../../../src/protocol/limits.ts";
import { TaskError } from "../../../src/protocol/errors.ts";
import { SpawnParams, TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { assertValid } from "../../../src/protocol/validate.ts";
import { type Env, piTasksHome } from "../../../src/relay-client/config.ts";
import { configuredNumber, MAX_WORKERS_VARIABLE } from "../pi-run.ts";
import { createWorkspace, type Workspace } from "../../../src/workspace/workspace.ts";
import { findProfile, loadProfiles } from "../profiles.ts";
import { lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

/** Test and demo only: a scripted-model scenario module for spawned workers (absolute path). */
export const WORKER_SCRIPT_ENV = "PI_TASKS_WORKER_SCRIPT";

/** Refuses another spawn while this Pi runs as many spawned workers as it may (`SPAWN_LIMIT`); nothing starts. */
function checkSpawnCap(env: Env): void {
  const running = listSpawned(env).filter((worker) => (worker.spawner ?? worker.owner) === process.pid && isAlive(worker.pid)).length;
  const cap = loweredLimit(configuredNumber(env, MAX_WORKERS_VARIABLE), maxSpawnedWorkers, 1, MAX_WORKERS_VARIABLE, MAX_WORKERS_VARIABLE);
  if (running >= cap) throw new TaskError("SPAWN_LIMIT", { details: { running, maxWorkers: cap } });
}

/** Where the worker works, in words (a line of the spawn's answer). */
function workspaceLine(own: Workspace): string[] {
  if (own.worktree !== undefined)
    return [
      `- worktree: ${own.worktree.path} on branch ${own.worktree.branch}, from your checkout as it is now (its result names what changed; agent_task_apply brings it over)`,
    ];
  if (own.scratch !== undefined)
    return [
      `- workspace: a scratch copy of ${own.scratch.source} at ${own.scratch.path} (your files change only when you apply its result with agent_task_apply)`,
    ];
  return ["- workspace: your project directory itself (worktree: false): its edits land in your files directly"];
}

export function spawnTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_spawn> {
  return {
    name: "agent_task_spawn",
    label: "Start worker",
    description:
      "Start a dedicated worker Pi session that takes tasks, and wait until it is registered. Returns its taskEndpoint {relay, id} for agent_task_send. The worker runs in projectDir (default: this session's directory) with your model unless you name another (provider/id) or a profile (agent_task_workers lists them: model, grant, instructions). It works in a workspace of its own (a git worktree of your checkout as it is, or a scratch copy outside git) unless worktree is false: its edits reach your files when you apply its result with agent_task_apply. It stops when this Pi exits unless keep is true.",
    promptSnippet: "agent_task_spawn: start a worker Pi and get its taskEndpoint",
    promptGuidelines: [
      "Use agent_task_spawn to start a worker when you need one, then send it work with agent_task_send using the taskEndpoint it returns; stop workers you spawned with agent_task_stop when their tasks are acknowledged.",
    ],
    parameters: TOOL_PARAMETERS.agent_task_spawn,
    async execute(_id, params, _signal, _onUpdate, ctx) {
      const input = assertValid(SpawnParams, params, { subject: "agent_task_spawn" });
      await deps.ready();
      const info = deps.info();
      if (info === undefined) throw new TaskError("TASKS_NOT_RUNNING");
      const base = ctx?.cwd ?? info.cwd;
      const projectDir =
        input.projectDir === undefined ? base : isAbsolute(input.projectDir) ? input.projectDir : resolve(base, input.projectDir);
      const script = info.env[WORKER_SCRIPT_ENV]?.trim();
      const profile =
        input.profile === undefined
          ? undefined
          : findProfile(loadProfiles(info.env, base, ctx?.isProjectTrusted?.() === true), input.profile);
      const ownModel = ctx?.model === undefined ? undefined : `${ctx.model.provider}/${ctx.model.id}`;
      const named = input.model ?? profile?.model;
      const launch = script
        ? { script }
        : named !== undefined
          ? { model: named }
          : ownModel !== undefined
            ? { model: ownModel, checkModel: false }
            : {};
      checkSpawnCap(info.env);
      const home = piTasksHome(info.env);
      const own = createWorkspace(projectDir, input.name, home, input.worktree ?? profile?.worktree);
      const worker = await spawnWorker({
        name: input.name,
        projectDir: own.workDir,
        ...(own.worktree === undefined ? {} : { worktree: own.worktree }),
        ...(own.scratch === undefined ? {} : { scratch: own.scratch }),
        relay: info.relay.url,
        env: { ...info.env, PI_TASKS_HOME: piTasksHome(info.env) },
        ...(input.keep === true ? {} : { owner: process.pid }),
        spawner: process.pid,
        ...(profile === undefined
          ? {}
          : {
              profile: {
                name: profile.name,
                instructions: profile.instructions,
                ...(profile.grant === undefined ? {} : { grant: profile.grant }),
              },
            }),
        ...launch,
      });
      deps.rememberPeer(worker.session, worker.taskEndpoint);
      return ok(
        lines(
          "## worker started",
          `- session: ${worker.session}`,
          `- taskEndpoint: ${JSON.stringify(worker.taskEndpoint)}`,
          `- projectDir: ${worker.projectDir}`,
          `- pid: ${worker.pid}`,
          `- log: ${worker.log}`,
          ...workspaceLine(own),
          ...(profile === undefined
            ? []
            : [`- profile: ${profile.name}${profile.grant === undefined ? "" : " (tasks sent to it carry its grant)"}`]),
          `- stops: ${worker.owner === undefined ? "only by agent_task_stop (kept: it outlives this Pi)" : "when this Pi exits"}`,
          "",
          `Send it work with agent_task_send, to = ${JSON.stringify(worker.taskEndpoint)}. Stop it with agent_task_stop {name: "${worker.session}"} when you are done with it.`,
        ),
        { ...worker },
      );
    },
  };
}
