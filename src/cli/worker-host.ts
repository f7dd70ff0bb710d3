#!/usr/bin/env bun
/**
 * The worker holder: runs one Pi in RPC mode and keeps its stdin open (Pi exits when RPC stdin
 * closes), so a spawned worker outlives `pi-tasks spawn`. Pi's stdout and stderr go to the log
 * file. SIGTERM/SIGINT close Pi's stdin (Pi shuts down cleanly), then kill it after a grace period.
 *
 * Usage (internal): bun worker-host.ts <json: {command: string[], cwd, env, log}>
 */
import { openSync, writeFileSync } from "node:fs";
import { workerShutdownGraceMs } from "../protocol/limits.ts";
import { piPidFile } from "./spawned.ts";

interface HostConfig {
  readonly command: readonly string[];
  readonly cwd: string;
  readonly env: Record<string, string>;
  readonly log: string;
}

const config = JSON.parse(process.argv[2] ?? "{}") as HostConfig;
const log = openSync(config.log, "a");
const pi = Bun.spawn([...config.command], { cwd: config.cwd, env: config.env, stdin: "pipe", stdout: log, stderr: log });
// `kill` confirms that Pi itself is gone, not only this holder.
writeFileSync(piPidFile(config.log), String(pi.pid));

let stopping = false;
function stop(): void {
  if (stopping) return;
  stopping = true;
  try {
    pi.stdin.end();
  } catch {
    // Pi already gone.
  }
  setTimeout(() => pi.kill("SIGKILL"), workerShutdownGraceMs).unref();
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

process.exitCode = await pi.exited;
