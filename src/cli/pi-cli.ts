/**
 * How this package starts a real Pi: the Pi 1.6 CLI under Bun (Pi 1.6 does not run on Node 20),
 * in RPC mode, with this package's extension loaded (`-e <package root>`).
 */
import { existsSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * This package's root (what `-e` loads: its package.json names the extension). From
 * `import.meta.url`: inside Pi, extensions are loaded by jiti, which keeps `import.meta.url` but not
 * Bun's import-meta dir.
 */
export const PACKAGE_ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
/** The `pi-tasks` command line entry. */
export const CLI_ENTRY = join(PACKAGE_ROOT, "src", "cli", "main.ts");
/** The scripted model extension used by the demo and tests (`faux/faux-1`). */
export const SCRIPTED_MODEL_EXTENSION = join(PACKAGE_ROOT, "src", "demo", "scripted-model.ts");
export const SCRIPTED_MODEL = "faux/faux-1";

/**
 * The Bun executable for our own processes (relay, worker holder, Pi): the running one under Bun
 * (the CLI, and Pi 1.6 on this machine), else this package's `bun` dependency, else `bun` on PATH.
 */
export function bunPath(): string {
  if (process.versions.bun !== undefined) return process.execPath;
  const local = join(PACKAGE_ROOT, "node_modules", ".bin", "bun");
  return existsSync(local) ? local : "bun";
}

/**
 * The Pi CLI entry: `PI_TASKS_PI_CLI`; else, inside a running Pi, the CLI that runs it (so a worker
 * is the same Pi as its origin, also when the package was installed without dev dependencies);
 * else the installed `@earendil-works/pi-coding-agent`.
 */
export function piCliPath(env: Record<string, string | undefined>): string {
  const explicit = env.PI_TASKS_PI_CLI?.trim();
  if (explicit) return explicit;
  const running = process.argv[1];
  if (running !== undefined && basename(running) === "cli.js" && running.includes("pi-coding-agent") && existsSync(running)) return running;
  const main = fileURLToPath(import.meta.resolve("@earendil-works/pi-coding-agent"));
  return join(dirname(main), "bundle", "cli.js");
}

export interface PiLaunch {
  readonly model?: string;
  /** Scenario module for the scripted model (demo and tests); implies `faux/faux-1`. */
  readonly script?: string;
}

/**
 * Arguments after `bun <cli.js>` for a headless RPC Pi with this extension. A real model keeps
 * Pi's session history (the historical record); a scripted one runs offline without a session file.
 */
export function piRpcArgs(launch: PiLaunch): string[] {
  const args = ["--mode", "rpc", "-e", PACKAGE_ROOT];
  if (launch.script !== undefined) args.push("--no-session", "--offline", "-e", SCRIPTED_MODEL_EXTENSION, "--model", SCRIPTED_MODEL);
  else if (launch.model !== undefined) args.push("--model", launch.model);
  return args;
}

/** Environment additions for a scripted Pi. */
export function scriptedEnv(launch: PiLaunch): Record<string, string> {
  return launch.script === undefined ? {} : { PI_TASKS_TEST_SCRIPT: launch.script, PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1", PI_TELEMETRY: "0" };
}
