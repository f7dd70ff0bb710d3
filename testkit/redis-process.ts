/**
 * A real `redis-server` (Debian package `redis-server`) for tests and bench: on a free loopback
 * port, persistence off (`--save "" --appendonly no`), its working directory a fresh temporary
 * directory, ready once it answers PING. `kill()` is a crash (SIGKILL), `stop()` a clean shutdown,
 * `restart()` a new, empty Redis on the same port (what a restart without persistence is), `pause()`
 * / `resume()` a Redis that hangs with its data (SIGSTOP / SIGCONT). A server still running when
 * the test process exits is killed.
 *
 * ```ts
 * const redis = await startRedis();          // throws, naming the package, when it is missing
 * const relay = await startRelayProcess({ args: ["--store", redis.url] });
 * await redis.kill();  await redis.restart();
 * await redis.stop();
 * ```
 */
import { type Subprocess, spawn } from "bun";
import { RedisClient } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { requirePackageBinary } from "./debian-package.ts";
import { freePort } from "./relay-process.ts";

export const REDIS_BINARY = "redis-server";
/** The Debian package that provides `redis-server`. */
export const REDIS_PACKAGE = "redis-server";
/** A started server must answer PING within this time. */
const REDIS_READY_TIMEOUT_MS = 5_000;
/** How often start-up asks whether it answers yet. */
const REDIS_READY_POLL_MS = 20;
/** A SIGTERM'd server that has not exited within this time is killed. */
const REDIS_STOP_GRACE_MS = 2_000;

/** `redis-server` arguments of a memory-only Redis (no RDB, no AOF) working in `dir`: what the relay requires. */
export function memoryOnlyArgs(dir: string): string[] {
  return ["--save", "", "--appendonly", "no", "--dir", dir];
}

export interface RedisProcessOptions {
  /** `--requirepass` (and in `url`). */
  readonly password?: string;
  /** Extra `redis-server` arguments (e.g. `["--save", "60 1"]` to make it persist). */
  readonly args?: readonly string[];
}

export interface RedisProcess {
  /** `redis://127.0.0.1:PORT` (with the password, when one is set). */
  readonly url: string;
  /** The same without the password. */
  readonly plainUrl: string;
  readonly port: number;
  /** SIGKILL (a crash: everything in it is gone); resolves once it exited. */
  kill(): Promise<void>;
  /** A new, empty server on the same port (kills the running one first). */
  restart(): Promise<void>;
  /** SIGSTOP: the server holds its data and connections but answers nothing (a hung or partitioned Redis). */
  pause(): void;
  /** SIGCONT after `pause()`. */
  resume(): void;
  /** SIGTERM (SIGKILL after a grace), then removes its directory. */
  stop(): Promise<void>;
  /** Sends one command on a fresh connection (test set-up and inspection). */
  command(name: string, args?: readonly string[]): Promise<unknown>;
}

const live = new Set<Subprocess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const child of live) child.kill("SIGKILL");
  });
}

async function answersPing(url: string): Promise<boolean> {
  const client = new RedisClient(url, { autoReconnect: false, enableOfflineQueue: false, connectionTimeout: REDIS_READY_POLL_MS * 10 });
  try {
    await client.connect();
    return (await client.send("PING", [])) === "PONG";
  } catch {
    return false;
  } finally {
    client.close();
  }
}

type RedisChild = Subprocess<"ignore", "ignore", "pipe">;

/** Where one server runs and how it is started: its binary, port, directory, URL and options. */
interface RedisPlace {
  readonly binary: string;
  readonly port: number;
  readonly dir: string;
  readonly url: string;
  readonly options: RedisProcessOptions;
  /** Everything every launch on this port wrote to stderr (for the start-up error). */
  stderr: string;
}

/**
 * Spawns `redis-server` on the place's port (handing the child to `spawned` at once) and waits
 * until it answers PING, killing it when it does not in time.
 */
async function launchRedis(place: RedisPlace, spawned: (child: RedisChild) => void): Promise<void> {
  const { binary, port, dir, url, options } = place;
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    ...memoryOnlyArgs(dir),
    ...(options.password === undefined ? [] : ["--requirepass", options.password]),
    ...(options.args ?? []),
  ];
  const started = spawn([binary, ...args], { stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  spawned(started);
  live.add(started);
  void started.exited.then(() => live.delete(started));
  void new Response(started.stderr).text().then((text) => (place.stderr += text));
  const deadline = Date.now() + REDIS_READY_TIMEOUT_MS;
  while (!(await answersPing(url))) {
    if (started.exitCode !== null || Date.now() > deadline) {
      started.kill("SIGKILL");
      throw new Error(
        `redis-server did not answer PING on port ${port} within ${REDIS_READY_TIMEOUT_MS} ms (exit ${started.exitCode}): ${place.stderr}`,
      );
    }
    await Bun.sleep(REDIS_READY_POLL_MS);
  }
}

/** SIGTERM (after SIGCONT, in case it is paused), SIGKILL after the grace; resolves once it exited. */
async function terminate(running: RedisChild): Promise<void> {
  running.kill("SIGCONT");
  running.kill("SIGTERM");
  const timer = setTimeout(() => running.kill("SIGKILL"), REDIS_STOP_GRACE_MS);
  await running.exited;
  clearTimeout(timer);
}

export async function startRedis(options: RedisProcessOptions = {}): Promise<RedisProcess> {
  const binary = requirePackageBinary(REDIS_BINARY, REDIS_PACKAGE);
  installExitHook();
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-redis-"));
  const port = freePort();
  const plainUrl = `redis://127.0.0.1:${port}`;
  const url = options.password === undefined ? plainUrl : `redis://:${encodeURIComponent(options.password)}@127.0.0.1:${port}`;
  const place: RedisPlace = { binary, port, dir, url, options, stderr: "" };
  let child: RedisChild | undefined;

  const launch = () =>
    launchRedis(place, (started) => {
      child = started;
    });

  async function kill(): Promise<void> {
    const running = child;
    child = undefined;
    if (running === undefined || running.exitCode !== null) return;
    running.kill("SIGKILL");
    await running.exited;
  }

  await launch();
  return {
    url,
    plainUrl,
    port,
    kill,
    async restart() {
      await kill();
      await launch();
    },
    pause: () => child?.kill("SIGSTOP"),
    resume: () => child?.kill("SIGCONT"),
    async stop() {
      const running = child;
      child = undefined;
      if (running !== undefined && running.exitCode === null) await terminate(running);
      rmSync(dir, { recursive: true, force: true });
    },
    async command(name, args = []) {
      const client = new RedisClient(url, { autoReconnect: false, enableOfflineQueue: false });
      try {
        await client.connect();
        return await client.send(name, [...args]);
      } finally {
        client.close();
      }
    },
  };
}
