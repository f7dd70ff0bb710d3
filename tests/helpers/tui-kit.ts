/**
 * Drives the real, interactive Pi 1.6 TUI (not `--mode rpc`) inside a private tmux server, so a
 * test can read the screen and type like a person.
 *
 * ```ts
 * describeWithTmux("my TUI test", () => {
 *   test("…", async () => {
 *     const tui = await startTui({ script: SCRIPT, session: "planner", relayUrl });
 *     try {
 *       await tui.submit("/tasks");
 *       const screen = await tui.waitForScreen(/0 tasks/);
 *       expect(countMatches(screen, /0 tasks/)).toBe(1);
 *       expect(await tui.footer()).toContain("tasks: planner · idle");
 *     } finally {
 *       expect(await tui.stop()).toBe(0); // Pi's exit status
 *     }
 *   });
 * });
 * ```
 *
 * What `startTui` sets up (each instance is isolated):
 * - A private tmux server (`tmux -S <tmpdir>/tmux.sock`, so the socket goes with the temporary
 *   directory) with its own config: fixed size (default
 *   160×50), no status bar, `escape-time 0` (a lone Escape is Escape), `extended-keys on` (else Pi
 *   prints a tmux keyboard warning), `remain-on-exit on` (the last screen and the exit status stay
 *   readable after Pi exits). The user's own tmux server is never touched. `stop()` kills it; so
 *   does process exit, as a safety net.
 * - Pi as `bun cli.js -e <repo> --session-dir <tmpdir>/sessions --offline -e
 *   src/demo/scripted-model.ts --model faux/faux-1 -nc -ns -np --no-themes` (`piArgs` of
 *   `tests/helpers/pi-process.ts`: the scripted launch of src/host/pi-cli.ts minus `--mode rpc`, its
 *   session file kept for the teardown check below), with a fresh `PI_CODING_AGENT_DIR` and the
 *   offline environment (`PI_OFFLINE=1 PI_SKIP_VERSION_CHECK=1 PI_TELEMETRY=0`).
 * - The scripted model from a scenario module (`script`) or from a `brain` function in the test
 *   process, reached over loopback HTTP through `tests/e2e/scripts/brain.ts`.
 * - First-run state: the agent dir gets a `settings.json` with `defaultProjectTrust: "never"`, so
 *   a project with `.pi/` resources never stops start-up at the "Trust project folder?" selector
 *   (pass `args: ["--approve"]` to trust it). Nothing else prompts on a fresh agent dir: with no
 *   `lastChangelogVersion` Pi records the version silently, `PI_OFFLINE` skips the version,
 *   package-update and model-catalogue checks. Pi still prints two harmless warnings (`fd`/`ripgrep`
 *   not found, offline mode skips their download).
 * - pi-tasks state: `PI_TASKS_HOME` points into the instance's temporary directory and
 *   `PI_TASKS_EMBEDDED_RELAY=0` (no detached relay outliving the test) unless `env` says otherwise.
 *
 * Ready means: Pi set the terminal title to `π - <cwd name>` (it does so at the end of start-up,
 * after the editor's key and submit handlers exist and after extensions got `session_start`) and
 * the editor box is drawn (about 0.3–0.6 s here). If Pi exits first (e.g. an extension fails to
 * load), `startTui` rejects with Pi's output (the pane's scrollback) in the message; if it never
 * gets ready (e.g. a selector waits for an answer), with the screen.
 *
 * The teardown check (tests/helpers/teardown-check.ts; each event presented once, each loss
 * reported once, no extension error) reads, when `stop()` ends the instance (or the run ends):
 * - **the session file** (`<tmpdir>/sessions/*.jsonl`): what the session holds and the model sees
 *   on its next turn — the `pi-tasks-event` and `pi-tasks-wake` custom messages and the
 *   `pi-tasks-event-record` archive entries, in order, whatever scrolled off the screen. It is the
 *   most honest source: the screen shows only its tail (fullscreen) and renders events, and Pi
 *   writes the file as it appends (it creates it at the first user or assistant message; a session
 *   that never had one holds nothing the model ever read, and leaves no file).
 * - **what Pi wrote to its terminal** (`tmux pipe-pane`, from before Pi starts: the pane runs a
 *   placeholder until the pipe is open, then `respawn-pane` starts Pi in it): interactive Pi shows
 *   an extension error only on screen, as `Extension "<path>" error: …`, so every such line Pi ever
 *   drew counts, scrolled off or not.
 * - the worker Pis it spawned, on their RPC logs in its pi-tasks home (before the home is removed).
 *
 * Screen text is `capture-pane -p -J` (wrapped lines joined), each line right-trimmed, trailing
 * blank lines dropped. Pi's default `tuiMode` is fullscreen (alternate screen): the transcript
 * scrolls inside the window and lines scrolled off are no longer on the screen. Pass
 * `settings: { tuiMode: "regular" }` and use `scrollback()` to read history instead.
 *
 * Layout of the bottom of the screen (fullscreen and regular):
 * ```
 *  0 tasks · 0 active                   ← transcript (notify, messages), then widgets
 *                                          (ctx.ui.setWidget), if any, just above the editor
 * ────────────────────────────────────  ← editor top rule
 * /tas                                  ← editor (`editorText()`)
 * ────────────────────────────────────  ← editor bottom rule
 * → tasks  [t] pi-tasks board: …        ← autocomplete menu, only while open
 * /tmp/pi-tasks-tui-…/project           ← footer: cwd, token stats + model, then one line
 * 0.0%/128k (auto)              faux-1     of extension statuses (ctx.ui.setStatus)
 * tasks: tui-smoke · idle
 * ```
 * `footer()` returns the lines below the editor's bottom rule (so it includes an open
 * autocomplete menu).
 */
