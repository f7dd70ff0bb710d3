/**
 * How pi-tasks starts its own processes — the relay, the worker holder — on whatever runs it.
 *
 * Pi runs on Node (≥ 22.19, its users' host), on Bun (this repository's tests), or as a program
 * compiled with Bun (Pi's release binaries, where `process.execPath` is Pi itself). Node does not
 * strip TypeScript under `node_modules`, so the processes run the built JavaScript in `dist/`
 * (`npm run build`, committed with the sources and checked by tests/cli/dist.test.ts), which
 * imports nothing from dev or peer dependencies:
 * - under Node, with the Node that runs us;
 * - under Bun, with that Bun;
 * - under a Bun-compiled program, with that program as Bun (`BUN_BE_BUN=1`);
 * - `PI_TASKS_RUNTIME` names another JavaScript runtime (node or bun) for all of them.
 */
import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The variable that names the JavaScript runtime for pi-tasks' own processes. */
export const RUNTIME_VARIABLE = "PI_TASKS_RUNTIME";
/** Makes a Bun-compiled program behave as the `bun` command. */
const BE_BUN_VARIABLE = "BUN_BE_BUN";
const PACKAGE_NAME = "pi-tasks";

/** The nearest directory at or above `from` holding this package's package.json. */
function packageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, "utf8")) as { name?: unknown }).name === PACKAGE_NAME) return dir;
      } catch {
        // Not ours (or unreadable): keep looking upward.
      }
    }
    if (dirname(dir) === dir) throw new Error(`${PACKAGE_NAME}: no package.json of ${PACKAGE_NAME} above ${from}`);
  }
}

/**
 * This package's root (what `pi -e` loads: its package.json names the extension), from this
 * module's own URL — in `src/cli/` and in the built `dist/` alike. Inside Pi, extensions are
 * loaded by jiti, which keeps `import.meta.url`.
 */
export const PACKAGE_ROOT = packageRoot(dirname(fileURLToPath(import.meta.url)));
/** The built command line, what pi-tasks' own processes run (`dist/pi-tasks.js`). */
export const CLI_BUNDLE = join(PACKAGE_ROOT, "dist", "pi-tasks.js");
/** The built worker holder (`dist/worker-host.js`). */
export const WORKER_HOST_BUNDLE = join(PACKAGE_ROOT, "dist", "worker-host.js");

/** A command to start: the executable, the arguments before the script's, and environment additions. */
export interface RuntimeCommand {
  readonly command: string;
  readonly env: Readonly<Record<string, string>>;
}

/** Whether this process is a program compiled with Bun (not the `bun` command itself). */
export function isCompiledBun(): boolean {
  return process.versions.bun !== undefined && !/^bun(-debug)?(\.exe)?$/.test(basename(process.execPath));
}

/** The JavaScript runtime for pi-tasks' own processes (see the header). */
export function ownRuntime(env: Record<string, string | undefined>): RuntimeCommand {
  const named = env[RUNTIME_VARIABLE]?.trim();
  if (named) return { command: named, env: {} };
  if (isCompiledBun()) return { command: process.execPath, env: { [BE_BUN_VARIABLE]: "1" } };
  return { command: process.execPath, env: {} };
}

/** `env` without what only the runtime command needed (a compiled Pi started with it would act as bun). */
export function withoutRuntimeVariables(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { [BE_BUN_VARIABLE]: _beBun, ...rest } = env;
  return rest;
}
