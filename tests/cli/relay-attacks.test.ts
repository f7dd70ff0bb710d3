/**
 * Attacks on the embedded relay from outside, each written against the code before the relay secret
 * (where each succeeded) and kept as the proof that it fails now:
 *
 * - another OS user connects to the relay a Pi started (refused: it cannot prove the relay secret);
 * - a squatter answers on the port before the first Pi starts (never used: the footer says so and
 *   nothing but the profile challenge reaches it);
 * - a token captured from one request is replayed (refused: one use per token id);
 * - `relay stop` with a record whose pid now names an unrelated process (nothing is signalled).
 *
 * And what must keep working: two PI_TASKS_HOMEs (two identities) of one user share one relay.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { useCleanups } from "../helpers/cleanups.ts";
import { idleContextView } from "../helpers/extension-fakes.ts";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTasksRuntime } from "../../extensions/pi-tasks/lifecycle.ts";
import { createConfiguredTaskCore, type ConfiguredTaskCore } from "../../src/core/configured.ts";
import { ensureIdentity } from "../../src/trust/identity.ts";
import { homeTrust } from "../../src/core/home-trust.ts";
import { addPeer } from "../../src/trust/peers.ts";
import { createMemoryHost } from "../../testkit/memory-host.ts";
import { embeddedRelayRecord, ensureRelay, stopEmbeddedRelay } from "../../src/host/embedded-relay.ts";
import { isAlive } from "../../src/platform/processes.ts";
import { toTaskError } from "../../src/protocol/errors.ts";
import { authFromEnv } from "../../src/relay-client/auth.ts";
import { relayConfigFromEnv } from "../../src/relay-client/config.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { deriveRelayKeys, verifyRelayToken } from "../../src/protocol/jwt.ts";
import { relayTokenClockToleranceMs, relayTokenLifetimeMs } from "../../src/protocol/limits.ts";
import { ensureRelaySecret, readRelaySecret } from "../../src/trust/relay-secret.ts";
import { BUN, freePort, REPO_ROOT, startRelayProcess } from "../../testkit/relay-process.ts";
import { eventually } from "../../testkit/async.ts";

setDefaultTimeout(30_000);

const cleanups = useCleanups();

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** One OS user's machine: the directory of its relay secrets, shared by all its homes. */
function userSecrets(): string {
  return join(tempDir("pi-tasks-user-"), "relay-secrets");
}

/** A Pi's environment: its own PI_TASKS_HOME, the user's relay secrets, the default relay on `port`. */
function piEnv(port: number, secrets: string): { PI_TASKS_HOME: string } & Record<string, string> {
  return {
    PI_TASKS_HOME: tempDir("pi-tasks-home-"),
    PI_TASKS_RELAY_SECRET_DIR: secrets,
    WOLFPACK_PORT: String(port),
    WOLFPACK_JWT_SECRET: "",
  };
}

/** Starts the embedded relay as a Pi does, stopped after the test. */
async function embeddedRelay(env: Record<string, string>) {
  const used = await ensureRelay({ env, config: relayConfigFromEnv(env) });
  expect(used.state).toBe("started");
  const pid = used.record!.pid;
  cleanups.push(() => {
    if (isAlive(pid)) process.kill(pid, "SIGKILL");
  });
  return used;
}

