/**
 * Pi's installer takes a package from npm, from git or from a local path (docs in README.md,
 * "Install into Pi"). From each, on Node with no bun on PATH and a fresh agent dir: `pi install
 * <source>`, then the first Pi (`pi -p /tasks`) starts the embedded relay from what was installed
 * and prints the board. The npm source is the packed tarball (`npm:pi-tasks@file:…`: the same npm
 * install Pi runs for a published version), the git source this repository's HEAD served by
 * `git daemon` on loopback, the local path the production install of tests/helpers/host-kit.ts.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { type Subprocess, spawn } from "bun";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { stopEmbeddedRelay } from "../../src/host/embedded-relay.ts";
import { eventually } from "../../testkit/async.ts";
import { freePort, REPO_ROOT } from "../../testkit/relay-process.ts";
import { installedPackage, NODE_BINARY, nodeHostMissingReason, nodeHostPath } from "../helpers/host-kit.ts";
import { PI_CLI, runPiToExit } from "../helpers/pi-process.ts";
import { runToExit } from "../helpers/run-to-exit.ts";

setDefaultTimeout(120_000);

const missing = nodeHostMissingReason();
const runs = missing === undefined || process.env.PI_TASKS_CI === "1";
if (!runs) process.stderr.write(`skip: pi install from npm, git and a local path on Node: ${missing}\n`);

describe.skipIf(!runs)("pi install from each source, on Node with no bun", () => {
  let scratch: string;
  let daemon: Subprocess | undefined;
  let gitPort: number;

  beforeAll(async () => {
    if (missing !== undefined) throw new Error(missing);
    scratch = mkdtempSync(join(tmpdir(), "pi-tasks-sources-"));
    const served = join(scratch, "git", "me");
    mkdirSync(served, { recursive: true });
    const cloned = Bun.spawnSync(["git", "clone", "--quiet", "--bare", REPO_ROOT, join(served, "pi-tasks.git")], { stderr: "pipe" });
    if (cloned.exitCode !== 0) throw new Error(`git clone failed: ${cloned.stderr.toString()}`);
    gitPort = freePort();
    // git-daemon itself (not `git daemon`, which forks it): the SIGKILL below must reach the server,
    // and nothing it leaves behind may hold the runner's output open.
    const execPath = Bun.spawnSync(["git", "--exec-path"]).stdout.toString().trim();
    daemon = spawn(
      [
        join(execPath, "git-daemon"),
        `--base-path=${join(scratch, "git")}`,
        "--export-all",
        `--port=${gitPort}`,
        "--listen=127.0.0.1",
        "--reuseaddr",
        join(scratch, "git"),
      ],
      { stdout: "ignore", stderr: "ignore" },
    );
    const serving = await eventually(
      () =>
        Bun.spawnSync(["git", "ls-remote", `git://127.0.0.1:${gitPort}/me/pi-tasks.git`], { stdout: "ignore", stderr: "ignore" })
          .exitCode === 0,
      10_000,
      100,
    );
    if (!serving) throw new Error("git daemon did not serve the repository within 10 s");
  });
  afterAll(() => {
    daemon?.kill("SIGKILL");
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  /** The packed tarball made beside the production install (host-kit packs once per process). */
  function tarball(): string {
    const dir = dirname(dirname(dirname(installedPackage())));
    return join(dir, readdirSync(dir).find((name) => name.endsWith(".tgz"))!);
  }

  const sources: readonly (readonly [string, () => string])[] = [
    ["npm (the packed tarball)", () => `npm:pi-tasks@file:${tarball()}`],
    ["git (a clone served by git daemon)", () => `git:git://127.0.0.1:${gitPort}/me/pi-tasks.git`],
    ["a local path (a production install)", () => installedPackage()],
  ];

  test.each(sources)("from %s: the first Pi starts the relay from what was installed and prints the board", async (label, source) => {
    const agentDir = mkdtempSync(join(scratch, "agent-"));
    const project = join(agentDir, "project");
    mkdirSync(project);
    const port = freePort();
    // The runner's environment (npm needs its network settings, e.g. NODE_EXTRA_CA_CERTS), without
    // anything of pi-tasks' own, and with the node host's PATH.
    const inherited = Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !/^(PI_TASKS_|PI_TASK_WORKER|WOLFPACK_|PI_CODING_AGENT)/.test(name)),
    );
    const secrets = { PI_TASKS_RELAY_SECRET_DIR: process.env.PI_TASKS_RELAY_SECRET_DIR };
    const env = {
      ...inherited,
      ...secrets,
      PATH: nodeHostPath(),
      PI_CODING_AGENT_DIR: agentDir,
      PI_OFFLINE: "1",
      PI_SKIP_VERSION_CHECK: "1",
      PI_TELEMETRY: "0",
      WOLFPACK_PORT: String(port),
    };
    try {
      const installed = await runToExit([NODE_BINARY, PI_CLI, "install", source()], { cwd: project, env, timeoutMs: 90_000 });
      expect({
        code: installed.code,
        out: installed.stdout.trim().split("\n").at(-1),
        err: installed.code === 0 ? "" : installed.stderr,
      }).toEqual({ code: 0, out: `Installed ${source()}`, err: "" });
      const board = await runPiToExit(`print Pi "/tasks" (installed from ${label})`, [NODE_BINARY, PI_CLI, "-p", "/tasks"], {
        cwd: project,
        env,
        timeoutMs: 30_000,
      });
      expect({ code: board.code, err: board.code === 0 ? "" : board.stderr }).toEqual({ code: 0, err: "" });
      // Pi's print mode hands an extension's process.stdout to stderr (its stdout is the model's answer).
      const printed = `${board.stdout}${board.stderr}`;
      expect(printed).toContain("pi-tasks\nsession: project-");
      expect(printed).toMatch(new RegExp(`relay: http://127\\.0\\.0\\.1:${port} — started by this Pi \\(pid \\d+`));
      expect(board.stderr).not.toMatch(/uncaught|ENOENT|Cannot find module/i);
    } finally {
      const stopped = await stopEmbeddedRelay({ ...secrets, PI_TASKS_HOME: join(agentDir, "pi-tasks") }, port).catch(
        (error: unknown) => error,
      );
      expect(stopped).toMatchObject({ stopped: true });
    }
  });
});
