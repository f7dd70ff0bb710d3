/**
 * A real Pi 1.6 CLI in `--mode rpc` under Bun, headless: isolated `PI_CODING_AGENT_DIR`, offline,
 * this repository loaded with `-e`, and a scripted faux model (`src/demo/scripted-model.ts`)
 * driven either by a scenario module (`script`) or by a `brain` function living in the test
 * process (`tests/e2e/scripts/brain.ts` forwards each turn to it over loopback HTTP). Stdout is
 * parsed as JSONL RPC records, each stamped with its arrival time.
 *
 * `runPiOnce()` runs the CLI once in `-p` (print) or `--mode json` and reports its exit.
 *
 * Every Pi started here is checked when it is torn down, whatever the test asserts (the invariant of
 * tests/helpers/session-invariant.ts, enforced by tests/helpers/teardown-check.ts): on its RPC stream
 * (`runPiOnce`: a json run's stdout, and stderr, where print and json modes write extension errors),
 * its session files when it keeps them (`sessionDir`), and the worker Pis it spawned on theirs.
 */
import { type Server, type Subprocess, spawn } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bunPath, installedPiCli, PACKAGE_ROOT, piRpcArgs, scriptedEnv } from "../../src/host/pi-cli.ts";
import { within } from "../../src/platform/waits.ts";
import { readJsonLines, readText, waitForRecord } from "../../src/demo/pi-rpc.ts";
import { diagnosticTailChars } from "../../src/protocol/limits.ts";
import type { ScriptReply, ScriptTurn } from "../../src/demo/scripted-model.ts";
import { piTasksHome } from "../../src/relay-client/config.ts";
import { type InstallVariant, installedPackage, NODE_BINARY, nodeHostPath, type PiHost } from "./host-kit.ts";
import { type Exited, type RunToExitOptions, runToExit } from "./run-to-exit.ts";
import { invariantViolations, parseJsonLines, rpcObservation, rpcProblems, stderrExtensionErrors } from "./session-invariant.ts";
import { checkWorkers, sessionDirViolations, watchHome, watchPi } from "./teardown-check.ts";

const BUN = bunPath();
/** The installed Pi CLI (a `PI_TASKS_PI_CLI` of the runner is never followed here). */
export const PI_CLI = installedPiCli()!;
export const BRAIN_SCRIPT = join(PACKAGE_ROOT, "tests", "e2e", "scripts", "brain.ts");
/** Pi's own start-up extras a test never wants: context files, skills, prompt templates, themes. */
const BARE = ["-nc", "-ns", "-np", "--no-themes"];

export type RpcRecord = Record<string, unknown> & { readonly type: string };
export type { ScriptReply, ScriptTurn };
export type Brain = (turn: ScriptTurn) => ScriptReply | Promise<ScriptReply>;

/** A scripted Pi as the tests start it (RPC here, the TUI in tests/helpers/tui-kit.ts). */
export interface ScriptedPiOptions {
  /** `WOLFPACK_SESSION_NAME` (omitted: unset, never inherited from the runner). */
  readonly session?: string;
  /** `PI_TASKS_RELAY_URL` (omitted: unset, never inherited from the runner). */
  readonly relayUrl?: string;
  /** Absolute path of the scenario module for the scripted model. */
  readonly script?: string;
  /** The model as a function in the test process (instead of `script`). */
  readonly brain?: Brain;
  /** `PI_TASK_WORKER=1`. */
  readonly worker?: boolean;
  /** Working directory (default: a fresh temporary project directory, removed on stop). */
  readonly cwd?: string;
  /** Extra environment for Pi; `undefined` values unset a variable. Applied last. */
  readonly env?: Record<string, string | undefined>;
  /**
   * Which Pi runs (tests/helpers/host-kit.ts): `bun` (default) from this checkout with `-e <repo>`,
   * or `node`, Pi's users' host — Node ≥ 22.19, the packed package installed with `pi install`,
   * no bun on PATH.
   */
  readonly host?: PiHost;
  /**
   * `PI_TASKS_HOME`: whose identity this Pi signs with. Default: one home shared by every Pi of
   * this test process (one user, as most tests want); give another to make a second user.
   */
  readonly home?: string;
  /**
   * The teardown check's one opt-out (tests/helpers/teardown-check.ts): this Pi's test provokes
   * extension errors on purpose, for the reason given. Its extension errors are then expected — and
   * none occurring fails the check. Duplicates are never opted out of.
   */
  readonly extensionErrorsExpected?: string;
}