async function connectOutcome(url: string, env: Record<string, string>, callerSession: string, fetcher?: typeof fetch): Promise<string> {
  const auth = authFromEnv(env);
  const session = createVolatileTaskSession({
    url,
    callerSession,
    ...(auth === undefined ? {} : { auth }),
    ...(fetcher === undefined ? {} : { fetch: fetcher }),
  });
  try {
    await session.connect();
    return "connected";
  } catch (error) {
    return toTaskError(error).code;
  } finally {
    session.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Another OS user
// ---------------------------------------------------------------------------------------------

const OTHER_USER = "pitasks-intruder";
const canSwitchUser =
  process.platform === "linux" &&
  process.getuid?.() === 0 &&
  existsSync("/usr/sbin/runuser") &&
  spawnSync("which", ["useradd"]).status === 0;
const mustRun = process.env.PI_TASKS_CI === "1";

function ensureOtherUser(): void {
  if (spawnSync("id", ["-u", OTHER_USER]).status === 0) return;
  const made = spawnSync("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER], { encoding: "utf8" });
  if (made.status !== 0 && spawnSync("id", ["-u", OTHER_USER]).status !== 0) throw new Error(`useradd failed: ${made.stderr}`);
}

/** Runs `script` (TypeScript, on Bun) as the other OS user; its stdout. */
function runAsOtherUser(script: string, env: Record<string, string>): string {
  const dir = tempDir("pi-tasks-intruder-");
  chmodSync(dir, 0o755);
  const file = join(dir, "attack.ts");
  writeFileSync(file, script);
  chmodSync(file, 0o644);
  const run = spawnSync("runuser", ["-u", OTHER_USER, "--", BUN, file], {
    cwd: dir,
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, TMPDIR: "/tmp", ...env },
    timeout: 20_000,
  });
  if (run.status !== 0) throw new Error(`the other user's script failed (${run.status}): ${run.stdout} ${run.stderr}`);
  return run.stdout.trim();
}

describe("another OS user on the machine", () => {
  test.skipIf(!canSwitchUser && !mustRun)(
    "cannot connect to the embedded relay, while its own user's Pis can (needs root: useradd, runuser)",
    async () => {
      if (!canSwitchUser) throw new Error("PI_TASKS_CI=1: this test must run (as root, with useradd and runuser)");
      ensureOtherUser();
      const port = freePort();
      const secrets = userSecrets();
      const env = piEnv(port, secrets);
      const relay = await embeddedRelay(env);
      // The intruder speaks the wire with pi-tasks' own client, from its own (empty) environment
      // and with the user's secret directory named (which it cannot read).
      const session = join(REPO_ROOT, "src", "relay-client", "session.ts");
      const auth = join(REPO_ROOT, "src", "relay-client", "auth.ts");
      const script = `
      import { createVolatileTaskSession } from ${JSON.stringify(session)};
      import { authFromEnv } from ${JSON.stringify(auth)};
      let auth;
      try { auth = authFromEnv(process.env); } catch (error) { auth = undefined; }
      const session = createVolatileTaskSession({ url: ${JSON.stringify(relay.url)}, callerSession: "intruder", ...(auth === undefined ? {} : { auth }) });
      try { await session.connect(); console.log("connected"); } catch (error) { console.log(error.code ?? String(error)); }
      session.close();
      const list = await fetch(${JSON.stringify(`${relay.url}/api/session-control/list`)});
      console.log(list.status);
    `;
      const outcome = runAsOtherUser(script, { PI_TASKS_RELAY_SECRET_DIR: secrets, WOLFPACK_PORT: String(port) }).split("\n");
      expect(outcome).toEqual(["RELAY_AUTH_REQUIRED", "401"]);
      expect(await connectOutcome(relay.url, env, "owner")).toBe("connected");
    },
  );
});

// ---------------------------------------------------------------------------------------------
// A squatter on the port
// ---------------------------------------------------------------------------------------------

/** A program on `port` that answers like a relay (a profile; a success for anything posted), recording what reaches it. */
function squatter(port: number): string[] {
  const seen: string[] = [];
  const epoch = crypto.randomUUID();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port,
    async fetch(request) {
      const path = new URL(request.url).pathname;
      seen.push(`${request.method} ${path}${request.headers.has("authorization") ? " +token" : ""}`);
      if (path === "/api/task-relay/profile") {
        return Response.json({
          ok: true,
          profile: "volatile-v1",
          epoch,
          endpointPath: "/api/task-relay/volatile-v1",
          federation: { enabled: false },
          features: [],
        });
      }
      const body = (await request.json().catch(() => ({}))) as { operation?: string };
      const value =
        body.operation === "connect"
          ? {
              kind: "connected",
              endpoint: { relay: "wolfpack-pi-tasks-v2", id: crypto.randomUUID() },
              leaseExpiresAt: new Date(Date.now() + 60_000).toISOString(),
            }
          : { kind: "page", deliveries: [], nextCursor: "0", hasMore: false };
      return Response.json({ ok: true, profile: "volatile-v1", epoch, value });
    },
  });
  cleanups.push(() => server.stop(true));
  return seen;
}