import type { PiHost } from "./host-kit.ts";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BRAIN_SCRIPT,
  baseEnv,
  hostEnv,
  installPiTasks,
  piArgs,
  type ScriptedPiOptions,
  type ScriptTurn,
  serveBrain,
} from "./pi-process.ts";
import { eventually } from "../../testkit/async.ts";
import { processState } from "./cli-kit.ts";
import { packageBinary, packageMissingReason } from "../../testkit/debian-package.ts";
import { describeWithPackage } from "./requires-package.ts";
import { piTasksHome as piTasksHomeOf } from "../../src/relay-client/config.ts";
import { invariantViolations, parseJsonLines, type Presented, sessionPresentations, terminalExtensionErrors } from "./session-invariant.ts";
import { checkWorkers, sessionDirViolations, sessionFiles, watchHome, watchPi } from "./teardown-check.ts";

export type { Brain, ScriptReply, ScriptTurn } from "./pi-process.ts";

// ---------------------------------------------------------------------------------------------
// Is tmux here?
// ---------------------------------------------------------------------------------------------

/** The Debian package that provides tmux. */
export const TMUX_PACKAGE = "tmux";

/** Absolute path of `tmux` on PATH, or undefined. */
export function tmuxBinary(): string | undefined {
  return packageBinary("tmux");
}

export function tmuxAvailable(): boolean {
  return tmuxBinary() !== undefined;
}

/** Why TUI tests cannot run here, or undefined when they can. */
export function tmuxMissingReason(): string | undefined {
  return packageMissingReason("tmux", TMUX_PACKAGE);
}

/**
 * `describe(label, body)` when tmux is installed. Without tmux: skipped, with a visible
 * `skip: <label>: tmux is not installed (install the Debian package `tmux`…)` line on stderr;
 * but with `PI_TASKS_CI=1` (CI installs packages) a failing test takes its place instead.
 */
export function describeWithTmux(label: string, body: () => void): void {
  describeWithPackage(label, "tmux", TMUX_PACKAGE, body);
}

// ---------------------------------------------------------------------------------------------
// Options and handle
// ---------------------------------------------------------------------------------------------

