/**
 * How this package starts a real Pi: in RPC mode, with this package's extension loaded
 * (`-e <package root>`), by the same Pi that runs the caller where there is one.
 */
import { existsSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { isCompiledBun, ownRuntime, PACKAGE_ROOT } from "./runtime.ts";

export { PACKAGE_ROOT };
/** The `pi-tasks` command line entry in the sources (run by Bun in this repository). */
export const CLI_ENTRY = join(PACKAGE_ROOT, "src", "bin", "pi-tasks.ts");
/** The scripted model extension used by the demo and tests (`faux/faux-1`). */
export const SCRIPTED_MODEL_EXTENSION = join(PACKAGE_ROOT, "src", "demo", "scripted-model.ts");
export const SCRIPTED_MODEL = "faux/faux-1";
/** The variable naming the Pi CLI to start (a `cli.js`, or a `pi` program). */
export const PI_CLI_VARIABLE = "PI_TASKS_PI_CLI";

/**
 * The Bun executable for this repository's own tools (demo, tests, bench): the running one under
 * Bun, else this package's `bun` dependency, else `bun` on PATH. Code Pi loads never uses it.
 */
export function bunPath(): string {
  if (process.versions.bun !== undefined && !isCompiledBun()) return process.execPath;
  const local = join(PACKAGE_ROOT, "node_modules", ".bin", "bun");
  return existsSync(local) ? local : "bun";
}

function isPiCliScript(path: string | undefined): path is string {
  return path !== undefined && basename(path) === "cli.js" && path.includes("pi-coding-agent") && existsSync(path);
}

/** The installed Pi CLI script beside this package (a checkout's dev dependency), if any. */
export function installedPiCli(): string | undefined {
  try {
    const main = fileURLToPath(import.meta.resolve("@earendil-works/pi-coding-agent"));
    const cli = join(dirname(main), "bundle", "cli.js");
    return existsSync(cli) ? cli : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The command that starts Pi, before Pi's own arguments:
 * - `PI_TASKS_PI_CLI`: a script (`.js`, `.mjs`, `.ts`: run by our runtime) or a program;
 * - inside a running Pi: that Pi — its runtime and CLI script, or the compiled program itself;
 * - else the Pi CLI installed beside this package, else `pi` on PATH.
 */
export function piCommand(env: Record<string, string | undefined>): string[] {
  const runtime = ownRuntime(env).command;
  const named = env[PI_CLI_VARIABLE]?.trim();
  if (named) return /\.(m?js|ts)$/.test(named) ? [runtime, named] : [named];
  const running = process.argv[1];
  if (isPiCliScript(running)) return [process.execPath, running];
  // A program compiled with Bun that loads this extension is Pi's release binary.
  if (isCompiledBun()) return [process.execPath];
  const installed = installedPiCli();
  return installed === undefined ? ["pi"] : [runtime, installed];
}

export interface PiLaunch {
  readonly model?: string;
  /** A file whose text Pi appends to the system prompt (a worker profile's instructions). */
  readonly instructions?: string;
  /** Scenario module for the scripted model (demo and tests); implies `faux/faux-1`. */
  readonly script?: string;
  /** Where Pi keeps the session file (`--session-dir`): a spawned worker's own, apart from the person's. */
  readonly sessionDir?: string;
}

/**
 * Pi's arguments for a headless RPC Pi with this extension. A real model keeps Pi's session
 * history (the historical record); a scripted one runs offline without a session file — unless
 * `sessionDir` names where the session is kept (a spawned worker's, in both cases).
 */
export function piRpcArgs(launch: PiLaunch): string[] {
  const args = ["--mode", "rpc", "-e", PACKAGE_ROOT];
  const session =
    launch.sessionDir === undefined ? (launch.script === undefined ? [] : ["--no-session"]) : ["--session-dir", launch.sessionDir];
  args.push(...session);
  if (launch.script !== undefined) args.push("--offline", "-e", SCRIPTED_MODEL_EXTENSION, "--model", SCRIPTED_MODEL);
  else if (launch.model !== undefined) args.push("--model", launch.model);
  if (launch.instructions !== undefined) args.push("--append-system-prompt", launch.instructions);
  return args;
}

/** Environment additions for a scripted Pi. */
export function scriptedEnv(launch: PiLaunch): Record<string, string> {
  return launch.script === undefined
    ? {}
    : { PI_TASKS_TEST_SCRIPT: launch.script, PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1", PI_TELEMETRY: "0" };
}