/** A Pi starting with `env` (the real lifecycle, a fake Pi context): its footer labels, once its first passes ran. */
async function startingPi(env: Record<string, string>, findRelay?: typeof ensureRelay) {
  const statuses: (string | undefined)[] = [];
  const { lifecycle } = createTasksRuntime({
    env,
    sendMessage: () => undefined,
    appendEntry: () => undefined,
    ...(findRelay === undefined ? {} : { findRelay }),
  });
  cleanups.push(() => lifecycle.stop());
  lifecycle.start(idleContextView(tempDir("pi-tasks-project-"), statuses));
  await lifecycle.ready();
  await eventually(() => statuses.length > 1, 5_000);
  await Bun.sleep(1_500);
  // A tool's operation says the same, with the typed code.
  const failure = await lifecycle
    .run((core) => core.connect())
    .then(
      () => undefined,
      (error: unknown) => toTaskError(error),
    );
  return { footer: statuses.at(-1) ?? "", failure, board: lifecycle.info() };
}

describe("a squatter on the relay's port", () => {
  test("on the default port before the user's first Pi: never used — the footer names the problem and the fix; nothing but the profile challenge reaches it", async () => {
    const port = freePort();
    const seen = squatter(port);
    // The default relay (no WOLFPACK_PORT, no URL: port 18790) — its requests are routed to the
    // squatter's port, so the test does not take the machine's real port 18790.
    const env: Record<string, string> = {
      PI_TASKS_HOME: tempDir("pi-tasks-home-"),
      PI_TASKS_RELAY_SECRET_DIR: userSecrets(),
      WOLFPACK_JWT_SECRET: "",
      WOLFPACK_SESSION_NAME: "victim",
    };
    const routed = ((input: Request | URL | string, init?: RequestInit) =>
      fetch(String(input instanceof Request ? input.url : input).replace(":18790/", `:${port}/`), init)) as typeof fetch;
    const pi = await startingPi(env, (options) => ensureRelay({ ...options, fetch: routed }));
    expect(pi.footer).toBe(
      "tasks: victim · the relay at http://127.0.0.1:18790 cannot prove it is yours, so it is not used — stop what holds that port, or set PI_TASKS_RELAY_URL (see /tasks)",
    );
    expect(pi.failure?.code).toBe("RELAY_NOT_PROVEN");
    expect(pi.board?.relay.state).toBe("untrusted");
    expect(pi.board?.relay.problem).toContain("Fix: stop what listens on port 18790");
    expect(seen).toEqual(["GET /api/task-relay/profile"]);
  });

  test("on WOLFPACK_PORT after the relay pi-tasks started there went away: never used, nothing but the challenge reaches it", async () => {
    const port = freePort();
    const secrets = userSecrets();
    const env = { ...piEnv(port, secrets), WOLFPACK_SESSION_NAME: "victim" };
    // The user's relay ran on this port once (so the user has a secret for it), then stopped.
    const earlier = await embeddedRelay(env);
    process.kill(earlier.record!.pid, "SIGKILL");
    await eventually(() => !isAlive(earlier.record!.pid), 5_000);
    const seen = squatter(port);
    const pi = await startingPi(env);
    expect(pi.footer).toContain(`the relay at http://127.0.0.1:${port} cannot prove it is yours`);
    expect(pi.failure?.code).toBe("RELAY_NOT_PROVEN");
    expect(seen).toEqual(["GET /api/task-relay/profile"]);
  });
});

// ---------------------------------------------------------------------------------------------
// A captured token
// ---------------------------------------------------------------------------------------------