export interface TuiOptions extends ScriptedPiOptions {
  /** Extra Pi CLI arguments, after the kit's own (e.g. `["--approve"]`, `["-e", path]`). */
  readonly args?: readonly string[];
  /** Extra keys for the agent dir's `settings.json` (e.g. `{ tuiMode: "regular" }`). */
  readonly settings?: Record<string, unknown>;
  /**
   * Install this repository into the fresh agent dir with `pi install <repo>` (as a user would) and
   * start Pi without `-e <repo>`: Pi loads pi-tasks from its settings' packages.
   */
  readonly install?: boolean;
  /** Window width in cells (default 160). */
  readonly cols?: number;
  /** Window height in rows (default 50). */
  readonly rows?: number;
  /** How long to wait for Pi to be ready (default 60 000 ms: a budget for a loaded machine, not a measurement). */
  readonly readyTimeoutMs?: number;
}

export interface Tui {
  /** Path of the private tmux server's socket; to watch by hand: `tmux -S <socket> attach -r`. */
  readonly socket: string;
  readonly cwd: string;
  readonly agentDir: string;
  /** Its pi-tasks home (`PI_TASKS_HOME`): a Pi given the same home is the same user, no pairing needed. */
  readonly home: string;
  /** Every turn the brain answered, in order (empty for `script`). */
  readonly turns: ScriptTurn[];
  /** Milliseconds from `startTui` until Pi was ready. */
  readonly readyMs: number;
  /** The pi-tasks presentations its session file holds now, in order (what the teardown check reads). */
  sessionPresentations(): Presented[];
  /** The visible screen now (see the module comment for the format). */
  screen(): Promise<string>;
  /** The last screen any method of this handle captured (also after `stop()`, for failure messages). */
  lastScreen(): string;
  /** The pane's scrollback plus the visible screen (useful with `tuiMode: "regular"`). */
  scrollback(): Promise<string>;
  /** Resolves with the first screen that matches; rejects after `timeoutMs` (default 30 000) with the last screen in the message. */
  waitForScreen(match: RegExp | ((screen: string) => boolean), timeoutMs?: number): Promise<string>;
  /** Lines below the editor's bottom rule: the footer (cwd, stats/model, extension statuses), plus an open autocomplete menu. */
  footer(): Promise<string[]>;
  /** The editor's text (lines between its two rules, trimmed), or undefined when no editor box is on screen. */
  editorText(): Promise<string | undefined>;
  /** The terminal title Pi set (tmux `pane_title`). */
  title(): Promise<string>;
  /** Types literal text (no key names; `\n` is a newline in the editor, not a submit). */
  type(text: string): Promise<void>;
  /** Presses tmux keys in order, e.g. `"Enter"`, `"Escape"`, `"C-c"`, `"Up"`, `"Tab"`, `"BSpace"`. */
  press(...keys: string[]): Promise<void>;
  /**
   * Types `text`, waits until the editor shows it (rejects if it never does: Pi is not taking
   * input, e.g. a dialog has focus), then presses Enter.
   */
  submit(text: string, timeoutMs?: number): Promise<void>;
  /** Pi's exit status once it exited, else undefined. */
  exitStatus(): Promise<number | undefined>;
  /**
   * Quits Pi like a user (Escape, ctrl+c to clear the editor, ctrl+d to exit), waits up to
   * `graceMs` (default 20 000), then kills the tmux server (and Pi with it) and removes the
   * temporary directories. Resolves with Pi's exit status, or undefined when it had to be killed.
   * Idempotent: later calls return the first call's result.
   */
  stop(graceMs?: number): Promise<number | undefined>;
  [Symbol.asyncDispose](): Promise<void>;
}

const DEFAULT_COLS = 160;
const DEFAULT_ROWS = 50;
const DEFAULT_READY_MS = 60_000;
/** Budgets for a loaded 2-core machine (Pi on Node is slow there), not measurements. */
const DEFAULT_WAIT_MS = 30_000;
const DEFAULT_STOP_GRACE_MS = 20_000;
const POLL_MS = 50;
/** Pi's terminal title once ready (`APP_TITLE` is `π` in Pi 1.6). */
const READY_TITLE = /^π - /;
/** One of the editor's horizontal rules. */
const RULE = /^─{20,}$/;
const WINDOW = "pi";