export interface PiProcessOptions extends ScriptedPiOptions {
  readonly extraArgs?: readonly string[];
  /**
   * Keep Pi's session file in this directory (`--session-dir`) instead of none (`--no-session`):
   * a later Pi with `--continue` in the same cwd continues it.
   */
  readonly sessionDir?: string;
  /** Runs Pi through this command (e.g. `ip netns exec HOST`: Pi on another machine, testkit/netns.ts). */
  readonly wrap?: readonly string[];
  /**
   * Discover skills as a user's Pi does instead of `-ns` — an installed package's skills load only
   * then (a package given with `-e`, as on the Bun host, brings its skills either way).
   */
  readonly skills?: boolean;
  /** On the `node` host, which production install (default `plain`; `traces` adds OpenTelemetry as a user would). */
  readonly install?: InstallVariant;
}

export interface PiProcess {
  readonly records: RpcRecord[];
  /** `Date.now()` at which each record arrived (same index as `records`). */
  readonly times: number[];
  /** Every turn the brain answered, in order (empty for `script` processes). */
  readonly turns: ScriptTurn[];
  readonly process: Subprocess<"pipe", "pipe", "pipe">;
  readonly cwd: string;
  readonly startedAt: number;
  stderr(): string;
  /** Sends one RPC command (JSON line). */
  command(command: Record<string, unknown>): void;
  /** Sends a command and resolves with its `response` record. */
  rpc(command: Record<string, unknown>, timeoutMs?: number): Promise<RpcRecord>;
  prompt(message: string): void;
  /** Resolves with the first record (from `from`) matching, or rejects after `timeoutMs`. */
  waitFor(predicate: (record: RpcRecord) => boolean, timeoutMs?: number, from?: number): Promise<RpcRecord>;
  /** Custom messages Pi recorded (`message_end` with role custom), in order. */
  customMessages(customType?: string): Record<string, unknown>[];
  /** Archive entries (`entry_appended` of `custom` entries), in order. */
  appendedEntries(customType?: string): Record<string, unknown>[];
  /** Finished tool executions (`tool_execution_end`), in order. */
  toolResults(toolName?: string): RpcRecord[];
  /** `extension_ui_request` records, optionally of one method. */
  uiRequests(method?: string): RpcRecord[];
  /** What must never appear: extension errors and stdout lines that are not JSON. */
  problems(): RpcRecord[];
  /** The session's entries (RPC `get_entries`). */
  entries(): Promise<Record<string, unknown>[]>;
  /**
   * Closes stdin (Pi shuts down) and waits for the exit code; kills after `graceMs`. Then the
   * teardown check reads its session (tests/helpers/teardown-check.ts).
   */
  stop(graceMs?: number): Promise<number>;
  /** Exit code once exited, else undefined. */
  exitCode(): number | null;
  /** Whether `stop()` had to kill Pi (it did not exit by itself within the grace). */
  killed(): boolean;
}

const DEFAULT_WAIT_MS = 15_000;
/**
 * How long `stop()` waits for Pi to exit by itself before killing it: a budget for a loaded 2-core
 * machine (Pi on Node takes seconds to shut down there), not a measurement — `killed()` says
 * whether it was needed; how fast Pi stops is for `npm run bench`.
 */
export const STOP_GRACE_MS = 20_000;
/** How long a stopped Pi's stdout may take to drain (a child that inherited it may hold it open). */
const DRAIN_MS = 5_000;

// ---------------------------------------------------------------------------------------------
// The brain server: one loopback HTTP server for every brain of this test process
// ---------------------------------------------------------------------------------------------

let brainServer: Server<undefined> | undefined;
const brains = new Map<string, (turn: ScriptTurn) => Promise<ScriptReply>>();

/**
 * Serves `brain` for `tests/e2e/scripts/brain.ts` (POST a turn, get the reply as JSON) on this
 * process's one loopback brain server; every turn is appended to `turns`. `release()` forgets it.
 */
export function serveBrain(brain: Brain, turns: ScriptTurn[]): { readonly url: string; release(): void } {
  if (brainServer === undefined) {
    brainServer = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      async fetch(request) {
        const token = new URL(request.url).pathname.split("/").at(-1) ?? "";
        const served = brains.get(token);
        if (served === undefined) return Response.json({ text: "no brain" });
        try {
          return Response.json(await served((await request.json()) as ScriptTurn));
        } catch (error) {
          return Response.json({ text: `brain threw: ${error instanceof Error ? error.message : String(error)}` });
        }
      },
    });
    brainServer.unref();
  }
  const token = crypto.randomUUID();
  brains.set(token, async (turn) => {
    turns.push(turn);
    return await brain(turn);
  });
  return { url: `http://127.0.0.1:${brainServer.port}/brain/${token}`, release: () => brains.delete(token) };
}

