/**
 * The teardown check every real Pi of a test gets, whether or not the test asks (issue 33, item 6):
 * the invariant of tests/helpers/session-invariant.ts — each model-visible event presented once,
 * each loss reported once, no extension error — over the whole session of every Pi the tests
 * started. Nothing to call and nothing to forget:
 *
 * - **Who is checked.** `startPi` (RPC, tests/helpers/pi-process.ts), `runPiOnce` (print/json),
 *   `startTui` (the interactive TUI in tmux, tests/helpers/tui-kit.ts) register each Pi with
 *   `watchPi` as they start it, and every worker Pi a test's Pi spawns (`agent_task_spawn`,
 *   `pi-tasks spawn`) is found through the pi-tasks home it was spawned in (`watchHome`): the
 *   worker holder writes its Pi's RPC stream to `<home>/logs/<name>-<time>.rpc.jsonl`.
 * - **What is read.** For RPC Pis the RPC stream (every custom message arrives as `message_end`,
 *   every archive entry as `entry_appended`, every extension error as `extension_error`); for the
 *   TUI, see tests/helpers/tui-kit.ts (its session file and what Pi wrote to the terminal).
 * - **When.** When the Pi is torn down (its `stop()`, after it exited and its output is read). The
 *   worker Pis of its pi-tasks home are checked then too, on what their logs hold (the spawner's
 *   stop first waits for those that stop with it; a worker's log is checked again each time it
 *   grew, its new violations reported), and once more after the last test file. A Pi still running
 *   when the test run ends is checked then, on what it recorded so far.
 * - **How a failure fails the run.** tests/helpers/preload.ts registers two global hooks: after
 *   every test (`surfaceTeardownFailures`: the test whose Pi was stopped fails; the message names
 *   the Pi, the test file that started it and the offending records), and after the last file
 *   (`finishTeardownChecks`: Pis still running, workers not yet checked, Pis a file stopped in its
 *   own `afterAll`). `usePiFixture` surfaces at the end of its `afterAll` too, so a Pi it stops
 *   fails the file that started it. Bun 1.4.5 (checked) reports a throwing global `afterEach` as a
 *   failure of the test it ran after, a throwing `afterAll` as a failed `(unnamed)` test under the
 *   file it ran in (the global one: under the last file); each makes `bun test` exit 1.
 *
 * A Pi that legitimately shows an extension error opts out of that one part, for that one
 * process, with the reason (`extensionErrorsExpected` of ScriptedPiOptions); an opt-out that never
 * saw an extension error is itself a failure (it would hide the next one).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { listSpawned, piPidFile, rpcLogFile } from "../../src/host/spawned.ts";
import { invariantViolations, parseJsonLines, rpcObservation, sessionFileViolations } from "./session-invariant.ts";

interface Watched {
  readonly label: string;
  /** A test file (see `where`). */
  readonly file: string;
  /** How `file` relates to it: the file that started it, or (a worker) the one running when its log was read. */
  readonly where: "started in" | "checked while running";
  readonly check: () => Promise<string[]> | string[];
  settled: boolean;
  violations: string[];
  surfaced: boolean;
}

const REPO_ROOT = join(import.meta.dir, "..", "..");
const watched: Watched[] = [];
/** pi-tasks homes whose spawned workers are checked; each checked file's size when last read and what it reported. */
const homes = new Set<string>();
const checkedFiles = new Map<string, { size: number; reported: Set<string> }>();

/**
 * How long a teardown waits for the worker Pis that stop with their spawner (the holder's owner
 * poll, then Pi's shutdown), and the end of the run for all that are left: a budget for a loaded
 * machine, not a measurement (a worker still running then is checked on what it wrote so far).
 */
const WORKER_EXIT_WAIT_MS = 20_000;

/** The test file running now (Bun sets `Bun.main` to it under `bun test`). */
function currentFile(): string {
  return relative(REPO_ROOT, Bun.main);
}

export interface WatchedPi {
  /** Runs the check now (once; later calls do nothing): after the Pi exited and its output was read. */
  settle(): Promise<void>;
}

/** Registers a Pi the tests started; `check` reads its session and names each violation. */
export function watchPi(label: string, check: () => Promise<string[]> | string[]): WatchedPi {
  const entry: Watched = { label, file: currentFile(), where: "started in", check, settled: false, violations: [], surfaced: false };
  watched.push(entry);
  return { settle: () => settle(entry) };
}

async function settle(entry: Watched, note?: string): Promise<void> {
  if (entry.settled) return;
  entry.settled = true;
  try {
    entry.violations = await entry.check();
  } catch (error) {
    entry.violations = [`the teardown check could not read the session: ${error instanceof Error ? error.message : String(error)}`];
  }
  if (note !== undefined && entry.violations.length > 0) entry.violations.push(note);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.charAt(stat.lastIndexOf(")") + 2) !== "Z";
  } catch {
    return false;
  }
}

