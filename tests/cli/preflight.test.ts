/**
 * `pi-tasks spawn` preflight: every problem it can see before starting anything fails with
 * `TASK_WORKER_PREFLIGHT_FAILED` (`details.check` names the check), exit 1, and leaves nothing
 * behind — no process, no spawned record, no log, no registration. Usage errors exit 2.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createVolatileTaskSession, type VolatileTaskSession } from "../../src/relay-client/session.ts";
import { maxWireIdChars, maxWorkerReadinessTimeoutMs, minWorkerReadinessTimeoutMs } from "../../src/protocol/limits.ts";
import { type CliRun, type CliSandbox, createCliSandbox, DEMO_WORKER_SCRIPT, jsonOf } from "../helpers/cli-kit.ts";
import { freePort } from "../../testkit/relay-process.ts";
import { relaySessions, relaySessionStatus } from "../../testkit/session-control.ts";

let sandbox: CliSandbox | undefined;
let session: VolatileTaskSession | undefined;

afterEach(async () => {
  session?.close();
  session = undefined;
  await sandbox?.cleanup();
  sandbox = undefined;
});

function workerName(): string {
  return `worker-${crypto.randomUUID().slice(0, 8)}`;
}

/** A sandbox with a relay, and `spawn` arguments for a scripted worker with `overrides` applied. */
async function setup(): Promise<{
  box: CliSandbox;
  url: string;
  name: string;
  args: (overrides?: Record<string, string | null>) => string[];
}> {
  const box = createCliSandbox();
  sandbox = box;
  const relay = await box.withRelay();
  const name = workerName();
  return {
    box,
    url: relay.url,
    name,
    args(overrides = {}) {
      const flags: Record<string, string | null> = {
        "--name": name,
        "--project-dir": box.projectDir,
        "--relay": relay.url,
        "--script": DEMO_WORKER_SCRIPT,
        ...overrides,
      };
      return [
        "spawn",
        "--task-worker",
        ...Object.entries(flags).flatMap(([flag, value]) => (value === null ? [] : [flag, value])),
        "--json",
      ];
    },
  };
}

function logFiles(box: CliSandbox): string[] {
  try {
    return readdirSync(join(box.stateDir, "logs"));
  } catch {
    return [];
  }
}

/** The run failed preflight with `check`, and nothing of the worker exists anywhere. */
async function expectPreflight(run: CliRun, box: CliSandbox, url: string, name: string, check: string): Promise<any> {
  const out = jsonOf(run);
  expect(out).toMatchObject({ ok: false, error: { code: "TASK_WORKER_PREFLIGHT_FAILED", retryable: false, details: { check } } });
  expect(run.code).toBe(1);
  expect(box.processes()).toEqual([]);
  expect(box.spawnedRecords()).toEqual([]);
  expect(logFiles(box)).toEqual([]);
  expect((await relaySessions(url)).map((entry) => entry.session).filter((listed) => listed === name)).toEqual([]);
  return out;
}

