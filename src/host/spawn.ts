/**
 * `pi-tasks spawn --task-worker --name NAME --project-dir DIR [--model M] [--relay URL]
 *  [--readiness-timeout-ms 30000] [--script MODULE] --json`
 *
 * Starts a real Pi worker (RPC mode under Bun, `PI_TASK_WORKER=1`, `WOLFPACK_SESSION_NAME=NAME`,
 * this extension loaded) held open by a detached holder process, waits until its endpoint is
 * registered, and reports `{session, pid, taskEndpoint, log, relay, projectDir}`.
 *
 * - Preflight problems fail with `TASK_WORKER_PREFLIGHT_FAILED` before anything starts.
 * - A worker that does not register in time fails with `TASK_WORKER_NOT_READY`, reporting
 *   `createdSession` and `cleanup` (it is stopped, and whether it is confirmed gone).
 */
import { spawn as spawnProcess, spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { isUuid } from "../protocol/endpoint.ts";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import {
  cliRelayCheckMs,
  maxWireIdChars,
  workerReadinessPollMs,
  defaultWorkerReadinessTimeoutMs,
  diagnosticTailChars,
  maxWorkerReadinessTimeoutMs,
  minWorkerReadinessTimeoutMs,
} from "../protocol/limits.ts";
import { RELAY_PROFILE } from "../protocol/names.ts";
import type { Grant, TaskEndpoint } from "../protocol/schemas.ts";
import { authFromEnv } from "../relay-client/auth.ts";
import { normaliseRelayUrl, relayUrlFromEnv } from "../relay-client/config.ts";
import { createRelayTransport, type RelayTransport } from "../relay-client/transport.ts";
import { piCommand, piRpcArgs, scriptedEnv } from "./pi-cli.ts";
import { ownRuntime, WORKER_HOST_BUNDLE } from "./runtime.ts";
import { loadSpawned, logDir, saveSpawned, scriptedAgentDir, workerSessionDir } from "./spawned.ts";
import { isAlive } from "../platform/processes.ts";
import { stopProcess } from "./stop.ts";
import type { HostConfig } from "./worker-host.ts";
import type { ScratchCopy } from "../workspace/scratch.ts";
import { type Worktree, WORKTREE_BASE_ENV, WORKTREE_BRANCH_ENV } from "../workspace/worktree.ts";

export interface SpawnOptions {
  readonly name: string;
  readonly projectDir: string;
  readonly model?: string;
  readonly script?: string;
  readonly relay?: string;
  readonly readinessTimeoutMs?: number;
  /** The pid of the Pi this worker stops with (absent: it runs until stopped). */
  readonly owner?: number;
  /** The pid of the Pi that spawns it (recorded; the fan-out cap counts its workers). */
  readonly spawner?: number;
  /** A specialist started for a send by name (recorded: the pool stops it when idle too long). */
  readonly pooled?: boolean;
  /** The worker's own worktree (made by the caller; recorded, and named in the worker's environment). */
  readonly worktree?: Worktree;
  /** The worker's scratch copy of a project outside git (made by the caller; recorded). */
  readonly scratch?: ScratchCopy;
  /** Extra instructions appended to the worker's system prompt (a profile's), and the profile's name and grant (recorded). */
  readonly profile?: { readonly name: string; readonly instructions: string; readonly grant?: Grant };
  /** Check that Pi knows `model` (default true; the origin's own model needs no check). */
  readonly checkModel?: boolean;
  readonly env: Record<string, string | undefined>;
}

export interface SpawnResult {
  readonly ok: true;
  readonly session: string;
  readonly pid: number;
  readonly taskEndpoint: TaskEndpoint;
  readonly log: string;
  readonly relay: string;
  readonly projectDir: string;
  /** The pid of the Pi it stops with; absent when it was kept. */
  readonly owner?: number;
}

const MODEL_PATTERN = /^[^/\s]+\/\S+$/;

function preflight(check: string, problem: string, details: Record<string, unknown> = {}): TaskError {
  return new TaskError("TASK_WORKER_PREFLIGHT_FAILED", {
    message: `Worker preflight failed (${check}): ${problem}`,
    details: { check, problem, ...details },
  });
}

export function relayTransport(url: string, env: Record<string, string | undefined>): RelayTransport {
  const auth = authFromEnv(env, url);
  return createRelayTransport({ baseUrl: url, requestTimeoutMs: cliRelayCheckMs, ...(auth === undefined ? {} : { auth }) });
}

/** Whether the configured Pi lists `provider/id` among its available models. */
function modelAvailable(model: string, env: Record<string, string | undefined>): boolean {
  const [provider, id] = [model.slice(0, model.indexOf("/")), model.slice(model.indexOf("/") + 1)];
  const [command, ...prefix] = piCommand(env);
  const listed = spawnSync(command!, [...prefix, "--list-models", id], {
    env: env as NodeJS.ProcessEnv,
    encoding: "utf8",
    timeout: defaultWorkerReadinessTimeoutMs,
  });
  return `${listed.stdout ?? ""}`.split("\n").some((line) => {
    const columns = line.trim().split(/\s+/);
    return columns[0] === provider && columns[1] === id;
  });
}

async function runPreflight(options: SpawnOptions): Promise<{ relay: string; projectDir: string; transport: RelayTransport }> {
  const { env } = options;
  if (options.name.length === 0 || options.name.length > maxWireIdChars)
    throw preflight("name", `--name must have 1 to ${maxWireIdChars} characters`);
  const projectDir = resolve(options.projectDir);
  if (!existsSync(projectDir) || !statSync(projectDir).isDirectory())
    throw preflight("project-dir", `${projectDir} is not a directory`, { projectDir });
  if (options.script !== undefined && !(isAbsolute(options.script) && existsSync(options.script))) {
    throw preflight("script", `${options.script} is not an absolute path to a scenario module`);
  }
  if (options.model !== undefined) {
    if (!MODEL_PATTERN.test(options.model)) throw preflight("model", `--model must be provider/id, got ${options.model}`);
    if (options.checkModel !== false && !modelAvailable(options.model, env))
      throw preflight("model", `Pi has no configured model ${options.model} (see pi --list-models)`, { model: options.model });
  }
  let relay: string;
  try {
    relay = options.relay === undefined ? relayUrlFromEnv(env) : normaliseRelayUrl(options.relay);
  } catch (error) {
    throw preflight("relay", toTaskError(error).message);
  }
  const transport = relayTransport(relay, env);
  try {
    const profile = await transport.profile();
    if (profile.profile !== RELAY_PROFILE) throw new TaskError("RELAY_PROFILE_REQUIRED");
  } catch (error) {
    transport.close();
    const failure = toTaskError(error);
    throw preflight("relay", `the relay at ${relay} is not reachable as a ${RELAY_PROFILE} relay (${failure.code})`, {
      relay,
      cause: failure.code,
    });
  }
  const existing = await findSession(transport, options.name);
  const recorded = loadSpawned(env, options.name);
  if (existing !== undefined || (recorded !== undefined && isAlive(recorded.pid))) {
    transport.close();
    throw preflight("name", `a session named ${options.name} is already registered or running`, { session: options.name });
  }
  return { relay, projectDir, transport };
}

/** The live endpoint of a session on the relay, or undefined when it is not registered. */
export async function findSession(transport: RelayTransport, session: string): Promise<TaskEndpoint | undefined> {
  try {
    const status = await transport.sessionStatus(session);
    const endpoint = status.taskEndpoint as TaskEndpoint | undefined;
    return endpoint !== undefined && typeof endpoint.relay === "string" && isUuid(endpoint.id)
      ? { relay: endpoint.relay, id: endpoint.id }
      : undefined;
  } catch (error) {
    if (toTaskError(error).code === "CALLER_NOT_FOUND") return undefined;
    throw error;
  }
}

/** Polls the relay until `session` is registered; undefined when it is not within `timeoutMs` or `alive()` turns false. */
export async function awaitRegistration(
  transport: RelayTransport,
  session: string,
  timeoutMs: number,
  alive: () => boolean,
): Promise<TaskEndpoint | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && alive()) {
    const endpoint = await findSession(transport, session).catch(() => undefined);
    if (endpoint !== undefined) return endpoint;
    await sleep(workerReadinessPollMs);
  }
  return undefined;
}

