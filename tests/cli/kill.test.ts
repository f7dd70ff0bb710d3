/**
 * `pi-tasks kill NAME`: stops only workers this CLI (this state dir) spawned, and confirms that
 * both the holder and Pi are gone.
 *
 * The relay side: a stopping worker disconnects its registration (best effort, within
 * `shutdownDisconnectMs`), so once `kill` returns the relay no longer lists it.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { createVolatileTaskSession, type VolatileTaskSession } from "../../src/relay-client/session.ts";
import { type CliSandbox, createCliSandbox, DEMO_WORKER_SCRIPT, jsonOf, running } from "../helpers/cli-kit.ts";
import { relaySessions, relaySessionStatus } from "../../testkit/session-control.ts";

const sandboxes: CliSandbox[] = [];
let session: VolatileTaskSession | undefined;

afterEach(async () => {
  session?.close();
  session = undefined;
  for (const box of sandboxes.splice(0)) await box.cleanup();
});

function sandbox(): CliSandbox {
  const box = createCliSandbox();
  sandboxes.push(box);
  return box;
}

describe("pi-tasks kill", () => {
  test("stops a spawned worker (holder and Pi), once; other state dirs do not own it", async () => {
    const box = sandbox();
    const relay = await box.withRelay();
    const name = `worker-${crypto.randomUUID().slice(0, 8)}`;
    const spawned = await box.run([
      "spawn",
      "--task-worker",
      "--name",
      name,
      "--project-dir",
      box.projectDir,
      "--relay",
      relay.url,
      "--script",
      DEMO_WORKER_SCRIPT,
      "--json",
    ]);
    expect(spawned.code).toBe(0);
    const worker = jsonOf(spawned);
    const piPid = Number(readFileSync(`${worker.log}.pi-pid`, "utf8").trim());
    expect(running(worker.pid)).toBe(true);
    expect(running(piPid)).toBe(true);

    // Another CLI state dir did not spawn it: refused, and the worker keeps running.
    const stranger = sandbox();
    const refused = await stranger.run(["kill", name, "--json"]);
    expect(refused.code).toBe(1);
    expect(jsonOf(refused)).toMatchObject({ ok: false, error: { code: "SESSION_NOT_OWNED", details: { session: name } } });
    expect(running(worker.pid)).toBe(true);
    expect(running(piPid)).toBe(true);

    const killed = await box.run(["kill", name, "--json"]);
    expect(killed.code).toBe(0);
    expect(jsonOf(killed)).toEqual({ ok: true, session: name, killed: true, pids: [worker.pid, piPid] });
    // `kill` returns only once both are gone.
    expect(running(worker.pid)).toBe(false);
    expect(running(piPid)).toBe(false);
    expect(box.processes()).toEqual([]);
    expect(box.spawnedRecords()).toEqual([]);

    // The worker disconnected on shutdown: the relay no longer lists it, and status says so.
    expect((await relaySessions(relay.url)).find((entry) => entry.session === name)).toBeUndefined();
    const status = await box.run(["status", name, "--relay", relay.url, "--json"]);
    expect(status.code).toBe(1);
    expect(jsonOf(status).error.code).toBe("CALLER_NOT_FOUND");

    // A second kill: this CLI no longer owns a worker of that name.
    const twice = await box.run(["kill", name, "--json"]);
    expect(twice.code).toBe(1);
    expect(jsonOf(twice)).toMatchObject({ ok: false, error: { code: "SESSION_NOT_OWNED", retryable: false, details: { session: name } } });
    // Text mode: the code on stderr, nothing on stdout.
    const text = await box.run(["kill", name]);
    expect(text.code).toBe(1);
    expect(text.stdout).toBe("");
    expect(text.stderr).toContain("SESSION_NOT_OWNED");
  }, 30_000);

  test("a session registered on the relay by someone else is not this CLI's to kill", async () => {
    const box = sandbox();
    const relay = await box.withRelay();
    const name = `someone-${crypto.randomUUID().slice(0, 8)}`;
    session = createVolatileTaskSession({ url: relay.url, callerSession: name });
    const binding = await session.connect();
    const run = await box.run(["kill", name, "--json"]);
    expect(run.code).toBe(1);
    expect(jsonOf(run)).toMatchObject({ ok: false, error: { code: "SESSION_NOT_OWNED", details: { session: name } } });
    const status = await relaySessionStatus(relay.url, name);
    expect(status.status).toBe(200);
    expect(status.body.taskEndpoint).toEqual(binding.endpoint);
    // Usage: exactly one name.
    for (const argv of [
      ["kill", "--json"],
      ["kill", name, "other", "--json"],
    ]) {
      const usage = await box.run(argv);
      expect(usage.code).toBe(2);
      expect(jsonOf(usage).error.code).toBe("CLI_USAGE");
    }
  });
});
