/**
 * What Pi's installer leaves on a user's machine runs there: the package packed and installed with
 * `npm install --omit=dev --omit=peer`, run by Node ≥ 22.19 with no bun on PATH. The relay, the
 * CLI's `--help`, `identity`, `peers list` and `conformance` all work from that install, and
 * nothing of what the installer omits (dev and peer dependencies) is there to be imported.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { type Subprocess, spawn, spawnSync } from "bun";
import { RELAY_PROFILE } from "../../src/protocol/names.ts";
import { installedPackage, NODE_BINARY, nodeHostMissingReason, nodeHostPath } from "../helpers/host-kit.ts";
import { runToExit } from "../helpers/run-to-exit.ts";

setDefaultTimeout(60_000);

/** Issue 40: the production install (pi-tasks and its dependencies) stays under 6 MiB. */
const maxProductionInstallBytes = 6 * 1024 * 1024;

const missing = nodeHostMissingReason();
if (missing !== undefined && process.env.PI_TASKS_CI !== "1") process.stderr.write(`skip: the production install on Node: ${missing}\n`);

describe.skipIf(missing !== undefined && process.env.PI_TASKS_CI !== "1")("the package as Pi installs it, on Node with no bun", () => {
  let installed: string;
  let home: string;
  let relay: Subprocess<"ignore", "pipe", "pipe"> | undefined;

  beforeAll(() => {
    if (missing !== undefined) throw new Error(missing);
    installed = installedPackage();
    home = mkdtempSync(join(tmpdir(), "pi-tasks-prod-home-"));
  });
  afterAll(() => {
    relay?.kill("SIGKILL");
    if (home !== undefined) rmSync(home, { recursive: true, force: true });
  });

  const env = () => ({ PATH: nodeHostPath(), HOME: home, PI_TASKS_HOME: join(home, "pi-tasks") });
  const cli = (args: readonly string[]) =>
    runToExit([NODE_BINARY, join(installed, "dist", "pi-tasks.js"), ...args], { cwd: home, env: env(), timeoutMs: 30_000 });

  test("the install holds only the production dependencies: no dev or peer dependency, no bun", () => {
    const modules = dirname(installed);
    const names = readdirSync(modules).filter((name) => !name.startsWith("."));
    expect(names.sort()).toEqual(["eventemitter3", "ky", "nanoid", "p-queue", "p-timeout", "pi-tasks"]);
    // OpenTelemetry is an optional peer (installed only for traces): the install stays small.
    const bytes = Number(spawnSync(["du", "-sb", modules]).stdout.toString().split(/\s/)[0]);
    expect(bytes).toBeLessThan(maxProductionInstallBytes);
    for (const omitted of ["@sinclair/typebox", "typebox", "bun", "@earendil-works", "@opentelemetry"])
      expect({ omitted, present: existsSync(join(modules, omitted)) }).toEqual({ omitted, present: false });
  });

  test("--help, identity and peers list", async () => {
    const help = await cli(["--help"]);
    expect({ code: help.code, stderr: help.stderr }).toEqual({ code: 0, stderr: "" });
    expect(help.stdout).toContain("conformance");
    const identity = await cli(["identity", "--json"]);
    expect(identity.code).toBe(0);
    expect(JSON.parse(identity.stdout)).toMatchObject({ ok: true, publicKey: expect.stringMatching(/^ed25519:/) });
    const peers = await cli(["peers", "list", "--json"]);
    expect(JSON.parse(peers.stdout)).toMatchObject({ ok: true, peers: [] });
  });

  test("a plain Node program imports the library (compiled ESM behind the package's exports) and runs a relay from it; the Redis store asks for @redis/client", async () => {
    // Beside the install's node_modules, as a program of the user's would be.
    const program = join(dirname(dirname(installed)), "uses-pi-tasks.mjs");
    writeFileSync(
      program,
      [
        'import { createTaskStore, names } from "pi-tasks";',
        'import { createRedisStore, startRelayServer } from "pi-tasks/relay";',
        'import { runConformance } from "pi-tasks/conformance";',
        "const relay = await startRelayServer({ port: 0, env: {} });",
        "const profile = await (await fetch(`${relay.url}/api/task-relay/profile`)).json();",
        "await relay.stop();",
        // The Redis client is not in the library's build: without @redis/client installed the Redis store says so, typed.
        'const redis = await createRedisStore({ url: "redis://127.0.0.1:1" }).then(() => "opened", (error) => error.code);',
        "console.log(JSON.stringify({ profile: profile.profile, same: profile.profile === names.RELAY_PROFILE, store: typeof createTaskStore, conformance: typeof runConformance, redis }));",
      ].join("\n"),
    );
    const run = await runToExit([NODE_BINARY, program], { cwd: dirname(dirname(installed)), env: env(), timeoutMs: 30_000 });
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
    expect(JSON.parse(run.stdout)).toEqual({
      profile: RELAY_PROFILE,
      same: true,
      store: "function",
      conformance: "function",
      redis: "REDIS_CLIENT_MISSING",
    });
    // Its types are there, behind the `types` condition.
    expect(existsSync(join(installed, "lib", "types", "src", "index.d.ts"))).toBe(true);
  });

  test("the relay runs on Node and passes the conformance suite run from the same install", async () => {
    relay = spawn([NODE_BINARY, join(installed, "dist", "pi-tasks.js"), "relay", "--port", "0"], {
      cwd: home,
      env: env(),
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const reader = relay.stdout.getReader();
    const first = await reader.read();
    reader.releaseLock();
    const ready = JSON.parse(new TextDecoder().decode(first.value).split("\n")[0]!) as { event: string; url: string; profile: string };
    expect(ready).toMatchObject({ event: "listening", profile: RELAY_PROFILE });
    const checked = await cli(["conformance", ready.url, "--json"]);
    const summary = JSON.parse(checked.stdout) as { ok: boolean; passed: number; failed: number; failures: string[] };
    expect({ code: checked.code, failed: summary.failed, failures: summary.failures }).toEqual({ code: 0, failed: 0, failures: [] });
    expect(summary.passed).toBeGreaterThan(60);
    relay.kill("SIGTERM");
    expect(await relay.exited).toBe(0);
  });
});
