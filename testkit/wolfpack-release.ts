/**
 * The released Wolfpack as its users have it (issue 38): the registry package
 * `wolfpack-bridge-linux-x64` (a development dependency; linux-x64 only), Wolfpack's own binaries
 * `wolfpack` and `wolfpack-broker`, run the way that never installs a service: a private HOME,
 * `wolfpack setup --non-interactive --defer-service-restart` writing its config there, the broker
 * beside it, then `WOLFPACK_SERVICE=1 wolfpack` in the foreground on loopback. Stopped by pid, its
 * HOME removed. Plain `wolfpack` with a config would install a systemd service: never run here.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { REPO_ROOT } from "./relay-process.ts";

/** Where the registry package puts Wolfpack's binaries. */
export const WOLFPACK_PACKAGE_DIR = join(REPO_ROOT, "node_modules", "wolfpack-bridge-linux-x64");
/** The release the tests are written against. */
export const WOLFPACK_RELEASE = "1.6.22";
/** How long Wolfpack may take to answer its health check after it was started, in milliseconds. */
const WOLFPACK_READY_MS = 30_000;
/** How often its health is polled while it starts, in milliseconds. */
const WOLFPACK_POLL_MS = 100;
/** How long a stopped Wolfpack may take to exit before it is killed, in milliseconds. */
const WOLFPACK_EXIT_MS = 5_000;

/** Why the released Wolfpack cannot run here, or undefined when it can. */
export function wolfpackMissing(): string | undefined {
  if (process.platform !== "linux" || process.arch !== "x64")
    return `the released Wolfpack (wolfpack-bridge-linux-x64) runs on linux-x64 only, not ${process.platform}-${process.arch}`;
  if (!existsSync(join(WOLFPACK_PACKAGE_DIR, "wolfpack")))
    return "the development dependency wolfpack-bridge-linux-x64 is not installed (npm install)";
  return undefined;
}

export interface WolfpackRelease {
  readonly url: string;
  readonly port: number;
  readonly home: string;
  /** Its log (stdout and stderr of the server). */
  log(): string;
  stop(): Promise<void>;
}

function binary(name: "wolfpack" | "wolfpack-broker"): string {
  const path = join(WOLFPACK_PACKAGE_DIR, name);
  // The registry tarball keeps no mode bits: make it runnable (our own node_modules).
  chmodSync(path, 0o755);
  return path;
}

async function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const deadline = Date.now() + WOLFPACK_EXIT_MS;
  while (child.exitCode === null && child.signalCode === null && Date.now() < deadline) await sleep(WOLFPACK_POLL_MS);
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}

/** Starts the released Wolfpack on loopback `port` with a private HOME; resolves once it answers its health check. */
export async function startWolfpackRelease(port: number): Promise<WolfpackRelease> {
  const home = mkdtempSync(join(tmpdir(), "pi-tasks-wolfpack-home-"));
  const devDir = join(home, "projects");
  mkdirSync(devDir);
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, WOLFPACK_SERVICE: "1" };
  const setup = spawnSync(
    binary("wolfpack"),
    ["setup", "--non-interactive", "--defer-service-restart", "--dev-dir", devDir, "--port", String(port)],
    { env, encoding: "utf8" },
  );
  if (setup.status !== 0) throw new Error(`wolfpack setup failed (${setup.status}): ${setup.stderr}${setup.stdout}`);
  let output = "";
  const keep = (child: ChildProcess) => {
    child.stdout?.on("data", (data: Buffer) => (output += data.toString("utf8")));
    child.stderr?.on("data", (data: Buffer) => (output += data.toString("utf8")));
    return child;
  };
  const broker = keep(spawn(binary("wolfpack-broker"), [], { env, stdio: ["ignore", "pipe", "pipe"] }));
  await sleep(WOLFPACK_POLL_MS);
  const server = keep(spawn(binary("wolfpack"), [], { env, stdio: ["ignore", "pipe", "pipe"] }));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    await exited(server);
    await exited(broker);
    rmSync(home, { recursive: true, force: true });
  };
  const deadline = Date.now() + WOLFPACK_READY_MS;
  while (Date.now() < deadline) {
    const healthy = await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(1_000) }).then(
      (response) => response.ok,
      () => false,
    );
    if (healthy) return { url, port, home, log: () => output, stop };
    if (server.exitCode !== null) break;
    await sleep(WOLFPACK_POLL_MS);
  }
  await stop();
  throw new Error(`the released Wolfpack did not answer on ${url}: ${output.slice(-2_000)}`);
}
