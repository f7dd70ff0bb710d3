/**
 * `pi-tasks conformance URL` as a user runs it: against a real relay process, from this checkout
 * and from a copy of the package elsewhere (the checks run in the CLI's own process), and against a
 * URL where nothing listens.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn } from "bun";
import { cpSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { RELAY_FEATURES } from "../../src/relay-server/engine.ts";
import { BUN, CLI_ENTRY, freePort, REPO_ROOT, type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";

/** A whole suite run takes a few seconds (its slowest check waits for the 5 s body deadline). */
const RUN_TIMEOUT_MS = 60_000;
const SUMMARY = /^conformance: (\d+) passed, (\d+) failed$/;

let relay: RelayProcess | undefined;
let copy: string | undefined;

beforeAll(async () => {
  relay = await startRelayProcess();
  // The package as shipped (package.json `files` holds `src`), outside this checkout.
  copy = mkdtempSync(join(tmpdir(), "pi-tasks-package-"));
  cpSync(join(REPO_ROOT, "src"), join(copy, "src"), { recursive: true });
  cpSync(join(REPO_ROOT, "package.json"), join(copy, "package.json"));
  symlinkSync(join(REPO_ROOT, "node_modules"), join(copy, "node_modules"));
});

afterAll(async () => {
  await relay?.stop();
  if (copy !== undefined) rmSync(copy, { recursive: true, force: true });
});

async function conformance(args: readonly string[], options: { entry?: string; cwd?: string } = {}) {
  const env: Record<string, string | undefined> = { ...process.env, WOLFPACK_JWT_SECRET: "" };
  const child = spawn([BUN, options.entry ?? CLI_ENTRY, "conformance", ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { code, stdout, stderr };
}

describe("pi-tasks conformance", () => {
  test(
    "from this checkout, against our relay: every check passes and the last line says so",
    async () => {
      const run = await conformance([relay!.url]);
      const lines = run.stdout.trimEnd().split("\n");
      const summary = SUMMARY.exec(lines.at(-1) ?? "");
      expect(summary, run.stdout + run.stderr.slice(-2_000)).not.toBeNull();
      expect(Number(summary![1])).toBeGreaterThan(0);
      expect(Number(summary![2])).toBe(0);
      expect(run.code).toBe(0);
      // The default is what the profile advertises: nothing skipped on our relay.
      expect(run.stdout).not.toContain("skipped");
      // Each check reports as it ends: `(pass) group > name [N ms]`.
      expect(run.stderr).toMatch(/^\(pass\) profile and response envelope > .+ \[\d+ ms\]$/m);
    },
    RUN_TIMEOUT_MS,
  );

  test(
    "from a copy of the package elsewhere, --features '' --json: Wolfpack's wire only, the additions' checks skipped",
    async () => {
      const run = await conformance([relay!.url, "--features", "", "--json"], {
        entry: join(copy!, relative(REPO_ROOT, CLI_ENTRY)),
        cwd: tmpdir(),
      });
      const result = JSON.parse(run.stdout);
      expect(result, run.stderr.slice(-2_000)).toMatchObject({
        ok: true,
        url: relay!.url,
        features: [],
        advertised: [...RELAY_FEATURES],
        failed: 0,
        failures: [],
      });
      expect(result.passed).toBeGreaterThan(0);
      expect(result.skipped).toBeGreaterThan(0);
      expect(run.code).toBe(0);
    },
    RUN_TIMEOUT_MS,
  );

  test("a URL where nothing listens fails at once with a non-zero exit and a clear message", async () => {
    const url = `http://127.0.0.1:${freePort()}`;
    const run = await conformance([url]);
    expect(run.code).not.toBe(0);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain(`pi-tasks conformance: RELAY_UNAVAILABLE: no volatile-v1 relay answers at ${url}`);
    expect(run.stderr).toContain("nothing was checked");
    const json = await conformance([url, "--json"]);
    expect(json.code).not.toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, command: "conformance", error: { code: "RELAY_UNAVAILABLE" } });
  });

  test(
    "a failing check fails the run: exit 1 and F > 0 on the last line",
    async () => {
      // Our relay does not have a feature nobody defined, so the advertised-features check fails.
      const run = await conformance([relay!.url, "--features", "no-such-feature-v1"]);
      const summary = SUMMARY.exec(run.stdout.trimEnd().split("\n").at(-1) ?? "");
      expect(summary, run.stdout).not.toBeNull();
      expect(Number(summary![2])).toBeGreaterThan(0);
      expect(run.stdout).toContain("failed: profile and response envelope > additions: the profile advertises every required feature");
      // The failure's message follows its report on stderr: what was expected, what the relay answered.
      expect(run.stderr).toContain("to contain 'no-such-feature-v1'");
      expect(run.code).toBe(1);
    },
    RUN_TIMEOUT_MS,
  );
});