describe("a token captured from one request", () => {
  test("is refused when replayed", async () => {
    const port = freePort();
    const env = piEnv(port, userSecrets());
    const relay = await embeddedRelay(env);
    const captured: { path: string; authorization: string | null; body: string }[] = [];
    const capturing = (async (input: Request | URL | string, init?: RequestInit) => {
      const request = input instanceof Request ? input : new Request(String(input), init);
      captured.push({
        path: new URL(request.url).pathname,
        authorization: request.headers.get("authorization"),
        body: await request.clone().text(),
      });
      return fetch(request, init);
    }) as typeof fetch;
    expect(await connectOutcome(relay.url, env, "owner", capturing)).toBe("connected");
    const connect = captured.find((item) => item.path === "/api/task-relay/volatile-v1")!;
    expect(connect).toBeDefined();
    // The same request again, byte for byte, and its token on another request.
    const headers = {
      "content-type": "application/json",
      ...(connect.authorization === null ? {} : { authorization: connect.authorization }),
    };
    const replayed = await fetch(`${relay.url}/api/task-relay/volatile-v1`, { method: "POST", headers, body: connect.body });
    expect(replayed.status).toBe(401);
    expect(((await replayed.json()) as { error: { code: string } }).error.code).toBe("RELAY_AUTH_REQUIRED");
    const listed = await fetch(`${relay.url}/api/session-control/list`, { headers });
    expect(listed.status).toBe(401);
    // And a captured token that was never used dies in seconds: the relay's verdict on it after
    // its lifetime (plus the clock tolerance) is "expired".
    const keys = deriveRelayKeys(readRelaySecret(relay.secretFile!)!);
    const token = connect.authorization!.replace(/^Bearer /, "");
    expect(verifyRelayToken(keys, token, Date.now()).ok).toBe(true);
    expect(verifyRelayToken(keys, token, Date.now() + relayTokenLifetimeMs + relayTokenClockToleranceMs)).toMatchObject({
      ok: false,
      reason: "expired",
    });
  });

  test("a program in front of the user's relay (it forwards the challenge, answers the rest itself) is caught on its first reply", async () => {
    const secrets = userSecrets();
    const file = join(secrets, "shared.secret");
    ensureRelaySecret(file);
    const relay = await startRelayProcess({ args: ["--secret-file", file] });
    cleanups.push(() => relay.stop());
    const seen: string[] = [];
    const middle = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      async fetch(request) {
        const path = new URL(request.url).pathname;
        seen.push(`${request.method} ${path}`);
        if (path === "/api/task-relay/profile") return fetch(`${relay.url}${path}`, { headers: request.headers });
        const body = (await request.json()) as { operation?: string };
        return Response.json({
          ok: true,
          profile: "volatile-v1",
          epoch: relay.epoch,
          value: {
            kind: "connected",
            endpoint: { relay: "wolfpack-pi-tasks-v2", id: crypto.randomUUID() },
            leaseExpiresAt: new Date(Date.now() + 60_000).toISOString(),
            operation: body.operation,
          },
        });
      },
    });
    cleanups.push(() => middle.stop(true));
    const url = `http://127.0.0.1:${middle.port}`;
    const env = { PI_TASKS_RELAY_URL: url, PI_TASKS_RELAY_SECRET_FILE: file, WOLFPACK_JWT_SECRET: "" };
    expect(await connectOutcome(url, env, "victim")).toBe("RELAY_NOT_PROVEN");
    expect(seen).toEqual(["GET /api/task-relay/profile", "GET /api/task-relay/profile", "POST /api/task-relay/volatile-v1"]);
  });
});

// ---------------------------------------------------------------------------------------------
// relay stop and a reused pid
// ---------------------------------------------------------------------------------------------

