/**
 * The rest of the command line: `relay` (one smoke check of its readiness line and its port
 * validation), `help`, unknown commands, and `status`/`list` against a relay.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { RELAY_SECRET_DIR_VARIABLE } from "../../src/trust/relay-secret.ts";
import { spawn } from "bun";
import { maxTcpPort } from "../../src/protocol/limits.ts";
import { RELAY_PROFILE } from "../../src/protocol/names.ts";
import { ensureRelay } from "../../src/host/embedded-relay.ts";
import { isAlive } from "../../src/platform/processes.ts";
import { WireSession } from "../../src/conformance/wire-client.ts";
import { relayConfigFromEnv } from "../../src/relay-client/config.ts";
import { BUN, CLI_ENTRY, type CliSandbox, createCliSandbox, jsonOf, REPO_ROOT } from "../helpers/cli-kit.ts";
import { freePort } from "../../testkit/relay-process.ts";

const COMMANDS = ["relay", "spawn", "status", "list", "kill", "demo", "help"];

let sandbox: CliSandbox | undefined;

afterEach(async () => {
  await sandbox?.cleanup();
  sandbox = undefined;
});

function box(): CliSandbox {
  sandbox = createCliSandbox();
  return sandbox;
}

describe("pi-tasks relay", () => {
  test("--port 0 prints exactly the readiness line, serves, and stops on SIGTERM with 0", async () => {
    const sandboxed = box();
    const child = spawn([BUN, CLI_ENTRY, "relay", "--port", "0"], {
      cwd: REPO_ROOT,
      env: sandboxed.env(),
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    try {
      const reader = child.stdout.getReader();
      const decoder = new TextDecoder();
      let text = "";
      const readMore = async () => {
        const chunk = await reader.read();
        if (!chunk.done) text += decoder.decode(chunk.value, { stream: true });
        return !chunk.done;
      };
      while (!text.includes("\n") && (await readMore()));
      const line = text.split("\n")[0]!;
      const ready = JSON.parse(line);
      expect(Object.keys(ready)).toEqual(["event", "url", "epoch", "profile"]);
      expect(ready).toEqual({
        event: "listening",
        url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        epoch: expect.stringMatching(/^[0-9a-f-]{36}$/),
        profile: RELAY_PROFILE,
      });
      expect(line).toBe(JSON.stringify({ event: "listening", url: ready.url, epoch: ready.epoch, profile: RELAY_PROFILE }));
      // It serves the session routes the CLI uses.
      const list = await sandboxed.run(["list", "--relay", ready.url, "--json"]);
      expect(list.code).toBe(0);
      expect(jsonOf(list)).toEqual({ ok: true, relay: ready.url, sessions: [], spawned: [] });
      child.kill("SIGTERM");
      expect(await child.exited).toBe(0);
      // Nothing but the readiness line on stdout.
      while (await readMore());
      expect(text).toBe(`${line}\n`);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  test("a port out of range is a usage error (exit 2, one JSON line on stderr)", async () => {
    const sandboxed = box();
    for (const port of [String(maxTcpPort + 1), "-1", "http"]) {
      const run = await sandboxed.run(["relay", "--port", port]);
      expect({ port, code: run.code }).toEqual({ port, code: 2 });
      expect(run.stdout).toBe("");
      const [line, ...rest] = run.stderr.split("\n").filter(Boolean);
      expect(rest).toEqual([]);
      expect(JSON.parse(line!)).toMatchObject({ ok: false, error: { code: "CLI_USAGE" } });
    }
  });
});

/** The first line `pi-tasks relay` prints (its readiness line), parsed; the process keeps running. */
async function readinessOf(child: ReturnType<typeof spawn>): Promise<{ url: string }> {
  const reader = (child.stdout as ReadableStream<Uint8Array>).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const chunk = await reader.read();
    if (chunk.done) break;
    text += new TextDecoder().decode(chunk.value);
  }
  reader.releaseLock();
  return JSON.parse(text.split("\n")[0]!) as { url: string };
}

