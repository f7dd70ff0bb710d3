/**
 * `pi-tasks status NAME`, `pi-tasks list` and `pi-tasks kill NAME`: session control over the relay's
 * session routes, and stopping only workers this CLI spawned (verified gone). Each answers a value
 * (printed with `--json`) and a text for people (a table, or `label: value` lines). A failure that
 * involves the relay names its URL; a URL that is not a relay URL is refused before anything is sent.
 */
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { type Env, normaliseRelayUrl, relayUrlFromEnv } from "../relay-client/config.ts";
import { fields, table } from "./format.ts";
import { relayTransport } from "./spawn.ts";
import { isAlive, listSpawned, loadSpawned } from "./spawned.ts";
import { type StopResult, stopProcess } from "./stop.ts";

/** A value for `--json` and its text for people. */
export interface Printed {
  readonly value: Record<string, unknown>;
  readonly text: string;
}

interface Listed {
  readonly session: string;
  readonly taskEndpoint?: { readonly relay: string; readonly id: string };
  readonly taskTransport?: { readonly leaseExpiresAt?: string };
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

function spawnedWords(pid: number, log: string): string {
  return `pid ${pid} (${isAlive(pid) ? "running" : "gone"}), log ${log}`;
}

export function sessionStatus(name: string, env: Env, relay?: string): Promise<Printed> {
  return withRelay(env, relay, async (transport, url) => {
    const status = (await transport.sessionStatus(name)) as unknown as Listed & Record<string, unknown>;
    const spawned = loadSpawned(env, name);
    const value = {
      ok: true,
      ...status,
      ...(spawned === undefined ? {} : { spawned: { pid: spawned.pid, alive: isAlive(spawned.pid), log: spawned.log } }),
    };
    const text = fields([
      ["session", status.session],
      ["relay", url],
      ["endpoint", status.taskEndpoint?.id],
      ["lease ends", status.taskTransport?.leaseExpiresAt],
      ["spawned", spawned === undefined ? "no (not started by pi-tasks here)" : spawnedWords(spawned.pid, spawned.log)],
    ]);
    return { value, text };
  });
}

export function sessionList(env: Env, relay?: string): Promise<Printed> {
  return withRelay(env, relay, async (transport, url) => {
    const sessions = (await transport.sessionList()) as unknown as Listed[];
    const spawned = listSpawned(env).map((worker) => ({
      session: worker.session,
      pid: worker.pid,
      alive: isAlive(worker.pid),
      log: worker.log,
    }));
    const byName = new Map(spawned.map((worker) => [worker.session, worker]));
    const rows = sessions.map((item) => {
      const worker = byName.get(item.session);
      return [item.session, item.taskEndpoint?.id ?? "", worker === undefined ? "" : spawnedWords(worker.pid, worker.log)];
    });
    const registered = new Set(sessions.map((item) => item.session));
    for (const worker of spawned)
      if (!registered.has(worker.session)) rows.push([worker.session, "(not registered)", spawnedWords(worker.pid, worker.log)]);
    const text =
      rows.length === 0
        ? `No sessions on the relay at ${url}.`
        : `Sessions on the relay at ${url}:\n${table(["SESSION", "ENDPOINT", "SPAWNED BY PI-TASKS"], rows)}`;
    return { value: { ok: true, relay: url, sessions, spawned }, text };
  });
}

/** What became of a stopped worker's worktree, in words (with how to merge or remove a kept one). */
export function worktreeLines(worktree: StopResult["worktree"]): string[] {
  if (worktree === undefined) return [];
  if (worktree.removed) return [`Its worktree ${worktree.path} (branch ${worktree.branch}) had nothing unmerged and was removed.`];
  return [
    `Its worktree ${worktree.path} (branch ${worktree.branch}) is kept: ${worktree.kept}.`,
    `Merge it with git merge ${worktree.branch} (after committing in the worktree), or discard it with git worktree remove --force ${worktree.path} and git branch -D ${worktree.branch}.`,
  ];
}

export async function killSession(name: string, env: Env): Promise<Printed> {
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
    value: {
      ok: true,
      session: name,
      killed: true,
      pids: result.pids,
      ...(result.worktree === undefined ? {} : { worktree: result.worktree }),
    },
    text: [`Stopped ${name} (pids ${result.pids.join(", ")}); confirmed gone.`, ...worktreeLines(result.worktree)].join("\n"),
  };
}
