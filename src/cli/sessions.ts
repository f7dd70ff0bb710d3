/**
 * `pi-tasks status NAME`, `pi-tasks list` and `pi-tasks kill NAME`: session control over the relay's
 * session routes, and stopping only workers this CLI spawned (verified gone).
 */
import { TaskError } from "../protocol/errors.ts";
import { relayUrlFromEnv } from "../relay-client/config.ts";
import { relayTransport } from "./spawn.ts";
import { isAlive, listSpawned, loadSpawned } from "./spawned.ts";
import { stopProcess } from "./stop.ts";

export async function sessionStatus(name: string, env: Record<string, string | undefined>, relay?: string): Promise<Record<string, unknown>> {
  const transport = relayTransport(relay ?? relayUrlFromEnv(env), env);
  try {
    const status = await transport.sessionStatus(name);
    const spawned = loadSpawned(env, name);
    return { ok: true, ...status, ...(spawned === undefined ? {} : { spawned: { pid: spawned.pid, alive: isAlive(spawned.pid), log: spawned.log } }) };
  } finally {
    transport.close();
  }
}

export async function sessionList(env: Record<string, string | undefined>, relay?: string): Promise<Record<string, unknown>> {
  const transport = relayTransport(relay ?? relayUrlFromEnv(env), env);
  try {
    const sessions = await transport.sessionList();
    const spawned = listSpawned(env).map((worker) => ({ session: worker.session, pid: worker.pid, alive: isAlive(worker.pid), log: worker.log }));
    return { ok: true, sessions, spawned };
  } finally {
    transport.close();
  }
}

export async function killSession(name: string, env: Record<string, string | undefined>): Promise<Record<string, unknown>> {
  if (loadSpawned(env, name) === undefined) {
    throw new TaskError("SESSION_NOT_OWNED", { message: `pi-tasks did not spawn a session named ${name}; it stops only its own workers.`, details: { session: name } });
  }
  const result = await stopProcess(env, name);
  if (!result.confirmed) {
    throw new TaskError("TASK_ERROR", { message: `The processes of ${name} could not be confirmed gone.`, details: { session: name, pids: result.pids } });
  }
  return { ok: true, session: name, killed: true, pids: result.pids };
}
