/**
 * Starting a worker Pi for this session (what `agent_task_spawn` does, and what a send to a
 * specialist by name does when no worker of that profile is free): its project directory, its
 * profile, its model (a named one, the profile's, else the origin's own), its workspace
 * (src/workspace/workspace.ts) and the spawn cap — at most `maxSpawnedWorkers` (or the person's lower
 * `PI_TASKS_MAX_WORKERS`) run spawned by one Pi (`SPAWN_LIMIT`, nothing started).
 */
import type { ExtensionToolContext } from "@earendil-works/pi-coding-agent";
import { isAbsolute, resolve } from "node:path";
import { loweredLimit } from "../../src/core/lowered.ts";
import { type SpawnResult, spawnWorker } from "../../src/host/spawn.ts";
import { listSpawned } from "../../src/host/spawned.ts";
import { isAlive } from "../../src/platform/processes.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { maxSpawnedWorkers } from "../../src/protocol/limits.ts";
import type { SpawnParams } from "../../src/protocol/schemas.ts";
import { type Env, piTasksHome } from "../../src/relay-client/config.ts";
import { createWorkspace, type Workspace } from "../../src/workspace/workspace.ts";
import { configuredNumber, MAX_WORKERS_VARIABLE } from "./pi-run.ts";
import { findProfile, loadProfiles, type WorkerProfile } from "./profiles.ts";
import type { ToolDeps } from "./tools/shared.ts";

/** Test and demo only: a scripted-model scenario module for spawned workers (absolute path). */
export const WORKER_SCRIPT_ENV = "PI_TASKS_WORKER_SCRIPT";

/** Refuses another spawn while this Pi runs as many spawned workers as it may (`SPAWN_LIMIT`); nothing starts. */
/** Starts in progress in this Pi (not yet recorded as spawned): counted against the cap, so starts side by side cannot pass it. */
let starting = 0;

function checkSpawnCap(env: Env): void {
  const spawned = listSpawned(env).filter((worker) => (worker.spawner ?? worker.owner) === process.pid && isAlive(worker.pid)).length;
  const running = spawned + starting;
  const cap = loweredLimit(configuredNumber(env, MAX_WORKERS_VARIABLE), maxSpawnedWorkers, 1, MAX_WORKERS_VARIABLE, MAX_WORKERS_VARIABLE);
  if (running >= cap) throw new TaskError("SPAWN_LIMIT", { details: { running, maxWorkers: cap } });
}

export interface StartedWorker {
  readonly worker: SpawnResult;
  readonly own: Workspace;
  readonly profile?: WorkerProfile;
}

/** The model a worker is started with: a scripted one (tests), the named or the profile's, else the origin's own. */
function launchOf(env: Env, named: string | undefined, ctx: ExtensionToolContext | undefined) {
  const script = env[WORKER_SCRIPT_ENV]?.trim();
  const ownModel = ctx?.model === undefined ? undefined : `${ctx.model.provider}/${ctx.model.id}`;
  if (script) return { script };
  if (named !== undefined) return { model: named };
  return ownModel !== undefined ? { model: ownModel, checkModel: false } : {};
}

/** Starts a worker Pi as `input` says and waits until it registered (remembered for the board). */
export async function startWorker(
  deps: ToolDeps,
  input: SpawnParams,
  ctx: ExtensionToolContext | undefined,
  options: { readonly pooled?: boolean } = {},
): Promise<StartedWorker> {
  await deps.ready();
  const info = deps.info();
  if (info === undefined) throw new TaskError("TASKS_NOT_RUNNING");
  const base = ctx?.cwd ?? info.cwd;
  const projectDir =
    input.projectDir === undefined ? base : isAbsolute(input.projectDir) ? input.projectDir : resolve(base, input.projectDir);
  const profile =
    input.profile === undefined ? undefined : findProfile(loadProfiles(info.env, base, ctx?.isProjectTrusted?.() === true), input.profile);
  checkSpawnCap(info.env);
  starting += 1;
  try {
    return await startChecked(deps, input, ctx, { projectDir, options, info, ...(profile === undefined ? {} : { profile }) });
  } finally {
    starting -= 1;
  }
}

/** `startWorker` once the spawn cap let it start: its workspace, the worker Pi, until it registered. */
async function startChecked(
  deps: ToolDeps,
  input: SpawnParams,
  ctx: ExtensionToolContext | undefined,
  start: {
    projectDir: string;
    options: { readonly pooled?: boolean };
    info: NonNullable<ReturnType<ToolDeps["info"]>>;
    profile?: WorkerProfile;
  },
): Promise<StartedWorker> {
  const { projectDir, options, info, profile } = start;
  const home = piTasksHome(info.env);
  const own = createWorkspace(projectDir, input.name, home, input.worktree ?? profile?.worktree);
  const worker = await spawnWorker({
    name: input.name,
    projectDir: own.workDir,
    ...(own.worktree === undefined ? {} : { worktree: own.worktree }),
    ...(own.scratch === undefined ? {} : { scratch: own.scratch }),
    relay: info.relay.url,
    env: { ...info.env, PI_TASKS_HOME: home },
    ...(input.keep === true ? {} : { owner: process.pid }),
    spawner: process.pid,
    ...(options.pooled === true ? { pooled: true } : {}),
    ...(profile === undefined
      ? {}
      : {
          profile: {
            name: profile.name,
            instructions: profile.instructions,
            ...(profile.grant === undefined ? {} : { grant: profile.grant }),
          },
        }),
    ...launchOf(info.env, input.model ?? profile?.model, ctx),
  });
  deps.rememberPeer(worker.session, worker.taskEndpoint);
  return { worker, own, ...(profile === undefined ? {} : { profile }) };
}