let sharedHome: string | undefined;

/** The pi-tasks home every Pi of this test process shares unless told otherwise (one identity). */
export function sharedTestHome(): string {
  if (sharedHome === undefined) {
    const home = mkdtempSync(join(tmpdir(), "pi-tasks-home-"));
    process.once("exit", () => rmSync(home, { recursive: true, force: true }));
    sharedHome = home;
  }
  return sharedHome;
}

/**
 * A scripted Pi's environment: isolated agent dir, the scripted environment of src/host/pi-cli.ts
 * (the script, offline), no embedded relay, and the test's pi-tasks home (never the runner's own
 * identity or session).
 */
export function baseEnv(
  agentDir: string,
  options: { script: string; relayUrl?: string; session?: string; worker?: boolean; home?: string },
): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {
    ...process.env,
    PI_CODING_AGENT_DIR: agentDir,
    ...scriptedEnv({ script: options.script }),
    PI_TASKS_RELAY_URL: options.relayUrl,
    WOLFPACK_SESSION_NAME: options.session,
    PI_TASK_WORKER: options.worker ? "1" : undefined,
    WOLFPACK_JWT_SECRET: "",
    // Tests name their relay; none starts an embedded relay unless it asks (env override).
    PI_TASKS_EMBEDDED_RELAY: "0",
    PI_TASKS_HOME: options.home ?? sharedTestHome(),
  };
  // Never inherit the runner's own pi-tasks identity.
  if (options.session === undefined) delete env.WOLFPACK_SESSION_NAME;
  if (options.relayUrl === undefined) delete env.PI_TASKS_RELAY_URL;
  if (!options.worker) delete env.PI_TASK_WORKER;
  return env;
}

/** `args` without the adjacent pair `flag value` (which must be there). */
function withoutPair(args: readonly string[], flag: string, value: string): string[] {
  const at = args.findIndex((arg, index) => arg === flag && args[index + 1] === value);
  if (at < 0) throw new Error(`expected \`${flag} ${value}\` in ${args.join(" ")}`);
  return [...args.slice(0, at), ...args.slice(at + 2)];
}

/**
 * `bun cli.js` as src/host/pi-cli.ts launches a scripted Pi (`piRpcArgs`: this package, the
 * scripted model, offline, no session file), without Pi's start-up extras, in the mode `extra`
 * names (none: the interactive TUI); without `-e <package>` when `installed` (Pi then finds
 * pi-tasks in its settings' packages); with its session file in `sessionDir` instead of none.
 */
export function piArgs(extra: readonly string[], options: { installed?: boolean; host?: PiHost; sessionDir?: string } = {}): string[] {
  // Any script gives the scripted launch; the script itself travels in `PI_TASKS_TEST_SCRIPT`.
  let launch = withoutPair(piRpcArgs({ script: BRAIN_SCRIPT }), "--mode", "rpc");
  if (options.installed === true || options.host === "node") launch = withoutPair(launch, "-e", PACKAGE_ROOT);
  if (options.sessionDir !== undefined) launch = withSessionDir(launch, options.sessionDir);
  return [...piRunner(options.host ?? "bun"), ...launch, ...BARE, ...extra];
}

/** A launch that keeps Pi's session file in `dir` (`--session-dir`) instead of none (`--no-session`). */
function withSessionDir(launch: readonly string[], dir: string): string[] {
  return [...launch.filter((arg) => arg !== "--no-session"), "--session-dir", dir];
}

/** The command that runs Pi's CLI on a host. */
export function piRunner(host: PiHost): string[] {
  return [host === "node" ? NODE_BINARY : BUN, PI_CLI];
}

/**
 * `env` for Pi on `host`: on `node`, a PATH with node and no bun. The `bun` host keeps the
 * runner's environment as it is.
 */
export function hostEnv(host: PiHost, env: Record<string, string | undefined>): Record<string, string | undefined> {
  return host === "node" ? { ...env, PATH: nodeHostPath() } : env;
}

/**
 * `pi install` of pi-tasks into `agentDir`, as a user does: this checkout on the `bun` host, the
 * packed production install on the `node` host (each with that host's Pi).
 */