/**
 * Starts the worker holder detached (its command line carries only the command and the log; the
 * environment, which may hold a JWT secret, is its own and passed on to Pi). A holder that cannot
 * start is reported, never left to become an uncaught `error` event.
 */
function startHolder(
  runtime: string,
  config: HostConfig,
  cwd: string,
  env: Record<string, string>,
): Promise<{ pid: number } | { problem: string }> {
  return new Promise((resolve) => {
    const holder = spawnProcess(runtime, [WORKER_HOST_BUNDLE, JSON.stringify(config)], { cwd, env, detached: true, stdio: "ignore" });
    holder.once("error", (error) => resolve({ problem: `${runtime} could not be started (${error.message})` }));
    holder.once("spawn", () => resolve({ pid: holder.pid! }));
    holder.unref();
  });
}

function validateTimeout(value: number | undefined): number {
  const timeout = value ?? defaultWorkerReadinessTimeoutMs;
  if (!Number.isInteger(timeout) || timeout < minWorkerReadinessTimeoutMs || timeout > maxWorkerReadinessTimeoutMs) {
    throw preflight(
      "readiness-timeout-ms",
      `--readiness-timeout-ms must be an integer from ${minWorkerReadinessTimeoutMs} to ${maxWorkerReadinessTimeoutMs}`,
    );
  }
  return timeout;
}