// ---------------------------------------------------------------------------------------------
// Pure helpers (exported for tests that post-process screens)
// ---------------------------------------------------------------------------------------------

/** How many times `needle` occurs in `text` (a string, or every match of a RegExp). */
export function countMatches(text: string, needle: string | RegExp): number {
  if (typeof needle === "string") {
    if (needle === "") throw new Error("countMatches needs a non-empty needle");
    return text.split(needle).length - 1;
  }
  const flags = needle.flags.includes("g") ? needle.flags : `${needle.flags}g`;
  return [...text.matchAll(new RegExp(needle.source, flags))].length;
}

/** Right-trims every line and drops trailing blank lines. */
export function normalizeScreen(raw: string): string {
  const lines = raw.split("\n").map((line) => line.trimEnd());
  while (lines.length > 0 && lines.at(-1) === "") lines.pop();
  return lines.join("\n");
}

/** Indexes of the editor's two rules (the last two rule lines on screen), or undefined. */
function editorRules(lines: readonly string[]): [number, number] | undefined {
  const rules: number[] = [];
  lines.forEach((line, index) => {
    if (RULE.test(line.trim())) rules.push(index);
  });
  const bottom = rules.at(-1);
  const top = rules.at(-2);
  return top === undefined || bottom === undefined ? undefined : [top, bottom];
}

/** The footer of a screen (see `Tui.footer`). */
export function footerOf(screen: string): string[] {
  const lines = screen.split("\n");
  const rules = editorRules(lines);
  return rules === undefined ? [] : lines.slice(rules[1] + 1);
}

/** The editor text of a screen (see `Tui.editorText`). */
export function editorTextOf(screen: string): string | undefined {
  const lines = screen.split("\n");
  const rules = editorRules(lines);
  if (rules === undefined) return undefined;
  return lines
    .slice(rules[0] + 1, rules[1])
    .map((line) => line.trim())
    .join("\n")
    .trim();
}

// ---------------------------------------------------------------------------------------------
// tmux
// ---------------------------------------------------------------------------------------------

interface TmuxResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

async function tmux(socket: string, args: readonly string[], env?: Record<string, string | undefined>): Promise<TmuxResult> {
  const binary = tmuxBinary();
  if (binary === undefined) throw new Error(tmuxMissingReason());
  const child = Bun.spawn([binary, "-u", "-S", socket, ...args], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    ...(env === undefined ? {} : { env }),
  });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { code, stdout, stderr };
}

async function tmuxOk(socket: string, args: readonly string[]): Promise<string> {
  const result = await tmux(socket, args);
  if (result.code !== 0) throw new Error(`tmux ${args[0]} failed (${result.code}): ${result.stderr.trim()}`);
  return result.stdout;
}

/** Servers still running, killed synchronously if the test process exits without `stop()`. */
const liveSockets = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    const binary = tmuxBinary();
    if (binary === undefined) return;
    for (const socket of liveSockets) Bun.spawnSync([binary, "-S", socket, "kill-server"], { stdout: "ignore", stderr: "ignore" });
  });
}

