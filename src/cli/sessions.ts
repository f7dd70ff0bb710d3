/**
 * `pi-tasks status NAME`, `pi-tasks list` and `pi-tasks kill NAME`: the values of src/host/sessions.ts
 * (printed with `--json`) and their text for people (a table, or `label: value` lines).
 */
import type { Env } from "../relay-client/config.ts";
import { fields, table } from "../host/format.ts";
import { killSession, sessionList, sessionStatus, workspaceLines } from "../host/sessions.ts";

/** A value for `--json` and its text for people. */
export interface Printed {
  readonly value: Record<string, unknown>;
  readonly text: string;
}

function spawnedWords(worker: { readonly pid: number; readonly alive: boolean; readonly log: string }): string {
  return `pid ${worker.pid} (${worker.alive ? "running" : "gone"}), log ${worker.log}`;
}

export async function statusCommand(name: string, env: Env, relay?: string): Promise<Printed> {
  const { relay: url, status, spawned } = await sessionStatus(name, env, relay);
  const text = fields([
    ["session", status.session],
    ["relay", url],
    ["endpoint", status.taskEndpoint?.id],
    ["lease ends", status.taskTransport?.leaseExpiresAt],
    ["spawned", spawned === undefined ? "no (not started by pi-tasks here)" : spawnedWords(spawned)],
  ]);
  return { value: { ok: true, ...status, ...(spawned === undefined ? {} : { spawned }) }, text };
}

export async function listCommand(env: Env, relay?: string): Promise<Printed> {
  const { relay: url, sessions, spawned } = await sessionList(env, relay);
  const byName = new Map(spawned.map((worker) => [worker.session, worker]));
  const rows = sessions.map((item) => {
    const worker = byName.get(item.session);
    return [item.session, item.taskEndpoint?.id ?? "", worker === undefined ? "" : spawnedWords(worker)];
  });
  const registered = new Set(sessions.map((item) => item.session));
  for (const worker of spawned) if (!registered.has(worker.session)) rows.push([worker.session, "(not registered)", spawnedWords(worker)]);
  const text =
    rows.length === 0
      ? `No sessions on the relay at ${url}.`
      : `Sessions on the relay at ${url}:\n${table(["SESSION", "ENDPOINT", "SPAWNED BY PI-TASKS"], rows)}`;
  return { value: { ok: true, relay: url, sessions, spawned }, text };
}

export async function killCommand(name: string, env: Env): Promise<Printed> {
  const killed = await killSession(name, env);
  return {
    value: {
      ok: true,
      session: name,
      killed: true,
      pids: killed.pids,
      ...(killed.worktree === undefined ? {} : { worktree: killed.worktree }),
      ...(killed.scratch === undefined ? {} : { scratch: killed.scratch }),
    },
    text: [`Stopped ${name} (pids ${killed.pids.join(", ")}); confirmed gone.`, ...workspaceLines(killed)].join("\n"),
  };
}