/** The pid of a worker log's Pi, or undefined before it started. */
function workerPid(rpcLog: string): number | undefined {
  const log = `${rpcLog.slice(0, -".rpc.jsonl".length)}.log`;
  try {
    const pid = Number(readFileSync(piPidFile(log), "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function workerLogs(home: string): string[] {
  const dir = join(home, "logs");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => name.endsWith(".rpc.jsonl"))
    .map((name) => join(dir, name));
}

/**
 * The violations of a file that grows (a worker's RPC log, a session file) not reported yet: the
 * file is read whole again only when it grew since the last check; each violation is new once.
 */
function freshViolations(path: string, violationsOf: (text: string) => string[]): string[] {
  const size = statSync(path).size;
  const state = checkedFiles.get(path) ?? { size: -1, reported: new Set<string>() };
  if (state.size === size) return [];
  state.size = size;
  checkedFiles.set(path, state);
  const fresh = violationsOf(readFileSync(path, "utf8")).filter((violation) => !state.reported.has(violation));
  for (const violation of fresh) state.reported.add(violation);
  return fresh;
}

/** Checks a worker's RPC log as far as it is written (it may be checked while it runs: its home may go before it ends). */
function checkWorkerLog(rpcLog: string, home: string): void {
  // The holder writes whole lines; an unterminated tail is a line still being written.
  const fresh = freshViolations(rpcLog, (text) =>
    invariantViolations(rpcObservation(parseJsonLines(text.slice(0, text.lastIndexOf("\n") + 1)))),
  );
  if (fresh.length === 0) return;
  watched.push({
    label: `worker Pi ${relative(home, rpcLog)} (spawned in the pi-tasks home ${home})`,
    file: currentFile(),
    where: "checked while running",
    check: () => [],
    settled: true,
    violations: fresh,
    surfaced: false,
  });
}

/** Every `*.jsonl` under `dir` (Pi's session files), oldest name first. */
export function sessionFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".jsonl"))
    .sort()
    .map((name) => join(dir, name));
}

/**
 * The violations of the Pi session files in `dir` not reported yet: a session continued by a later
 * Pi (`--continue`) is checked whole again, across both runs.
 */
export function sessionDirViolations(dir: string): string[] {
  return sessionFiles(dir).flatMap((file) =>
    freshViolations(file, sessionFileViolations).map((violation) => `session file ${file}: ${violation}`),
  );
}

/** Waits until none of `pids` runs, at most `ms`. */
async function exited(pids: readonly number[], ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (pids.some(alive) && Date.now() < until) await Bun.sleep(100);
}

/**
 * Checks the worker Pis spawned in `home`, each on what its RPC log holds now: first waits (at most
 * `waitMs`) for those `owner` (the pid of a Pi being torn down) spawned, since they stop with it —
 * with `final`, for every worker left (the run ends).
 */
export async function checkWorkers(home: string, options: { owner?: number; final?: boolean; waitMs?: number } = {}): Promise<void> {
  const owned = options.owner === undefined ? [] : listSpawned({ PI_TASKS_HOME: home }).filter((worker) => worker.owner === options.owner);
  const waitFor = options.final === true ? workerLogs(home) : owned.map((worker) => rpcLogFile(worker.log));
  await exited(
    waitFor.flatMap((log) => workerPid(log) ?? []),
    options.waitMs ?? WORKER_EXIT_WAIT_MS,
  );
  for (const log of workerLogs(home)) checkWorkerLog(log, home);
}

/** A pi-tasks home whose spawned worker Pis the teardown checks. */
export function watchHome(home: string): void {
  homes.add(home);
}

function describeFailure(entry: Watched): string {
  return [`${entry.label}, ${entry.where} ${entry.file}:`, ...entry.violations.map((violation) => `  - ${violation}`)].join("\n");
}

/**
 * Throws once for every checked Pi whose session broke the invariant and was not reported yet:
 * those the running test file started, or with `everyFile` all (a Pi another file stopped in its
 * `afterAll` is reported at the end of the run rather than by an unrelated test).
 */
export function surfaceTeardownFailures(everyFile = false): void {
  const file = currentFile();
  const failed = watched.filter(
    (entry) => entry.settled && !entry.surfaced && entry.violations.length > 0 && (everyFile || entry.file === file),
  );
  for (const entry of failed) entry.surfaced = true;
  if (failed.length === 0) return;
  throw new Error(
    `the teardown invariant failed (each event presented once, each loss reported once, no extension error; tests/helpers/session-invariant.ts):\n${failed.map(describeFailure).join("\n")}`,
  );
}

/** After the last test file: checks Pis still running and workers not checked yet, then surfaces. */
export async function finishTeardownChecks(): Promise<void> {
  for (const entry of watched) if (!entry.settled) await settle(entry, "(checked when the test run ended: the test never stopped this Pi)");
  const until = Date.now() + WORKER_EXIT_WAIT_MS;
  for (const home of homes) if (existsSync(home)) await checkWorkers(home, { final: true, waitMs: Math.max(0, until - Date.now()) });
  surfaceTeardownFailures(true);
}