describe("pi-tasks relay follows WOLFPACK_PORT, as Pis do", () => {
  test("without --port the relay serves on WOLFPACK_PORT; relay stop without --port stops the relay pi-tasks started there", async () => {
    const sandboxed = box();
    const port = freePort();
    const child = spawn([BUN, CLI_ENTRY, "relay"], {
      cwd: REPO_ROOT,
      env: sandboxed.env({ WOLFPACK_PORT: String(port) }),
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    try {
      expect((await readinessOf(child)).url).toBe(`http://127.0.0.1:${port}`);
    } finally {
      child.kill("SIGTERM");
      await child.exited;
    }
    // The relay a Pi starts for WOLFPACK_PORT (the embedded relay) is the one `relay stop` finds there.
    // The test run's relay secrets (tests/helpers/preload.ts), never the runner's own ~/.pi/pi-tasks-relays.
    const env = {
      PI_TASKS_HOME: sandboxed.stateDir,
      WOLFPACK_PORT: String(port),
      WOLFPACK_JWT_SECRET: "",
      [RELAY_SECRET_DIR_VARIABLE]: process.env[RELAY_SECRET_DIR_VARIABLE],
    };
    const started = await ensureRelay({ env, config: relayConfigFromEnv(env) });
    expect(started.state).toBe("started");
    const stopped = await sandboxed.run(["relay", "stop", "--json"], { env: { WOLFPACK_PORT: String(port) } });
    expect({ code: stopped.code, value: jsonOf(stopped) }).toEqual({
      code: 0,
      value: { ok: true, port, pid: started.record!.pid, stopped: true },
    });
    expect(isAlive(started.record!.pid)).toBe(false);
  });
});

describe("list and status read as tables; errors name the relay", () => {
  test("list prints a table of the sessions (and spawned workers), status the session's fields; --json keeps the objects", async () => {
    const sandboxed = box();
    const relay = await sandboxed.withRelay();
    const alpha = await WireSession.connect(relay.url, { callerSession: "alpha" });
    const list = await sandboxed.run(["list", "--relay", relay.url]);
    expect(list.code).toBe(0);
    const lines = list.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe(`Sessions on the relay at ${relay.url}:`);
    expect(lines[1]).toMatch(/^SESSION\s+ENDPOINT\s+SPAWNED BY PI-TASKS$/);
    expect(lines[2]).toMatch(new RegExp(`^alpha\\s+${alpha.endpoint.id}$`));
    expect(list.stdout).not.toContain("{");
    const status = await sandboxed.run(["status", "alpha", "--relay", relay.url]);
    expect(status.stdout).toContain("session:    alpha\n");
    expect(status.stdout).toContain(`relay:      ${relay.url}\n`);
    expect(status.stdout).toContain(`endpoint:   ${alpha.endpoint.id}\n`);
    expect(status.stdout).not.toContain("{");
    expect(jsonOf(await sandboxed.run(["status", "alpha", "--relay", relay.url, "--json"]))).toMatchObject({
      ok: true,
      session: "alpha",
      taskEndpoint: alpha.endpoint,
    });
  });

  test("an unreachable relay is named with its URL; a URL that is no relay URL is refused as such, before anything is sent", async () => {
    const sandboxed = box();
    const url = `http://127.0.0.1:${freePort()}`;
    const down = await sandboxed.run(["list"], { env: { PI_TASKS_RELAY_URL: url } });
    expect(down.code).toBe(1);
    expect(down.stderr).toStartWith(`pi-tasks list: RELAY_UNAVAILABLE: no relay answers at ${url}`);
    const ftp = await sandboxed.run(["status", "alpha", "--relay", "ftp://x", "--json"]);
    expect(jsonOf(ftp)).toMatchObject({
      ok: false,
      error: { code: "INVALID_CONFIGURATION", message: expect.stringContaining("ftp://x must be https, or http on") },
    });
    const path = await sandboxed.run(["list", "--relay", "http://127.0.0.1:1/api"]);
    expect(path.stderr).toContain("INVALID_CONFIGURATION");
  });
});

describe("help and unknown commands", () => {
  test("help (and no command at all) prints the usage and exits 0", async () => {
    const sandboxed = box();
    for (const argv of [["help"], []]) {
      const run = await sandboxed.run(argv);
      expect(run.code).toBe(0);
      expect(run.stderr).toBe("");
      expect(run.stdout).toStartWith("usage: pi-tasks <command>");
      for (const command of COMMANDS) expect(run.stdout).toContain(`\n  ${command}`);
    }
  });

  test("every command answers --help (and -h) with its own usage and exits 0", async () => {
    const sandboxed = box();
    for (const command of COMMANDS) {
      for (const flag of ["--help", "-h"]) {
        const run = await sandboxed.run([command, flag]);
        expect({ command, flag, code: run.code, stderr: run.stderr }).toEqual({ command, flag, code: 0, stderr: "" });
        expect(run.stdout).toStartWith(`usage: pi-tasks ${command}`);
      }
    }
    expect((await sandboxed.run(["spawn", "--help"])).stdout).toContain("--task-worker --name NAME --project-dir DIR");
    expect((await sandboxed.run(["help", "spawn"])).stdout).toStartWith("usage: pi-tasks spawn");
  });

  test("errors name the command", async () => {
    const sandboxed = box();
    const text = await sandboxed.run(["spawn", "--bogus"]);
    expect(text.code).toBe(2);
    expect(text.stderr).toStartWith("pi-tasks spawn: CLI_USAGE: ");
    expect(text.stderr).toContain("usage: pi-tasks spawn");
    const json = await sandboxed.run(["kill", "--json"]);
    expect(jsonOf(json)).toMatchObject({ ok: false, command: "kill", error: { code: "CLI_USAGE" } });
  });

  test("an unknown command exits 2 with CLI_USAGE", async () => {
    const sandboxed = box();
    const json = await sandboxed.run(["frobnicate", "--json"]);
    expect(json.code).toBe(2);
    expect(json.stderr).toBe("");
    expect(jsonOf(json)).toEqual({
      ok: false,
      command: "frobnicate",
      error: { code: "CLI_USAGE", message: expect.stringContaining("frobnicate"), retryable: false, details: expect.any(Object) },
    });
    const text = await sandboxed.run(["frobnicate"]);
    expect(text.code).toBe(2);
    expect(text.stdout).toBe("");
    expect(text.stderr).toContain("pi-tasks: CLI_USAGE:");
    expect(text.stderr).toContain("usage: pi-tasks");
  });
});

describe("status and list", () => {
  test("status of a name nobody registered fails with the relay's code; list without a relay fails", async () => {
    const sandboxed = box();
    const relay = await sandboxed.withRelay();
    const status = await sandboxed.run(["status", "nobody-here", "--relay", relay.url, "--json"]);
    expect(status.code).toBe(1);
    expect(jsonOf(status)).toMatchObject({ ok: false, error: { code: "CALLER_NOT_FOUND" } });
    const list = await sandboxed.run(["list", "--json"], { env: { PI_TASKS_RELAY_URL: `http://127.0.0.1:${freePort()}` } });
    expect(list.code).toBe(1);
    expect(jsonOf(list).ok).toBe(false);
    for (const argv of [
      ["status", "--json"],
      ["list", "extra", "--json"],
    ]) {
      const usage = await sandboxed.run(argv);
      expect(usage.code).toBe(2);
      expect(jsonOf(usage).error.code).toBe("CLI_USAGE");
    }
  });
});
