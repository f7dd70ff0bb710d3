/**
 * The `pi-tasks` command line as a subprocess (`bun src/bin/pi-tasks.ts …`), for tests/cli.
 *
 * A `CliSandbox` owns one temporary directory (state dir, project dir, Pi agent dir) and
 * a unique marker variable that every process the CLI starts inherits (holder, Pi, stand-ins, the
 * demo's relay and origin). `markedProcesses()` finds them through `/proc/<pid>/environ`, so a test
 * can show that nothing it started is left, and `cleanup()` stops them by pid even when a test
 * failed half way — after the teardown check of the worker Pis its runs spawned
 * (tests/helpers/teardown-check.ts), unless a run replaced Pi with a stand-in.
 */
import type { Subprocess } from "bun";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../testkit/async.ts";
import { runToExit } from "./run-to-exit.ts";
import { checkWorkers } from "./teardown-check.ts";
import { BUN, CLI_ENTRY, REPO_ROOT, type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";

export { BUN, CLI_ENTRY, REPO_ROOT };

/** The scripted worker scenario the demo uses (answers questions, writes hello.txt). */
export const DEMO_WORKER_SCRIPT = join(REPO_ROOT, "src", "demo", "scenarios", "demo-worker.ts");

/** Deadline of one CLI run in these tests (a run that needs longer is a failure). */
export const CLI_RUN_TIMEOUT_MS = 45_000;

const MARKER_VARIABLE = "PI_TASKS_CLI_TEST_MARKER";

/** Variables of the test runner's environment the CLI must not see (they would redirect it). */
const SCRUBBED = [
  "PI_TASKS_RELAY_URL",
  "PI_TASKS_HOME",
  "PI_TASKS_EMBEDDED_RELAY",
  "PI_TASKS_PI_CLI",
  "PI_TASKS_TEST_SCRIPT",
  "PI_TASKS_DEMO_TARGET",
  "PI_TASK_WORKER",
  "WOLFPACK_PORT",
  "WOLFPACK_SESSION_NAME",
  "WOLFPACK_JWT_SECRET",
  "WOLFPACK_JWT_ISSUER",
  "WOLFPACK_JWT_AUDIENCE",
  "PI_CODING_AGENT_DIR",
  "PI_SESSION_ID",
  "PI_TASKS_RUNTIME",
];

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly elapsedMs: number;
}

export interface CliRunOptions {
  readonly env?: Record<string, string | undefined>;
  readonly timeoutMs?: number;
  /** Called every few ms while the command runs (e.g. to catch a file that exists only meanwhile). */
  readonly whileRunning?: () => void;
  readonly command?: readonly string[];
}

/** The one JSON object a `--json` run printed (fails when stdout is not exactly one JSON line). */
export function jsonOf(run: CliRun): any {
  const lines = run.stdout.split("\n").filter((line) => line.trim().length > 0);
  if (lines.length !== 1)
    throw new Error(`expected one JSON line on stdout, got ${JSON.stringify(run.stdout)} (stderr ${JSON.stringify(run.stderr)})`);
  return JSON.parse(lines[0]!);
}

/** A process's state letter from Linux `/proc/<pid>/stat` (`R`, `S`, `Z` for a zombie…), or undefined. */
export function processState(pid: number): string | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.charAt(stat.lastIndexOf(")") + 2) || undefined;
  } catch {
    return undefined;
  }
}

/** Whether a process exists and is not a zombie. */
export function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const state = processState(pid);
  return state !== undefined && state !== "Z";
}

export interface MarkedProcess {
  readonly pid: number;
  readonly args: string;
  readonly cwd: string;
}