describe("spawn preflight", () => {
  test("a project dir that does not exist", async () => {
    const { box, url, name, args } = await setup();
    const missing = join(box.dir, "missing");
    const out = await expectPreflight(await box.run(args({ "--project-dir": missing })), box, url, name, "project-dir");
    expect(out.error.details.projectDir).toBe(missing);
  });

  test("a project dir that is a file", async () => {
    const { box, url, name, args } = await setup();
    const file = join(box.dir, "not-a-dir.txt");
    writeFileSync(file, "x");
    const out = await expectPreflight(await box.run(args({ "--project-dir": file })), box, url, name, "project-dir");
    expect(out.error.details.projectDir).toBe(file);
  });

  test("a --model that is not provider/id", async () => {
    const { box, url, name, args } = await setup();
    for (const model of ["justamodel", "/id", "provider/", "pro vider/id"]) {
      const out = await expectPreflight(await box.run(args({ "--script": null, "--model": model })), box, url, name, "model");
      expect(out.error.message).toContain("provider/id");
    }
  });

  test("a --model Pi does not list fails; one Pi lists passes the model check", async () => {
    const { box, url, name, args } = await setup();
    const out = await expectPreflight(await box.run(args({ "--script": null, "--model": "nope/none" })), box, url, name, "model");
    expect(out.error.details.model).toBe("nope/none");
    // Positive control: a provider configured in this sandbox's Pi agent dir is listed, so the
    // same spawn gets past the model check and stops at the next one (an unreachable relay).
    writeFileSync(
      join(box.agentDir, "models.json"),
      JSON.stringify({
        providers: {
          clitest: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "unused", models: [{ id: "tiny-1" }] },
        },
      }),
    );
    const closed = `http://127.0.0.1:${freePort()}`;
    await expectPreflight(
      await box.run(args({ "--script": null, "--model": "clitest/tiny-1", "--relay": closed })),
      box,
      url,
      name,
      "relay",
    );
    // …and the same provider with an id it does not have is refused again.
    await expectPreflight(await box.run(args({ "--script": null, "--model": "clitest/tiny-2" })), box, url, name, "model");
  });

  test("a relay nobody listens on", async () => {
    const { box, url, name, args } = await setup();
    const closed = `http://127.0.0.1:${freePort()}`;
    const out = await expectPreflight(await box.run(args({ "--relay": closed })), box, url, name, "relay");
    expect(out.error.details.relay).toBe(closed);
    expect(typeof out.error.details.cause).toBe("string");
  });

  test("a relay URL that is not a bare origin (or plain http off loopback)", async () => {
    const { box, url, name, args } = await setup();
    for (const relay of [`${url}/api`, `${url}/?x=1`, `${url.replace("http://", "http://user:pw@")}`, "http://example.com", "not a url"]) {
      await expectPreflight(await box.run(args({ "--relay": relay })), box, url, name, "relay");
    }
  });

  test("a name another session already registered", async () => {
    const { box, url, name, args } = await setup();
    session = createVolatileTaskSession({ url, callerSession: name });
    const binding = await session.connect();
    const run = await box.run(args());
    const out = jsonOf(run);
    expect(out).toMatchObject({ ok: false, error: { code: "TASK_WORKER_PREFLIGHT_FAILED", details: { check: "name", session: name } } });
    expect(run.code).toBe(1);
    expect(box.processes()).toEqual([]);
    expect(box.spawnedRecords()).toEqual([]);
    expect(logFiles(box)).toEqual([]);
    // The registration that was there is untouched and still the only one.
    const status = await relaySessionStatus(url, name);
    expect(status.status).toBe(200);
    expect(status.body.taskEndpoint).toEqual(binding.endpoint);
    expect((await relaySessions(url)).map((entry) => entry.session)).toEqual([name]);
  });

  test("a name of the wrong length", async () => {
    const { box, url, args } = await setup();
    const long = "n".repeat(maxWireIdChars + 1);
    await expectPreflight(await box.run(args({ "--name": long })), box, url, long, "name");
    await expectPreflight(await box.run(args({ "--name": "" })), box, url, "", "name");
  });

  test("--readiness-timeout-ms out of bounds", async () => {
    const { box, url, name, args } = await setup();
    for (const timeout of [minWorkerReadinessTimeoutMs - 1, maxWorkerReadinessTimeoutMs + 1, 0]) {
      const out = await expectPreflight(
        await box.run(args({ "--readiness-timeout-ms": String(timeout) })),
        box,
        url,
        name,
        "readiness-timeout-ms",
      );
      expect(out.error.message).toContain(String(minWorkerReadinessTimeoutMs));
      expect(out.error.message).toContain(String(maxWorkerReadinessTimeoutMs));
    }
  });

  test("a --script that is not an absolute path to a module", async () => {
    const { box, url, name, args } = await setup();
    await expectPreflight(await box.run(args({ "--script": "src/demo/scenarios/demo-worker.ts" })), box, url, name, "script");
    await expectPreflight(await box.run(args({ "--script": join(box.dir, "missing.ts") })), box, url, name, "script");
  });

  test("usage errors exit 2 with CLI_USAGE: no --task-worker, no --name, a bad number, an unknown flag", async () => {
    const { box, url, name, args } = await setup();
    const full = args();
    const cases = [
      full.filter((arg) => arg !== "--task-worker"),
      args({ "--name": null }),
      args({ "--project-dir": null }),
      args({ "--readiness-timeout-ms": "soon" }),
      [...full, "--bogus"],
    ];
    for (const argv of cases) {
      const run = await box.run(argv);
      expect({ argv, code: run.code }).toEqual({ argv, code: 2 });
      expect(jsonOf(run)).toMatchObject({ ok: false, error: { code: "CLI_USAGE", retryable: false } });
    }
    expect(box.processes()).toEqual([]);
    expect(box.spawnedRecords()).toEqual([]);
    expect((await relaySessions(url)).map((entry) => entry.session).filter((listed) => listed === name)).toEqual([]);
    // Without --json the problem and the usage text go to stderr, nothing to stdout.
    const text = await box.run(full.filter((arg) => arg !== "--task-worker" && arg !== "--json"));
    expect(text.code).toBe(2);
    expect(text.stdout).toBe("");
    expect(text.stderr).toContain("CLI_USAGE");
    expect(text.stderr).toContain("--task-worker");
    expect(text.stderr).toContain("usage: pi-tasks");
  });
});