/** Writes a profile's instructions beside the worker's log (private to the user), for Pi's `--append-system-prompt`. */
function profileInstructions(profile: SpawnOptions["profile"], log: string): string | undefined {
  if (profile === undefined || profile.instructions.trim() === "") return undefined;
  const file = `${log.replace(/\.log$/, "")}.instructions.md`;
  writeFileSync(file, profile.instructions, { mode: 0o600 });
  return file;
}

/**
 * How a worker's log ends (its last `diagnosticTailChars` characters), for an error that would
 * otherwise send the person to the log for the cause (a module Pi could not load, a bad model).
 */
function logEnding(log: string): string {
  let text: string;
  try {
    text = readFileSync(log, "utf8").trim();
  } catch {
    return ` Its log ${log} cannot be read.`;
  }
  if (text === "") return ` Its log ${log} is empty.`;
  return ` Its log (${log}) ends:\n${text.slice(-diagnosticTailChars)}`;
}

export async function spawnWorker(options: SpawnOptions): Promise<SpawnResult> {
  const readinessTimeoutMs = validateTimeout(options.readinessTimeoutMs);
  const { relay, projectDir, transport } = await runPreflight(options);
  const log = join(logDir(options.env), `${encodeURIComponent(options.name)}-${Date.now()}.log`);
  const instructions = profileInstructions(options.profile, log);
  const launch = {
    ...(options.model === undefined ? {} : { model: options.model }),
    ...(options.script === undefined ? {} : { script: options.script }),
    ...(instructions === undefined ? {} : { instructions }),
    // Its session apart from the person's, who works in the same folder (`pi --continue` there is theirs).
    sessionDir: workerSessionDir(options.env, options.name),
  };
  const env = {
    ...(Object.fromEntries(Object.entries(options.env).filter(([, value]) => value !== undefined)) as Record<string, string>),
    PI_TASK_WORKER: "1",
    WOLFPACK_SESSION_NAME: options.name,
    PI_TASKS_RELAY_URL: relay,
    ...(options.worktree === undefined
      ? {}
      : { [WORKTREE_BRANCH_ENV]: options.worktree.branch, [WORKTREE_BASE_ENV]: options.worktree.base }),
    ...scriptedEnv(launch),
    ...(launch.script === undefined ? {} : { PI_CODING_AGENT_DIR: scriptedAgentDir(options.env, options.name) }),
  };
  // The holder's command line is visible to every local user (ps): only the command and the log
  // travel there; the environment (which may hold a JWT secret) is the holder's own, passed on to Pi.
  const owner = options.owner === undefined ? {} : { owner: options.owner };
  const spawner = {
    ...(options.spawner === undefined ? {} : { spawner: options.spawner }),
    ...(options.pooled === true ? { pooled: true as const } : {}),
    ...(options.profile === undefined ? {} : { profile: options.profile.name }),
    ...(options.profile?.grant === undefined ? {} : { grant: options.profile.grant }),
    ...(options.worktree === undefined ? {} : { worktree: options.worktree }),
    ...(options.scratch === undefined ? {} : { scratch: options.scratch }),
  };
  const hostConfig: HostConfig = { command: [...piCommand(options.env), ...piRpcArgs(launch)], log, ...owner };
  const runtime = ownRuntime(options.env);
  const started = await startHolder(runtime.command, hostConfig, projectDir, { ...env, ...runtime.env });
  if ("problem" in started) {
    transport.close();
    throw new TaskError("TASK_WORKER_NOT_READY", {
      message: `The worker process could not be started: ${started.problem}.`,
      details: { createdSession: null, log },
    });
  }
  const pid = started.pid;
  // One record, saved at once and again with the endpoint it registered.
  const record = { session: options.name, pid, projectDir, relay, log, createdAt: new Date().toISOString(), ...owner, ...spawner };
  saveSpawned(options.env, record);
  try {
    const endpoint = await awaitRegistration(transport, options.name, readinessTimeoutMs, () => isAlive(pid));
    if (endpoint !== undefined) {
      saveSpawned(options.env, { ...record, taskEndpoint: endpoint });
      return { ok: true, session: options.name, pid, taskEndpoint: endpoint, log, relay, projectDir, ...owner };
    }
    const exited = !isAlive(pid);
    const cleanup = await stopProcess(options.env, options.name);
    throw new TaskError("TASK_WORKER_NOT_READY", {
      message: `${
        exited ? "The worker exited before it registered its endpoint." : `The worker did not register within ${readinessTimeoutMs} ms.`
      }${logEnding(log)}`,
      details: { createdSession: options.name, pid, log, exited, cleanup: { attempted: true, confirmed: cleanup.confirmed } },
    });
  } finally {
    transport.close();
  }
}