/** Live processes whose environment carries `marker`. */
export function markedProcesses(marker: string): MarkedProcess[] {
  const needle = `${MARKER_VARIABLE}=${marker}`;
  const found: MarkedProcess[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      if (!environ.includes(needle) || !running(pid)) continue;
      const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
      let cwd = "";
      try {
        cwd = readlinkSync(`/proc/${pid}/cwd`);
      } catch {
        // Gone meanwhile.
      }
      found.push({ pid, args, cwd });
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

export interface CliSandbox {
  readonly dir: string;
  readonly stateDir: string;
  readonly projectDir: string;
  /** `PI_CODING_AGENT_DIR` of the sandbox's Pi processes (isolated from the user's). */
  readonly agentDir: string;
  readonly marker: string;
  /** The relay of this sandbox (started by `withRelay()`). */
  readonly relay: RelayProcess | undefined;
  /** The environment every CLI run of this sandbox gets. */
  env(extra?: Record<string, string | undefined>): Record<string, string>;
  withRelay(): Promise<RelayProcess>;
  run(args: readonly string[], options?: CliRunOptions): Promise<CliRun>;
  /** The spawned-worker records under the state dir (file names). */
  spawnedRecords(): string[];
  /** Processes this sandbox's CLI runs started that are still alive. */
  processes(): MarkedProcess[];
  /** Stops every marked process and the relay, removes the directory. */
  cleanup(): Promise<void>;
}

export function createCliSandbox(prefix = "pi-tasks-cli-"): CliSandbox {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const stateDir = join(dir, "state");
  const projectDir = join(dir, "project");
  const agentDir = join(dir, "agent");
  for (const path of [projectDir, agentDir]) mkdirSync(path, { recursive: true });
  const marker = crypto.randomUUID();
  let relay: RelayProcess | undefined;
  const children = new Set<Subprocess>();
  /** Whether a run replaced Pi with a stand-in (`PI_TASKS_PI_CLI`): its "worker logs" are no Pi's. */
  let standIn = false;

  function env(extra: Record<string, string | undefined> = {}): Record<string, string> {
    const base: Record<string, string | undefined> = { ...process.env };
    for (const name of SCRUBBED) delete base[name];
    const merged: Record<string, string | undefined> = {
      ...base,
      WOLFPACK_JWT_SECRET: "",
      PI_TASKS_HOME: stateDir,
      PI_CODING_AGENT_DIR: agentDir,
      PI_OFFLINE: "1",
      PI_SKIP_VERSION_CHECK: "1",
      PI_TELEMETRY: "0",
      [MARKER_VARIABLE]: marker,
      ...extra,
    };
    return Object.fromEntries(Object.entries(merged).filter((entry): entry is [string, string] => entry[1] !== undefined));
  }

  async function run(args: readonly string[], options: CliRunOptions = {}): Promise<CliRun> {
    const timeoutMs = options.timeoutMs ?? CLI_RUN_TIMEOUT_MS;
    if (options.env?.PI_TASKS_PI_CLI !== undefined) standIn = true;
    const exited = await runToExit([...(options.command ?? [BUN, CLI_ENTRY]), ...args], {
      cwd: REPO_ROOT,
      env: env(options.env),
      timeoutMs,
      whileRunning: options.whileRunning,
      onSpawn(child) {
        children.add(child);
        void child.exited.then(() => children.delete(child));
      },
    });
    const result = { code: exited.code, stdout: exited.stdout, stderr: exited.stderr, elapsedMs: exited.exitedAt - exited.startedAt };
    if (exited.killed) throw new Error(`pi-tasks ${args.join(" ")} did not finish within ${timeoutMs} ms: ${JSON.stringify(result)}`);
    return result;
  }

  function spawnedRecords(): string[] {
    try {
      return readdirSync(join(stateDir, "spawned")).filter((name) => name.endsWith(".json"));
    } catch {
      return [];
    }
  }

  return {
    dir,
    stateDir,
    projectDir,
    agentDir,
    marker,
    get relay() {
      return relay;
    },
    env,
    async withRelay() {
      relay ??= await startRelayProcess();
      return relay;
    },
    run,
    spawnedRecords,
    processes: () => markedProcesses(marker),
    async cleanup() {
      // The worker Pis its runs spawned, before anything is killed (tests/helpers/teardown-check.ts).
      if (!standIn) await checkWorkers(stateDir, { final: true, waitMs: 0 });
      for (const child of children) child.kill("SIGKILL");
      for (let attempt = 0; attempt < 3; attempt += 1) {
        const left = markedProcesses(marker);
        if (left.length === 0) break;
        for (const { pid } of left) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // Gone meanwhile.
          }
        }
        await eventually(() => markedProcesses(marker).length === 0, 2_000, 50);
      }
      await relay?.stop("SIGKILL").catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
