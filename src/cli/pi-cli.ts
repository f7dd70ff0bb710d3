/**
 * How this package starts a real Pi: the Pi 1.6 CLI under Bun (Pi 1.6 does not run on Node 20),
 * in RPC mode, with this package's extension loaded (`-e <package root>`).
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** This package's root (what `-e` loads: its package.json names the extension). */
export const PACKAGE_ROOT = join(import.meta.dir, "..", "..");
/** The scripted model extension used by the demo and tests (`faux/faux-1`). */
export const SCRIPTED_MODEL_EXTENSION = join(PACKAGE_ROOT, "src", "demo", "scripted-model.ts");
export const SCRIPTED_MODEL = "faux/faux-1";

/** The Bun executable running this CLI. */
export function bunPath(): string {
  return process.execPath;
}

/** The Pi CLI entry: `PI_TASKS_PI_CLI`, else the installed `@earendil-works/pi-coding-agent`. */
export function piCliPath(env: Record<string, string | undefined>): string {
  const explicit = env.PI_TASKS_PI_CLI?.trim();
  if (explicit) return explicit;
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
