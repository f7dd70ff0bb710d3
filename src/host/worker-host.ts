/**
 * The worker holder: runs one Pi in RPC mode and keeps its stdin open (Pi exits when RPC stdin
 * closes), so a spawned worker outlives the Pi or command that spawned it. Pi's RPC stream goes to
 * `<log>.rpc.jsonl` as it is, and as a readable transcript (transcript.ts) to the log the person
 * reads; Pi's stderr goes to the transcript too. SIGTERM/SIGINT close Pi's stdin (Pi shuts down
 * cleanly), then kill it after a grace period; so does the end of the Pi that spawned the worker,
 * unless it was spawned to be kept (`owner` absent).
 *
 * Run as `dist/worker-host.js <json: {command: string[], log}>` (src/bin/worker-host.ts), started
 * in the worker's project directory with the worker's environment (never on the command line:
 * `ps` shows it).
 */
import { spawn } from "node:child_process";
import { createWriteStream, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { workerOwnerPollMs, workerShutdownGraceMs } from "../protocol/limits.ts";
import { withoutRuntimeVariables } from "./runtime.ts";
import { piPidFile, rpcLogFile } from "./spawned.ts";
import { isAlive } from "../platform/processes.ts";
import { transcriptLines } from "./transcript.ts";

export interface HostConfig {
  readonly command: readonly string[];
  readonly log: string;
  /** The pid of the Pi that spawned this worker and did not keep it: when it is gone, the worker stops. */
  readonly owner?: number;
}

/** Runs Pi until it exits; resolves with its exit code (1 when it could not start or was killed). */
export function hold(config: HostConfig): Promise<number> {
  const transcript = createWriteStream(config.log, { flags: "a" });
  const rpc = createWriteStream(rpcLogFile(config.log), { flags: "a" });
  const [command, ...args] = config.command;
  const pi = spawn(command!, args, { cwd: process.cwd(), env: withoutRuntimeVariables(process.env), stdio: ["pipe", "pipe", "pipe"] });
  return new Promise((resolve) => {
    pi.once("error", (error) => {
      transcript.write(`pi-tasks: ${command} could not be started (${error.message})\n`);
      resolve(1);
    });
    pi.once("spawn", () => writeFileSync(piPidFile(config.log), String(pi.pid)));
    createInterface({ input: pi.stdout!, crlfDelay: Number.POSITIVE_INFINITY }).on("line", (line) => {
      rpc.write(`${line}\n`);
      for (const text of transcriptLines(line)) transcript.write(`${text}\n`);
    });
    createInterface({ input: pi.stderr! }).on("line", (line) => transcript.write(`[pi stderr] ${line}\n`));
    pi.once("close", (code, signal) => {
      transcript.write(`pi-tasks: Pi ended (${signal === null ? `exit code ${code}` : `signal ${signal}`})\n`);
      resolve(code ?? 1);
    });
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      pi.stdin!.end();
      setTimeout(() => pi.kill("SIGKILL"), workerShutdownGraceMs).unref();
    };
    // Writing to a Pi that already exited fails; its exit is reported by "close" above.
    pi.stdin!.on("error", () => undefined);
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    const owner = config.owner;
    if (owner !== undefined) {
      const watch = setInterval(() => {
        if (isAlive(owner)) return;
        clearInterval(watch);
        transcript.write(`pi-tasks: the Pi that spawned this worker (pid ${owner}) is gone; stopping\n`);
        stop();
      }, workerOwnerPollMs);
      pi.once("close", () => clearInterval(watch));
    }
  });
}
