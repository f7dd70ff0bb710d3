/**
 * Session control over the relay's session routes — one session's status, the sessions listed —
 * beside the workers pi-tasks spawned here, and stopping only those (verified gone). Each answers a
 * typed value; the CLI (src/cli/sessions.ts) and the extension's tools word it. A failure that
 * involves the relay names its URL; a URL that is not a relay URL is refused before anything is sent.
 */
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { type Env, normaliseRelayUrl, relayUrlFromEnv } from "../relay-client/config.ts";
import type { ListedSession } from "../relay-client/transport.ts";
import { relayTransport } from "./spawn.ts";
import { listSpawned, loadSpawned } from "./spawned.ts";
import { isAlive } from "../platform/processes.ts";
import { type StopResult, stopProcess } from "./stop.ts";

/** A worker pi-tasks spawned here, and whether its holder still runs. */
export interface SpawnedState {
  readonly session: string;
  readonly pid: number;
  readonly alive: boolean;
  readonly log: string;
}

/** One session on a relay: what the relay says of it, and its spawned worker's state when pi-tasks spawned it here. */
export interface SessionStatus {
  readonly relay: string;
  readonly status: ListedSession;
  readonly spawned?: Omit<SpawnedState, "session">;
}

/** The sessions on a relay, and the workers pi-tasks spawned here (registered or not). */
export interface SessionListing {
  readonly relay: string;
  readonly sessions: readonly ListedSession[];
  readonly spawned: readonly SpawnedState[];
}

/** A spawned worker stopped and confirmed gone. */
export interface KilledSession {
  readonly session: string;
  readonly pids: readonly number[];
  readonly worktree?: StopResult["worktree"];
  readonly scratch?: StopResult["scratch"];
}

/** The relay a command talks to: `--relay` (validated), else the environment's. */
function relayOf(env: Env, relay: string | undefined): string {
  return relay === undefined ? relayUrlFromEnv(env) : normaliseRelayUrl(relay);
}

/** A failure of a request to the relay at `url`, saying which relay it was. */
export function atRelay(url: string, error: unknown): TaskError {
  const failure = toTaskError(error);
  if (failure.message.includes(url)) return failure;
  const unreachable = failure.code === "RELAY_UNAVAILABLE" || failure.code === "RELAY_TIMEOUT";
  const message = unreachable
    ? `no relay answers at ${url} (${failure.code}); is it running? (pi-tasks relay, or start a Pi)`
    : `the relay at ${url} answered ${failure.code}: ${failure.message}`;
  return new TaskError(failure.code, { message, details: { ...failure.details, relay: url } });
}

async function withRelay<T>(
  env: Env,
  relay: string | undefined,
  work: (transport: ReturnType<typeof relayTransport>, url: string) => Promise<T>,
): Promise<T> {
  const url = relayOf(env, relay);
  const transport = relayTransport(url, env);
  try {
    return await work(transport, url);
  } catch (error) {
    throw atRelay(url, error);
  } finally {
    transport.close();
  }
}

export function sessionStatus(name: string, env: Env, relay?: string): Promise<SessionStatus> {
  return withRelay(env, relay, async (transport, url) => {
    const status = await transport.sessionStatus(name);
    const spawned = loadSpawned(env, name);
    return {
      relay: url,
      status,
      ...(spawned === undefined ? {} : { spawned: { pid: spawned.pid, alive: isAlive(spawned.pid), log: spawned.log } }),
    };
  });
}

export function sessionList(env: Env, relay?: string): Promise<SessionListing> {
  return withRelay(env, relay, async (transport, url) => {
    const sessions = await transport.sessionList();
    const spawned = listSpawned(env).map((worker) => ({
      session: worker.session,
      pid: worker.pid,
      alive: isAlive(worker.pid),
      log: worker.log,
    }));
    return { relay: url, sessions, spawned };
  });
}

/** What became of a stopped worker's workspace (worktree or scratch copy), in words (with how to merge or remove a kept one). */
export function workspaceLines(stopped: Pick<StopResult, "worktree" | "scratch">): string[] {
  const { worktree, scratch } = stopped;
  if (scratch !== undefined)
    return scratch.removed
      ? [`Its scratch copy ${scratch.path} had no change and was removed.`]
      : [
          `Its scratch copy ${scratch.path} is kept: ${scratch.kept}.`,
          `Bring over what you keep (agent_task_apply of its result, or copy the files yourself), then discard it with rm -rf ${scratch.path} ${scratch.path}.manifest.json.`,
        ];
  if (worktree === undefined) return [];
  if (worktree.removed) return [`Its worktree ${worktree.path} (branch ${worktree.branch}) had nothing unmerged and was removed.`];
  return [
    `Its worktree ${worktree.path} (branch ${worktree.branch}) is kept: ${worktree.kept}.`,
    `See what it holds with git -C ${worktree.path} status --ignored and git -C ${worktree.path} log -g; merge what you keep (git merge ${worktree.branch} after committing in the worktree, or git cherry-pick <commit> for one off the branch), or discard it with git worktree remove --force ${worktree.path} and git branch -D ${worktree.branch}.`,
  ];
}

export async function killSession(name: string, env: Env): Promise<KilledSession> {
  if (loadSpawned(env, name) === undefined) {
    throw new TaskError("SESSION_NOT_OWNED", {
      message: `pi-tasks did not spawn a session named ${name}; it stops only its own workers.`,
      details: { session: name },
    });
  }
  const result = await stopProcess(env, name);
  if (!result.confirmed) {
    throw new TaskError("TASK_ERROR", {
      message: `The processes of ${name} could not be confirmed gone.`,
      details: { session: name, pids: result.pids },
    });
  }
  return {
    session: name,
    pids: result.pids,
    ...(result.worktree === undefined ? {} : { worktree: result.worktree }),
    ...(result.scratch === undefined ? {} : { scratch: result.scratch }),
  };
}
