/**
 * The record of worker processes pi-tasks spawned (so `kill` touches only those): one JSON file per
 * session name under `$PI_TASKS_HOME/spawned/` (see `piTasksHome`). Every directory it makes in the
 * home is made by src/platform/home-dir.ts (0700; a home others may enter is refused).
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Grant, TaskEndpoint } from "../protocol/schemas.ts";
import type { ScratchCopy } from "../workspace/scratch.ts";
import type { Worktree } from "../workspace/worktree.ts";
import { piTasksHome } from "../relay-client/config.ts";
import { ensureHomeSubdirectory } from "../platform/home-dir.ts";

export interface SpawnedWorker {
  readonly session: string;
  /** The holder process that keeps Pi's RPC stdin open. */
  readonly pid: number;
  readonly projectDir: string;
  readonly relay: string;
  readonly log: string;
  readonly createdAt: string;
  /** The endpoint it registered (absent until it did). */
  readonly taskEndpoint?: TaskEndpoint;
  /** The pid of the Pi it stops with; absent when it was kept (or spawned from the shell). */
  readonly owner?: number;
  /** The pid of the Pi that spawned it, kept or not (absent when spawned from the shell). */
  readonly spawner?: number;
  /** Started for a send to a specialist by name: stopped after `specialistIdleMs` without a task. */
  readonly pooled?: true;
  /** The worker profile it was started with, and that profile's grant (tasks sent to it are narrowed to it). */
  readonly profile?: string;
  readonly grant?: Grant;
  /** Its own git worktree, when it has one (removed when it stops, unless it holds unmerged work). */
  readonly worktree?: Worktree;
  /** Its scratch copy of a project outside git, when it has one (removed when it stops, unless something in it changed). */
  readonly scratch?: ScratchCopy;
}

export const stateDir = piTasksHome;

/** The directory of spawn records, inside the home. */
const SPAWNED_DIR = "spawned";

function spawnedDir(env: Record<string, string | undefined>): string {
  return join(stateDir(env), SPAWNED_DIR);
}

function fileName(session: string): string {
  return `${encodeURIComponent(session)}.json`;
}

/** A scripted worker's own Pi configuration directory (never the user's ~/.pi/agent). */
export function scriptedAgentDir(env: Record<string, string | undefined>, session: string): string {
  return ensureHomeSubdirectory(stateDir(env), "agents", encodeURIComponent(session));
}

/**
 * A spawned worker's own Pi session directory (`--session-dir`): workers run in the person's project
 * folder, and their sessions must not be the newest there (`pi --continue` would open a worker's).
 */
export function workerSessionDir(env: Record<string, string | undefined>, session: string): string {
  return ensureHomeSubdirectory(stateDir(env), WORKER_SESSIONS_DIR, encodeURIComponent(session));
}

/** The home's directory of spawned workers' sessions, one subdirectory per worker name. */
export const WORKER_SESSIONS_DIR = "sessions";

export function logDir(env: Record<string, string | undefined>): string {
  return ensureHomeSubdirectory(stateDir(env), "logs");
}

export function saveSpawned(env: Record<string, string | undefined>, worker: SpawnedWorker): void {
  const dir = ensureHomeSubdirectory(stateDir(env), SPAWNED_DIR);
  writeFileSync(join(dir, fileName(worker.session)), `${JSON.stringify(worker, null, 2)}\n`);
}

export function loadSpawned(env: Record<string, string | undefined>, session: string): SpawnedWorker | undefined {
  try {
    return JSON.parse(readFileSync(join(spawnedDir(env), fileName(session)), "utf8")) as SpawnedWorker;
  } catch {
    return undefined;
  }
}

export function listSpawned(env: Record<string, string | undefined>): SpawnedWorker[] {
  let names: string[];
  try {
    names = readdirSync(spawnedDir(env));
  } catch {
    return [];
  }
  return names
    .filter((name) => name.endsWith(".json"))
    .map((name) => loadSpawned(env, decodeURIComponent(name.slice(0, -".json".length))))
    .filter((worker): worker is SpawnedWorker => worker !== undefined);
}

export function forgetSpawned(env: Record<string, string | undefined>, session: string): void {
  rmSync(join(spawnedDir(env), fileName(session)), { force: true });
  rmSync(join(stateDir(env), "agents", encodeURIComponent(session)), { recursive: true, force: true });
}

/** Where a worker holder writes Pi's RPC stream as it is (beside the readable log). */
export function rpcLogFile(log: string): string {
  return `${log.replace(/\.log$/, "")}.rpc.jsonl`;
}

/** Where a worker holder writes its Pi's pid (beside the log). */
export function piPidFile(log: string): string {
  return `${log}.pi-pid`;
}