/** (`window-size manual` would be the obvious choice, but it crashes tmux 3.3a's server when no client is attached.) */
function tmuxConfig(cols: number, rows: number): string {
  return [
    "set -s escape-time 0",
    "set -s extended-keys on",
    "set -g status off",
    "set -g remain-on-exit on",
    "set -g history-limit 10000",
    `set -g default-size ${cols}x${rows}`,
    "",
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// startTui
// ---------------------------------------------------------------------------------------------

function piEnvironment(options: TuiOptions, agentDir: string, piTasksHome: string, script: string): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {
    ...baseEnv(agentDir, { ...options, script }),
    PI_TASKS_HOME: piTasksHome,
    // The pane gets the private server's TMUX; the runner's own must not leak in.
    TMUX: undefined,
    TMUX_PANE: undefined,
  };
  if (!env.LANG && !env.LC_ALL && !env.LC_CTYPE) env.LANG = "C.UTF-8";
  Object.assign(env, options.env);
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete env[key];
  return env;
}

function describeScreen(screen: string): string {
  return `--- screen ---\n${screen}\n--------------`;
}

/**
 * The teardown check of a TUI Pi (see the module comment): its session files and the extension
 * errors it drew on its terminal.
 */
function tuiViolations(sessionDir: string, terminalLog: string, options: TuiOptions): string[] {
  const drawn = existsSync(terminalLog) ? terminalExtensionErrors(readFileSync(terminalLog, "utf8")) : [];
  return [...sessionDirViolations(sessionDir), ...invariantViolations({ presented: [], problems: drawn }, options)];
}

/** Starts interactive Pi in a private tmux server and resolves once its editor takes input. */
export async function startTui(options: TuiOptions): Promise<Tui> {
  if (options.script === undefined && options.brain === undefined) throw new Error("startTui needs a script or a brain");
  if (options.script !== undefined && options.brain !== undefined) throw new Error("startTui takes a script or a brain, not both");
  const missing = tmuxMissingReason();
  if (missing !== undefined) throw new Error(missing);

  const startedAt = Date.now();
  const cols = options.cols ?? DEFAULT_COLS;
  const rows = options.rows ?? DEFAULT_ROWS;
  const root = mkdtempSync(join(tmpdir(), "pi-tasks-tui-"));
  const agentDir = join(root, "agent");
  const piTasksHome = join(root, "pi-tasks-home");
  const ownCwd = options.cwd === undefined;
  const cwd = options.cwd ?? join(root, "project");
  // The pi-tasks home is the user's alone (0700), or pi-tasks refuses it (src/platform/home-dir.ts).
  for (const dir of [agentDir, piTasksHome, ...(ownCwd ? [cwd] : [])]) mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(agentDir, "settings.json"), `${JSON.stringify({ defaultProjectTrust: "never", ...options.settings }, null, 2)}\n`);
  const host = options.host ?? "bun";
  if (options.install === true || host === "node") {
    try {
      installPiTasks(agentDir, host, baseEnv(agentDir, { script: options.script ?? BRAIN_SCRIPT }));
    } catch (error) {
      rmSync(root, { recursive: true, force: true });
      throw error;
    }
  }
  const configPath = join(root, "tmux.conf");
  writeFileSync(configPath, tmuxConfig(cols, rows));

  const turns: ScriptTurn[] = [];
  const brainServer = options.brain === undefined ? undefined : serveBrain(options.brain, turns);
  const env = hostEnv(host, piEnvironment(options, agentDir, piTasksHome, options.script ?? BRAIN_SCRIPT));
  if (brainServer !== undefined) env.PI_TASKS_TEST_BRAIN = brainServer.url;

  // The server's socket lives in the instance's temporary directory (removed on stop).
  const socket = join(root, "tmux.sock");
  installExitHook();
  liveSockets.add(socket);

  // The teardown check (module comment): the session file, the terminal output, the workers.
  const sessionDir = join(root, "sessions");
  const terminalLog = join(root, "terminal.log");
  const home = piTasksHomeOf(env);
  watchHome(home);
  const label = `TUI Pi ${options.session === undefined ? "(no session name)" : `"${options.session}"`} on ${host}`;
  const watched = watchPi(label, () => tuiViolations(sessionDir, terminalLog, options));
  let piPid: number | undefined;

  let stopping: Promise<number | undefined> | undefined;
  const cleanUp = async () => {
    await tmux(socket, ["kill-server"]).catch(() => undefined);
    liveSockets.delete(socket);
    await watched.settle();
    // The home goes with the instance: its workers are checked now (those of this Pi waited for).
    await checkWorkers(home, { owner: piPid });
    await checkWorkers(home, { final: true, waitMs: 0 });
    brainServer?.release();
    rmSync(root, { recursive: true, force: true });
  };

  let lastCaptured = "";
  const screen = async () => (lastCaptured = normalizeScreen(await tmuxOk(socket, ["capture-pane", "-p", "-J", "-t", WINDOW])));
  const display = async () => {
    const fields = "#{pid}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}\t#{pane_title}";
    const [server = "", pid = "", dead = "0", status = "", signal = "", ...title] = (
      await tmuxOk(socket, ["display-message", "-p", "-t", WINDOW, fields])
    )
      .replace(/\n$/, "")
      .split("\t");
    // Exit status as a shell reports it: the code, or 128 + the signal that killed Pi.
    const code = status !== "" ? Number(status) : signal !== "" ? 128 + Number(signal) : undefined;
    return {
      server: Number(server),
      pid: Number(pid),
      dead: dead === "1",
      status: dead === "1" ? code : undefined,
      title: title.join("\t"),
    };
  };
  const pane = async () => {
    const state = await display();
    if (Number.isInteger(state.pid) && state.pid > 0) piPid = state.pid;
    if (state.status !== undefined || processState(state.pid) !== "Z") return state;
    // Pi exited but tmux has not reaped it: tmux 3.3a sometimes misses the SIGCHLD (here about
    // one exit in three), leaving Pi a zombie and the pane without an exit status (often already
    // marked dead, from the pty's EOF). SIGCHLD to the kit's own tmux server makes it reap Pi.
    try {
      process.kill(state.server, "SIGCHLD");
    } catch {
      return state;
    }
    await Bun.sleep(20);
    return await display();
  };

  // Start the server with Pi's environment (the pane inherits the server's) and a placeholder as
  // the pane's command; once the pane's output is piped to the terminal log, Pi replaces it (given
  // as separate arguments so no shell parses them).
  const command = piArgs(options.args ?? [], { installed: options.install === true, host, sessionDir });
  const started = await tmux(
    socket,
    ["-f", configPath, "new-session", "-d", "-s", WINDOW, "-x", String(cols), "-y", String(rows), "-c", cwd, "--", "sleep", "3600"],
    env,
  );
  const piped = started.code === 0 ? await tmux(socket, ["pipe-pane", "-t", WINDOW, "-o", `cat >> '${terminalLog}'`]) : started;
  const respawned = piped.code === 0 ? await tmux(socket, ["respawn-pane", "-k", "-t", WINDOW, "-c", cwd, "--", ...command]) : piped;
  if (respawned.code !== 0) {
    await cleanUp();
    throw new Error(`tmux could not start Pi (${respawned.code}): ${respawned.stderr.trim()}`);
  }

  const deadline = startedAt + (options.readyTimeoutMs ?? DEFAULT_READY_MS);
  let last = "";
  for (;;) {
    let state: Awaited<ReturnType<typeof pane>>;
    try {
      state = await pane();
      last = await screen();
    } catch (error) {
      await cleanUp();
      throw new Error(`tmux went away while Pi was starting: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (state.dead) {
      // Pi's error may sit above the visible screen; the scrollback has it.
      const history = await tmuxOk(socket, ["capture-pane", "-p", "-J", "-S", "-", "-t", WINDOW]).catch(() => last);
      await cleanUp();
      throw new Error(
        `Pi exited (status ${state.status}) before it was ready\n${describeScreen(normalizeScreen(history).replace(/\n{3,}/g, "\n\n"))}`,
      );
    }
    if (READY_TITLE.test(state.title) && editorRules(last.split("\n")) !== undefined) break;
    if (Date.now() > deadline) {
      await cleanUp();
      throw new Error(
        `Pi was not ready within ${options.readyTimeoutMs ?? DEFAULT_READY_MS} ms (title ${JSON.stringify(state.title)})\n${describeScreen(last)}`,
      );
    }
    await Bun.sleep(POLL_MS);
  }
  const readyMs = Date.now() - startedAt;

  const exitStatus = async () => (await pane()).status;
  const waitForScreen: Tui["waitForScreen"] = async (match, timeoutMs = DEFAULT_WAIT_MS) => {
    const test = typeof match === "function" ? match : (text: string) => match.test(text);
    let latest = "";
    const matched = await eventually(
      async () => {
        latest = await screen();
        return test(latest) ? latest : undefined;
      },
      timeoutMs,
      POLL_MS,
    );
    if (matched !== undefined) return matched;
    const status = await exitStatus().catch(() => undefined);
    const exited = status === undefined ? "" : ` (Pi has exited with status ${status})`;
    throw new Error(
      `screen did not match ${typeof match === "function" ? "the predicate" : String(match)} within ${timeoutMs} ms${exited}\n${describeScreen(latest)}`,
    );
  };

  const type = async (text: string) => {
    if (text !== "") await tmuxOk(socket, ["send-keys", "-t", WINDOW, "-l", "--", text]);
  };
  const press = async (...keys: string[]) => {
    if (keys.length > 0) await tmuxOk(socket, ["send-keys", "-t", WINDOW, ...keys]);
  };

  const tui: Tui = {
    socket,
    cwd,
    agentDir,
    home: piTasksHome,
    turns,
    readyMs,
    sessionPresentations: () =>
      sessionFiles(sessionDir).flatMap((file) => sessionPresentations(parseJsonLines(readFileSync(file, "utf8")))),
    screen,
    lastScreen: () => lastCaptured,
    scrollback: async () => normalizeScreen(await tmuxOk(socket, ["capture-pane", "-p", "-J", "-S", "-", "-t", WINDOW])),
    waitForScreen,
    footer: async () => footerOf(await screen()),
    editorText: async () => editorTextOf(await screen()),
    title: async () => (await pane()).title,
    type,
    press,
    async submit(text, timeoutMs = 10_000) {
      await type(text);
      const wanted = text.replace(/\s+/g, "");
      await waitForScreen((current) => (editorTextOf(current) ?? "").replace(/\s+/g, "").includes(wanted), timeoutMs).catch(
        (error: unknown) => {
          throw new Error(
            `the editor never showed the typed text ${JSON.stringify(text)}: ${error instanceof Error ? error.message : String(error)}`,
          );
        },
      );
      await press("Enter");
    },
    exitStatus,
    stop(graceMs = DEFAULT_STOP_GRACE_MS) {
      stopping ??= (async () => {
        let status: number | undefined;
        try {
          status = await exitStatus();
          if (status === undefined) {
            // Escape closes a dialog or interrupts a run; ctrl+c clears the editor; ctrl+d on an
            // empty editor quits. Repeated until Pi exits or the grace period ends.
            const until = Date.now() + graceMs;
            let nextKeys = 0;
            while (status === undefined && Date.now() < until) {
              if (Date.now() >= nextKeys) {
                await press("Escape");
                await Bun.sleep(POLL_MS);
                await press("C-c");
                await Bun.sleep(POLL_MS);
                await press("C-d");
                nextKeys = Date.now() + 1_000;
              }
              await Bun.sleep(POLL_MS);
              status = await exitStatus();
            }
            if (status === undefined) await screen();
          }
        } catch {
          status = undefined;
        }
        await cleanUp();
        return status;
      })();
      return stopping;
    },
    async [Symbol.asyncDispose]() {
      await tui.stop();
    },
  };
  return tui;
}

/**
 * Pi as a new user gets it: pi-tasks installed with `pi install`, no pi-tasks environment but
 * `WOLFPACK_PORT` (moved off the default so the test meets no relay of the machine's), a regular
 * screen (the whole transcript stays in the scrollback); its model runs `script`, the workers it
 * spawns run `workerScript`.
 */
export function startInstalledTui(options: {
  readonly host: PiHost;
  readonly port: number;
  readonly script: string;
  readonly workerScript: string;
}): Promise<Tui> {
  return startTui({
    script: options.script,
    install: true,
    host: options.host,
    settings: { tuiMode: "regular" },
    env: {
      PI_TASKS_EMBEDDED_RELAY: undefined,
      PI_TASKS_HOME: undefined,
      WOLFPACK_PORT: String(options.port),
      PI_TASKS_WORKER_SCRIPT: options.workerScript,
    },
  });
}
