/**
 * The embedded relay: when a Pi session starts and no relay answers at the default loopback URL,
 * the first Pi starts `pi-tasks relay` on that port as a detached process and later Pis use it.
 *
 * - Only for the default loopback relay (`WOLFPACK_PORT` or 18790), never for `PI_TASKS_RELAY_URL`,
 *   and never with `PI_TASKS_EMBEDDED_RELAY=0`. Anything answering on the port (Wolfpack, a user's
 *   own relay, another service) means no relay is started.
 * - One per port: the starter holds `$PI_TASKS_HOME/relays/<port>.lock` (the shared lock file of
 *   src/trust/file-lock.ts, naming its pid) while it starts the relay; others wait for the relay to
 *   answer. A lock whose pid is gone is stale and taken over at once.
 * - The relay's output goes to `$PI_TASKS_HOME/relays/<port>.log`; `<port>.json` records its pid,
 *   so `/tasks` can say that pi-tasks started it and `pi-tasks relay stop` can stop it.
 * - Only session start decides: a relay that goes away later is an outage, never restarted here.
 */
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { RELAY_PROFILE, relayProbeMs, relayReadyTimeoutMs, relayStartPollMs } from "../protocol/limits.ts";
import { isRecord } from "../protocol/validate.ts";
import { type Env, piTasksHome, type RelayConfig } from "../relay-client/config.ts";
import { lockHeldByLiveProcess, tryLock } from "../trust/file-lock.ts";
import { CLI_BUNDLE, ownRuntime } from "./runtime.ts";
import { isAlive } from "./spawned.ts";
import { stopPids } from "./stop.ts";

/** What a Pi session uses as its relay, and how it came to be. */
export interface RelayInUse {
  readonly url: string;
  /**
   * - `configured`: the user named it (`PI_TASKS_RELAY_URL`);
   * - `running`: something already answered at the default URL;
   * - `started`: this process started it;
   * - `absent`: nothing answers and pi-tasks may not (opted out) or could not start one.
   */
  readonly state: "configured" | "running" | "started" | "absent";
  /** The record of a relay pi-tasks started on this port (by this or an earlier Pi). */
  readonly record?: EmbeddedRelayRecord;
  /** Why nothing was started, or why starting failed. */
  readonly problem?: string;
}

export interface EmbeddedRelayRecord {
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  readonly log: string;
  readonly startedAt: string;
  /** The pid of the Pi process that started it. */
  readonly startedBy: number;
}

export interface EnsureRelayOptions {
  readonly env: Env;
  readonly config: RelayConfig;
  /** Fetch for the probes (tests). */
  readonly fetch?: typeof fetch;
}

function relaysDir(env: Env): string {
  const dir = join(piTasksHome(env), "relays");
  mkdirSync(dir, { recursive: true });
  return dir;
}

const paths = (env: Env, port: number) => {
  const dir = relaysDir(env);
  return { lock: join(dir, `${port}.lock`), record: join(dir, `${port}.json`), log: join(dir, `${port}.log`) };
};

/** The record of a relay pi-tasks started on `port`, when its process is still alive. */
export function embeddedRelayRecord(env: Env, port: number): EmbeddedRelayRecord | undefined {
  try {
    const value: unknown = JSON.parse(readFileSync(paths(env, port).record, "utf8"));
    if (!isRecord(value) || typeof value.pid !== "number") return undefined;
    const record = value as unknown as EmbeddedRelayRecord;
    return isAlive(record.pid) ? record : undefined;
  } catch {
    return undefined;
  }
}

/** Whether anything answers HTTP at `url` (a relay or not); a refused connection answers false. */
async function answers(url: string, fetcher: typeof fetch): Promise<{ answered: boolean; relay: boolean }> {
  try {
    const response = await fetcher(`${url}/api/task-relay/profile`, { signal: AbortSignal.timeout(relayProbeMs) });
    const body: unknown = await response.json().catch(() => undefined);
    return { answered: true, relay: isRecord(body) && body.profile === RELAY_PROFILE };
  } catch (error) {
    // A timeout means something holds the port but does not answer: do not start another.
    const name = error instanceof Error ? error.name : "";
    return { answered: name === "TimeoutError", relay: false };
  }
}

async function waitForRelay(url: string, fetcher: typeof fetch, alive: () => boolean): Promise<boolean> {
  const deadline = Date.now() + relayReadyTimeoutMs;
  while (Date.now() < deadline && alive()) {
    if ((await answers(url, fetcher)).relay) return true;
    await sleep(relayStartPollMs);
  }
  return (await answers(url, fetcher)).relay;
}