describe("pi-tasks relay stop with a stale record", () => {
  function unrelatedProcess(): number {
    const sleeper = spawn("sleep", ["60"], { stdio: "ignore" });
    cleanups.push(() => sleeper.kill("SIGKILL"));
    return sleeper.pid!;
  }

  function rewriteRecordPid(env: Record<string, string>, port: number, pid: number): void {
    const path = join(env.PI_TASKS_HOME!, "relays", `${port}.json`);
    writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, "utf8")), pid }));
  }

  test("the relay still runs, but the record names another process: nothing is signalled, the record is removed", async () => {
    const port = freePort();
    const env = piEnv(port, userSecrets());
    const relay = await embeddedRelay(env);
    const sleeper = unrelatedProcess();
    rewriteRecordPid(env, port, sleeper);
    const outcome = await stopEmbeddedRelay(env, port).then(
      (value) => ({ value }),
      (error: unknown) => ({ code: toTaskError(error).code, message: toTaskError(error).message }),
    );
    expect(outcome).toMatchObject({ code: "RELAY_RECORD_STALE" });
    expect(isAlive(sleeper)).toBe(true);
    expect(isAlive(relay.record!.pid)).toBe(true);
    expect(embeddedRelayRecord(env, port)).toBeUndefined();
    expect(existsSync(join(env.PI_TASKS_HOME!, "relays", `${port}.json`))).toBe(false);
  });

  test("the relay is gone and its pid was reused: nothing is signalled, the record is removed", async () => {
    const port = freePort();
    const env = piEnv(port, userSecrets());
    const relay = await embeddedRelay(env);
    process.kill(relay.record!.pid, "SIGKILL");
    await eventually(() => !isAlive(relay.record!.pid), 5_000);
    const sleeper = unrelatedProcess();
    rewriteRecordPid(env, port, sleeper);
    const outcome = await stopEmbeddedRelay(env, port).then(
      (value) => ({ value }),
      (error: unknown) => ({ code: toTaskError(error).code }),
    );
    expect(outcome).toEqual({ code: "RELAY_RECORD_STALE" });
    expect(isAlive(sleeper)).toBe(true);
    expect(existsSync(join(env.PI_TASKS_HOME!, "relays", `${port}.json`))).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------
// What must keep working
// ---------------------------------------------------------------------------------------------

describe("two PI_TASKS_HOMEs (two identities) of one user", () => {
  test("share the one embedded relay: the first starts it, the second uses it, both connect", async () => {
    const port = freePort();
    const secrets = userSecrets();
    const first = piEnv(port, secrets);
    const second = piEnv(port, secrets);
    const relay = await embeddedRelay(first);
    const again = await ensureRelay({ env: second, config: relayConfigFromEnv(second) });
    expect(again.state).toBe("running");
    expect(await connectOutcome(relay.url, first, "home-a")).toBe("connected");
    expect(await connectOutcome(again.url, second, "home-b")).toBe("connected");
  });

  test("after pairing, one delegates a task to the other through that relay, end to end", async () => {
    const port = freePort();
    const secrets = userSecrets();
    const homes = [piEnv(port, secrets), piEnv(port, secrets)] as const;
    const relay = await embeddedRelay(homes[0]);
    const [origin, worker] = homes.map((env, index) =>
      createConfiguredTaskCore({
        env,
        callerSession: `identity-${index}`,
        url: relay.url,
        trust: homeTrust(env.PI_TASKS_HOME),
        host: createMemoryHost(),
      }),
    ) as [ConfiguredTaskCore, ConfiguredTaskCore];
    cleanups.push(() => Promise.all([origin.close(), worker.close()]));
    await addPeer(homes[0].PI_TASKS_HOME, "worker", ensureIdentity(homes[1].PI_TASKS_HOME).identity.publicKey);
    await addPeer(homes[1].PI_TASKS_HOME, "origin", ensureIdentity(homes[0].PI_TASKS_HOME).identity.publicKey);
    const to = await worker.run((core) => core.connect());
    const created = await origin.run((core) => core.createTask({ to, task: "say hello" }));
    const arrived = await eventually(
      async () => {
        await Promise.all([origin.refresh(), worker.refresh()]);
        return worker.current().findTask(created.taskId);
      },
      10_000,
      100,
    );
    expect(arrived?.role).toBe("worker");
    expect(arrived?.peer).toMatchObject({ peerName: "origin", verified: true });
  });
});