export function installPiTasks(
  agentDir: string,
  host: PiHost,
  env: Record<string, string | undefined>,
  variant: InstallVariant = "plain",
): void {
  const source = host === "node" ? installedPackage(variant) : PACKAGE_ROOT;
  const done = Bun.spawnSync([...piRunner(host), "install", source], {
    env: hostEnv(host, { ...env, PI_CODING_AGENT_DIR: agentDir }),
    stdout: "pipe",
    stderr: "pipe",
  });
  if (done.exitCode !== 0)
    throw new Error(`pi install ${source} failed (${done.exitCode}): ${done.stderr.toString()}${done.stdout.toString()}`);
}

export function startPi(options: PiProcessOptions): PiProcess {
  const agentDir = mkdtempSync(join(tmpdir(), "pi-tasks-agent-"));
  const ownCwd = options.cwd === undefined;
  const cwd = options.cwd ?? mkdtempSync(join(tmpdir(), "pi-tasks-project-"));
  const turns: ScriptTurn[] = [];
  const script = options.brain !== undefined ? BRAIN_SCRIPT : options.script;
  if (script === undefined) throw new Error("startPi needs a script or a brain");
  const env = baseEnv(agentDir, { ...options, script });
  const brainServed = options.brain === undefined ? undefined : serveBrain(options.brain, turns);
  if (brainServed !== undefined) env.PI_TASKS_TEST_BRAIN = brainServed.url;
  Object.assign(env, options.env);
  for (const [key, value] of Object.entries(options.env ?? {})) if (value === undefined) delete env[key];

  const host = options.host ?? "bun";
  if (host === "node") installPiTasks(agentDir, host, env, options.install);
  let launch = host === "node" ? withoutPair(piRpcArgs({ script }), "-e", PACKAGE_ROOT) : piRpcArgs({ script });
  if (options.sessionDir !== undefined) launch = withSessionDir(launch, options.sessionDir);
  const startedAt = Date.now();
  const bare = options.skills === true ? BARE.filter((flag) => flag !== "-ns") : BARE;
  const child = spawn([...(options.wrap ?? []), ...piRunner(host), ...launch, ...bare, ...(options.extraArgs ?? [])], {
    cwd,
    env: hostEnv(host, env),
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const records: RpcRecord[] = [];
  const times: number[] = [];
  const listeners = new Set<() => void>();
  let stderrText = "";
  let killed = false;
  // The teardown check of this Pi and of the workers it spawns (tests/helpers/teardown-check.ts).
  const home = piTasksHome(env);
  watchHome(home);
  const watched = watchPi(`RPC Pi ${options.session === undefined ? "(no session name)" : `"${options.session}"`} on ${host}`, () => {
    // A Pi killed by a signal (a test's SIGKILL) may leave half a line: that tail is no corrupt output.
    const cut = child.signalCode !== null && records.at(-1)?.type === "unparsed";
    const stream = invariantViolations(rpcObservation(cut ? records.slice(0, -1) : records), options);
    // A session kept on disk is checked whole too: one continued by a later Pi spans both runs.
    return [...stream, ...(options.sessionDir === undefined ? [] : sessionDirViolations(options.sessionDir))];
  });
  const stdoutRead = readJsonLines(
    child.stdout,
    (record) => {
      records.push(record);
      times.push(Date.now());
    },
    () => {
      for (const listener of [...listeners]) listener();
    },
  );
  void readText(child.stderr, (text) => {
    stderrText += text;
  });

  function command(value: Record<string, unknown>): void {
    if (child.exitCode !== null) return;
    try {
      child.stdin.write(`${JSON.stringify(value)}\n`);
      child.stdin.flush();
    } catch {
      // stdin already closed
    }
  }

  const messages = (customType?: string) =>
    records
      .filter((record) => record.type === "message_end")
      .map((record) => record.message as Record<string, unknown>)
      .filter((message) => message?.role === "custom" && (customType === undefined || message.customType === customType));

  const pi: PiProcess = {
    records,
    times,
    turns,
    process: child,
    cwd,
    startedAt,
    stderr: () => stderrText,
    command,
    async rpc(value, timeoutMs = DEFAULT_WAIT_MS) {
      const id = crypto.randomUUID();
      const from = records.length;
      const waiting = pi.waitFor((record) => record.type === "response" && record.id === id, timeoutMs, from);
      command({ ...value, id });
      return await waiting;
    },
    prompt: (message) => command({ id: crypto.randomUUID(), type: "prompt", message }),
    waitFor: (predicate, timeoutMs = DEFAULT_WAIT_MS, from = 0) =>
      waitForRecord(records, listeners, predicate, {
        from,
        timeoutMs,
        diagnostics: () =>
          `last records: ${JSON.stringify(records.slice(-8).map((record) => record.type))}\nstderr: ${stderrText.slice(-diagnosticTailChars)}`,
      }),
    customMessages: messages,
    appendedEntries(customType) {
      return records
        .filter((record) => record.type === "entry_appended")
        .map((record) => record.entry as Record<string, unknown>)
        .filter((entry) => entry?.type === "custom" && (customType === undefined || entry.customType === customType));
    },
    toolResults(toolName) {
      return records.filter((record) => record.type === "tool_execution_end" && (toolName === undefined || record.toolName === toolName));
    },
    uiRequests(method) {
      return records.filter((record) => record.type === "extension_ui_request" && (method === undefined || record.method === method));
    },
    problems() {
      return rpcProblems(records).map((problem) => problem.record as RpcRecord);
    },
    async entries() {
      const response = await pi.rpc({ type: "get_entries" });
      return ((response.data as { entries?: Record<string, unknown>[] } | undefined)?.entries ?? []) as Record<string, unknown>[];
    },
    async stop(graceMs = STOP_GRACE_MS) {
      if (child.exitCode === null) {
        try {
          child.stdin.end();
        } catch {
          // already closed
        }
        const exited = await within(child.exited, graceMs);
        if (exited === undefined) {
          killed = true;
          child.kill("SIGKILL");
        }
      }
      const code = await child.exited;
      await within(stdoutRead, DRAIN_MS);
      await watched.settle();
      await checkWorkers(home, { owner: child.pid });
      brainServed?.release();
      rmSync(agentDir, { recursive: true, force: true });
      if (ownCwd) rmSync(cwd, { recursive: true, force: true });
      return code;
    },
    exitCode: () => child.exitCode,
    killed: () => killed,
  };
  return pi;
}

export interface PiOnceOptions {
  readonly mode: "print" | "json";
  readonly prompt: string;
  readonly session?: string;
  readonly relayUrl?: string;
  readonly script: string;
  readonly env?: Record<string, string | undefined>;
  /** Kill after this long (the result then says `killed`). */
  readonly timeoutMs?: number;
}

export interface PiOnceResult {
  readonly code: number;
  readonly killed: boolean;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
  /** `Date.now()` when the process exited. */
  readonly exitedAt: number;
}

/**
 * Runs a Pi command that exits by itself (`-p`, `--mode json`: `command` is the whole command line)
 * to its exit, under the teardown check (tests/helpers/teardown-check.ts): its stderr, where print
 * and json modes write extension errors, and in json mode its stdout, the session's events.
 */
export async function runPiToExit(label: string, command: readonly string[], options: RunToExitOptions): Promise<Exited> {
  let output: Exited | undefined;
  const watched = watchPi(label, () => {
    if (output === undefined) return ["it never exited"];
    const records = command.includes("--mode") && command[command.indexOf("--mode") + 1] === "json" ? parseJsonLines(output.stdout) : [];
    const json = rpcObservation(records);
    return invariantViolations({ presented: json.presented, problems: [...json.problems, ...stderrExtensionErrors(output.stderr)] });
  });
  output = await runToExit(command, options);
  await watched.settle();
  return output;
}

/** Runs `pi -p PROMPT` or `pi --mode json PROMPT` once and waits for it to exit by itself. */
export async function runPiOnce(options: PiOnceOptions): Promise<PiOnceResult> {
  const agentDir = mkdtempSync(join(tmpdir(), "pi-tasks-agent-"));
  const cwd = mkdtempSync(join(tmpdir(), "pi-tasks-project-"));
  const env = { ...baseEnv(agentDir, options), ...options.env };
  const modeArgs = options.mode === "print" ? ["-p", options.prompt] : ["--mode", "json", options.prompt];
  const label = `${options.mode} Pi ${options.session === undefined ? "(no session name)" : `"${options.session}"`} (runPiOnce)`;
  const exited = await runPiToExit(label, piArgs(modeArgs), { cwd, env, timeoutMs: options.timeoutMs ?? 15_000 });
  rmSync(agentDir, { recursive: true, force: true });
  rmSync(cwd, { recursive: true, force: true });
  const { code, killed, stdout, stderr, exitedAt } = exited;
  return { code, killed, stdout, stderr, ms: exitedAt - exited.startedAt, exitedAt };
}
