#!/usr/bin/env bun
/**
 * The worker holder: runs one Pi in RPC mode and keeps its stdin open (Pi exits when RPC stdin
 * closes), so a spawned worker outlives the Pi or command that spawned it. Pi's stdout and stderr
 * go to the log file. SIGTERM/SIGINT close Pi's stdin (Pi shuts down cleanly), then kill it after a
 * grace period.
 *
 * Usage (internal): bun worker-host.ts <json: {command: string[], log}>, started in the worker's
 * project directory with the worker's environment (never on the command line: `ps` shows it).
 */
import { openSync, writeFileSync } from "node:fs";
import { workerShutdownGraceMs } from "../protocol/limits.ts";
import { piPidFile } from "./spawned.ts";

export interface HostConfig {
  readonly command: readonly string[];
  readonly log: string;
}

async function hold(config: HostConfig): Promise<number> {
  const log = openSync(config.log, "a");
  const pi = Bun.spawn([...config.command], { cwd: process.cwd(), env: process.env, stdin: "pipe", stdout: log, stderr: log });
  // `kill` confirms that Pi itself is gone, not only this holder.
  writeFileSync(piPidFile(config.log), String(pi.pid));
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    try {
      pi.stdin.end();
    } catch {
      // Pi already gone.
    }
    setTimeout(() => pi.kill("SIGKILL"), workerShutdownGraceMs).unref();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  return pi.exited;
}

if (import.meta.main) process.exitCode = await hold(JSON.parse(process.argv[2] ?? "{}") as HostConfig);