/** A relay process started detached: its pid, or why it could not start; `exit()` tells whether it already ended. */
interface StartedRelay {
  readonly pid?: number;
  /** Resolves with the reason when the process could not start (a missing or unexecutable runtime). */
  readonly failed: Promise<string>;
  /** The exit code or signal once it ended, else undefined. */
  exit(): string | undefined;
}

/**
 * Starts `pi-tasks relay` detached on our runtime (runtime.ts). Every failure of the child — it
 * could not start, it crashed — is observed here and reported, never left to become an uncaught
 * `error` event in Pi.
 */
function startDetached(env: Env, port: number, log: string): StartedRelay {
  const runtime = ownRuntime(env);
  const out = openSync(log, "a");
  try {
    const child = spawn(runtime.command, [CLI_BUNDLE, "relay", "--port", String(port)], {
      detached: true,
      stdio: ["ignore", out, out],
      env: { ...Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined)), ...runtime.env },
    });
    let ended: string | undefined;
    const failed = new Promise<string>((resolve) => {
      child.once("error", (error) => resolve(`${runtime.command} could not be started (${error.message})`));
    });
    child.once("exit", (code, signal) => {
      ended = signal === null ? `exit code ${code}` : `signal ${signal}`;
    });
    child.unref();
    return { ...(child.pid === undefined ? {} : { pid: child.pid }), failed, exit: () => ended };
  } finally {
    closeSync(out);
  }
}

/** The relay this Pi session will use, starting the embedded relay when the rules allow it. */
export async function ensureRelay(options: EnsureRelayOptions): Promise<RelayInUse> {
  const { env, config } = options;
  const fetcher = options.fetch ?? fetch;
  if (config.source === "PI_TASKS_RELAY_URL" || config.port === undefined) return { url: config.url, state: "configured" };
  const port = config.port;
  const existing = () => embeddedRelayRecord(env, port);
  const probe = await answers(config.url, fetcher);
  if (probe.answered) {
    const record = existing();
    const problem = probe.relay ? undefined : `something answers at ${config.url}, but it is not a ${RELAY_PROFILE} relay`;
    return { url: config.url, state: "running", ...(record === undefined ? {} : { record }), ...(problem === undefined ? {} : { problem }) };
  }
  if (!config.embedded) return { url: config.url, state: "absent", problem: "no relay answers and PI_TASKS_EMBEDDED_RELAY=0" };
  const files = paths(env, port);
  // The start lock for the port; a lock whose holder is gone is taken over at once.
  const lock = tryLock(files.lock, { staleMs: 0 });
  if (lock === undefined) {
    // Another Pi is starting it: use it once it answers.
    const up = await waitForRelay(config.url, fetcher, () => lockHeldByLiveProcess(files.lock));
    const record = existing();
    return up
      ? { url: config.url, state: "running", ...(record === undefined ? {} : { record }) }
      : { url: config.url, state: "absent", problem: "another Pi was starting the relay, and it did not answer" };
  }
  try {
    const started = startDetached(env, port, files.log);
    if (started.pid === undefined) return { url: config.url, state: "absent", problem: await started.failed };
    const pid = started.pid;
    const record: EmbeddedRelayRecord = { pid, port, url: config.url, log: files.log, startedAt: new Date().toISOString(), startedBy: process.pid };
    writeFileSync(files.record, `${JSON.stringify(record, null, 2)}\n`);
    if (await waitForRelay(config.url, fetcher, () => started.exit() === undefined && isAlive(pid))) return { url: config.url, state: "started", record };
    // It did not come up (port taken in the meantime, or it failed): someone else may answer now.
    const again = await answers(config.url, fetcher);
    if (again.relay) return { url: config.url, state: "running" };
    rmSync(files.record, { force: true });
    const ended = started.exit();
    return {
      url: config.url,
      state: "absent",
      problem: ended === undefined ? `the relay pi-tasks started did not answer within ${relayReadyTimeoutMs} ms (see ${files.log})` : `the relay pi-tasks started ended at once (${ended}; see ${files.log})`,
    };
  } catch (error) {
    return { url: config.url, state: "absent", problem: toTaskError(error).message };
  } finally {
    lock.release();
  }
}

/** Stops a relay pi-tasks started on `port` (by its record); false when there is none. */
export async function stopEmbeddedRelay(env: Env, port: number): Promise<{ stopped: boolean; pid?: number }> {
  const record = embeddedRelayRecord(env, port);
  if (record === undefined) return { stopped: false };
  const confirmed = await stopPids([record.pid]);
  if (!confirmed) throw new TaskError("TASK_ERROR", { message: `The relay process ${record.pid} could not be confirmed gone.`, details: { pid: record.pid, port } });
  rmSync(paths(env, port).record, { force: true });
  return { stopped: true, pid: record.pid };
}
