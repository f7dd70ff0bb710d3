/**
 * The embedded relay (src/host/embedded-relay.ts): started only when nothing answers at the default
 * loopback URL, one per port under a lock, recorded so `/tasks` can say pi-tasks started it and
 * `pi-tasks relay stop` can stop it; never for an explicit URL, an opt-out or a busy port. It
 * serves only clients holding its user's relay secret, and proves itself to them (the attacks
 * this stops are in relay-attacks.test.ts).
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { useCleanups } from "../helpers/cleanups.ts";
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  embeddedRelayRecord,
  ensureRelay,
  RELAY_INSTANCE_VARIABLE,
  relayStopMark,
  reviveRelay,
  stopEmbeddedRelay,
} from "../../src/host/embedded-relay.ts";
import { isAlive } from "../../src/platform/processes.ts";
import {
  challengeProof,
  deriveRelayKeys,
  newChallenge,
  type RelayKeys,
  replyProof,
  signJwt,
  signRelayToken,
} from "../../src/protocol/jwt.ts";
import {
  embeddedRelayInstallCheckMs,
  minJwtSecretChars,
  relayInstanceBytes,
  relaySecretBytes,
  relayTokenClockToleranceMs,
  relayTokenLifetimeMs,
} from "../../src/protocol/limits.ts";
import { RELAY_PROFILE } from "../../src/protocol/names.ts";
import { authFromEnv, relaySecretPlan } from "../../src/relay-client/auth.ts";
import { fallbackPortsOf, relayConfigFromEnv } from "../../src/relay-client/config.ts";
import { createRelayTransport } from "../../src/relay-client/transport.ts";
import { ensureRelaySecret, readRelaySecret } from "../../src/trust/relay-secret.ts";
import { BUN, CLI_ENTRY, freePort, REPO_ROOT, startRelayProcess } from "../../testkit/relay-process.ts";
import { eventually } from "../../testkit/async.ts";
import { runToExit } from "../helpers/run-to-exit.ts";

setDefaultTimeout(30_000);

const cleanups = useCleanups();

function home(): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-home-"));
  // The user's relay secrets live beside the home here (by default: ~/.pi/pi-tasks-relays).
  const env = { PI_TASKS_HOME: dir, PI_TASKS_RELAY_SECRET_DIR: join(dir, "relay-secrets"), WOLFPACK_JWT_SECRET: "" };
  cleanups.push(async () => {
    await stopAll(env);
    rmSync(dir, { recursive: true, force: true });
  });
  return env;
}

const ports: number[] = [];
async function stopAll(env: Record<string, string>): Promise<void> {
  for (const port of ports) await stopEmbeddedRelay(env, port).catch(() => undefined);
}

/** Free ports tried for one whose next port is free too. */
const MAX_PORT_PICKS = 20;

/**
 * A free port whose `next` following ports are free too (a relay that starts beside it takes the
 * first of them that is; any process's socket may hold one).
 */
function freePortWithFreeNext(next: number): number {
  for (let pick = 0; pick < MAX_PORT_PICKS; pick += 1) {
    const port = freePort();
    try {
      for (let step = 1; step <= next; step += 1)
        Bun.serve({ hostname: "127.0.0.1", port: port + step, fetch: () => new Response("") }).stop(true);
      return port;
    } catch {
      // One of them is taken: pick again.
    }
  }
  throw new Error(`no free port with ${next} free ports after it in ${MAX_PORT_PICKS} picks`);
}

function defaultPort(env: Record<string, string>, options: { freeNext?: number } = {}): { env: Record<string, string>; port: number } {
  const port = options.freeNext === undefined ? freePort() : freePortWithFreeNext(options.freeNext);
  ports.push(port);
  return { env: { ...env, WOLFPACK_PORT: String(port) }, port };
}

async function profile(url: string): Promise<unknown> {
  return (await fetch(`${url}/api/task-relay/profile`)).json();
}

describe("when pi-tasks starts a relay", () => {
  test("nothing answers at the default URL: the first Pi starts a detached relay, records it, and a later Pi uses it", async () => {
    const { env, port } = defaultPort(home());
    const config = relayConfigFromEnv(env);
    const first = await ensureRelay({ env, config });
    expect(first.state).toBe("started");
    expect(first.url).toBe(`http://127.0.0.1:${port}`);
    expect(first.record?.port).toBe(port);
    expect(isAlive(first.record!.pid)).toBe(true);
    expect(await profile(first.url)).toMatchObject({ ok: true, profile: RELAY_PROFILE });
    // Its output goes to the log in the state directory; no lock is left behind (the start lock is
    // the user's, beside the relay secrets: one start per port for all the user's homes).
    expect(readFileSync(first.record!.log, "utf8")).toContain('"event":"listening"');
    expect(existsSync(join(env.PI_TASKS_RELAY_SECRET_DIR!, `${port}.lock`))).toBe(false);
    // It runs with the user's secret for the port (its path on the command line, never the secret)
    // and proved it; its record (0600) holds the instance nonce `relay stop` checks.
    expect(first.secretFile).toBe(join(env.PI_TASKS_RELAY_SECRET_DIR!, `${port}.secret`));
    expect(statSync(first.secretFile!).mode & 0o777).toBe(0o600);
    expect(readFileSync(`/proc/${first.record!.pid}/cmdline`, "utf8")).not.toContain(readFileSync(first.secretFile!, "utf8").trim());
    expect(statSync(join(env.PI_TASKS_HOME!, "relays", `${port}.json`)).mode & 0o777).toBe(0o600);
    expect(first.record!.instance).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const later = await ensureRelay({ env, config });
    expect(later.state).toBe("running");
    expect(later.record?.pid).toBe(first.record!.pid);

    // `pi-tasks relay stop` stops exactly it, and then nothing answers.
    expect(await stopEmbeddedRelay(env, port)).toEqual({ stopped: true, pid: first.record!.pid });
    expect(isAlive(first.record!.pid)).toBe(false);
    expect(embeddedRelayRecord(env, port)).toBeUndefined();
    expect(await stopEmbeddedRelay(env, port)).toEqual({ stopped: false });
  });

  test("a relay that went away is started again by reviveRelay; one the person stopped is left stopped until a Pi session starts anew", async () => {
    const { env, port } = defaultPort(home());
    const config = relayConfigFromEnv(env);
    const url = `http://127.0.0.1:${port}`;
    const first = await ensureRelay({ env, config });
    expect(first.state).toBe("started");
    // Killed (a crash): the first look starts it again, a later one finds it running.
    process.kill(first.record!.pid, "SIGKILL");
    await eventually(() => !isAlive(first.record!.pid), 5_000);
    const revived = await reviveRelay({ env, config, url });
    expect(revived).toMatchObject({ kind: "looked", relay: { state: "started", url } });
    const second = embeddedRelayRecord(env, port)!;
    expect(second.pid).not.toBe(first.record!.pid);
    expect(await reviveRelay({ env, config, url })).toMatchObject({ kind: "looked", relay: { state: "running" } });
    // Stopped by the person: the mark says when and by whom, and no look starts it.
    expect(await stopEmbeddedRelay(env, port)).toEqual({ stopped: true, pid: second.pid });
    expect(relayStopMark(env, port)).toEqual({ at: expect.any(String), by: process.pid });
    expect(await reviveRelay({ env, config, url })).toMatchObject({ kind: "stopped", port, mark: { by: process.pid } });
    expect(embeddedRelayRecord(env, port)).toBeUndefined();
    // A Pi session starting anew starts it (and forgets the stop); a relay named by URL is never revived.
    expect((await ensureRelay({ env, config })).state).toBe("started");
    expect(relayStopMark(env, port)).toBeUndefined();
    const named = { ...env, PI_TASKS_RELAY_URL: url };
    expect(await reviveRelay({ env: named, config: relayConfigFromEnv(named), url })).toEqual({ kind: "not-embedded" });
  });

  test("two Pis starting at once start one relay (the lock), and both use it", async () => {
    const { env } = defaultPort(home());
    const config = relayConfigFromEnv(env);
    const [a, b] = await Promise.all([ensureRelay({ env, config }), ensureRelay({ env, config })]);
    expect([a.state, b.state].sort()).toEqual(["running", "started"]);
    const started = a.state === "started" ? a : b;
    expect((a.state === "running" ? a : b).record?.pid).toBe(started.record!.pid);
  });

  test("two homes (identities) of one user starting at once start one relay (the user's lock), and both use it", async () => {
    const { env, port } = defaultPort(home());
    const other = { ...home(), PI_TASKS_RELAY_SECRET_DIR: env.PI_TASKS_RELAY_SECRET_DIR!, WOLFPACK_PORT: String(port) };
    const [a, b] = await Promise.all([
      ensureRelay({ env, config: relayConfigFromEnv(env) }),
      ensureRelay({ env: other, config: relayConfigFromEnv(other) }),
    ]);
    expect([a.state, b.state].sort()).toEqual(["running", "started"]);
    expect([a.secretFile, b.secretFile]).toEqual([
      join(env.PI_TASKS_RELAY_SECRET_DIR!, `${port}.secret`),
      join(env.PI_TASKS_RELAY_SECRET_DIR!, `${port}.secret`),
    ]);
    const starter = a.state === "started" ? env : other;
    cleanups.push(() => stopEmbeddedRelay(starter, port));
  });

  test("a lock left by a dead process is stale and taken over", async () => {
    const { env, port } = defaultPort(home());
    mkdirSync(env.PI_TASKS_RELAY_SECRET_DIR!, { recursive: true, mode: 0o700 });
    // A pid that does not exist (far above the kernel's default pid_max).
    writeFileSync(join(env.PI_TASKS_RELAY_SECRET_DIR!, `${port}.lock`), "4194303");
    const used = await ensureRelay({ env, config: relayConfigFromEnv(env) });
    expect(used.state).toBe("started");
  });
});

describe("when pi-tasks starts no relay", () => {
  test("PI_TASKS_RELAY_URL names the relay: it is used as configured (its profile read once), nothing is started", async () => {
    const env: Record<string, string> = { ...home(), PI_TASKS_RELAY_URL: "http://127.0.0.1:9" };
    const probes: string[] = [];
    const used = await ensureRelay({
      env,
      config: relayConfigFromEnv(env),
      fetch: (async (url: string) => (
        probes.push(String(url)), Response.json({ ok: true, profile: RELAY_PROFILE })
      )) as unknown as typeof fetch,
    });
    expect(used).toEqual({ url: "http://127.0.0.1:9", state: "configured" });
    expect(probes).toEqual(["http://127.0.0.1:9/api/task-relay/profile"]);
    expect(existsSync(join(env.PI_TASKS_HOME!, "relays"))).toBe(false);
  });

  // Issue 38: beside a server that is not a volatile-v1 relay on the default port (the released
  // Wolfpack serves only its v2 task relay there), nothing could be delegated.
  test("something else answers on the default port (a Wolfpack with only its v2 relay, another server): left alone, the user's relay runs beside it", async () => {
    const { env, port } = defaultPort(home(), { freeNext: 1 });
    ports.push(...fallbackPortsOf(port));
    const other = Bun.serve({ hostname: "127.0.0.1", port, fetch: () => new Response("Not Found", { status: 404 }) });
    cleanups.push(() => other.stop(true));
    const used = await ensureRelay({ env, config: relayConfigFromEnv(env) });
    const beside = `http://127.0.0.1:${port + 1}`;
    expect(used).toMatchObject({ state: "started", url: beside, secretFile: join(env.PI_TASKS_RELAY_SECRET_DIR!, `${port + 1}.secret`) });
    expect(used.beside).toBe(
      `port ${port}: another HTTP server, not a volatile-v1 relay (HTTP 404 to /api/task-relay/profile) answers there`,
    );
    expect(embeddedRelayRecord(env, port)).toBeUndefined();
    // Every later Pi of the user finds the same relay there, and its sessions prove the secret of that port.
    const again = await ensureRelay({ env, config: relayConfigFromEnv(env) });
    expect(again).toMatchObject({ state: "running", url: beside });
    const auth = authFromEnv(env, beside);
    expect(auth?.relay?.file).toBe(used.secretFile);
    expect(relaySecretPlan({ ...env, PI_TASKS_RELAY_URL: beside }, relayConfigFromEnv({ ...env, PI_TASKS_RELAY_URL: beside }))).toEqual({
      file: used.secretFile!,
      mandatory: true,
      create: false,
    });
  });

  test("a fallback port held by something else is passed over; with no relay allowed, what answers is named (foreign)", async () => {
    const { env, port } = defaultPort(home(), { freeNext: 2 });
    ports.push(...fallbackPortsOf(port));
    const plain = () => new Response("Not Found", { status: 404 });
    const held = [port, port + 1].map((at) => Bun.serve({ hostname: "127.0.0.1", port: at, fetch: plain }));
    cleanups.push(() => held.forEach((server) => server.stop(true)));
    const used = await ensureRelay({ env, config: relayConfigFromEnv(env) });
    expect(used).toMatchObject({ state: "started", url: `http://127.0.0.1:${port + 2}` });
    const optedOut = { ...env, PI_TASKS_EMBEDDED_RELAY: "0" };
    const foreign = await ensureRelay({ env: optedOut, config: relayConfigFromEnv(optedOut) });
    expect(foreign).toEqual({
      url: `http://127.0.0.1:${port}`,
      state: "foreign",
      problemCode: "RELAY_NOT_VOLATILE",
      problem: `no volatile-v1 relay at http://127.0.0.1:${port}: another HTTP server, not a volatile-v1 relay (HTTP 404 to /api/task-relay/profile) answers there. Fix: allow pi-tasks to run your relay beside it (unset PI_TASKS_EMBEDDED_RELAY=0), or set PI_TASKS_RELAY_URL`,
    });
    const named = { ...env, PI_TASKS_RELAY_URL: `http://127.0.0.1:${port}` };
    expect((await ensureRelay({ env: named, config: relayConfigFromEnv(named) })).state).toBe("foreign");
  });

  test("PI_TASKS_EMBEDDED_RELAY=0 opts out: nothing is started, the session is told why", async () => {
    const { env, port } = defaultPort(home());
    const optedOut = { ...env, PI_TASKS_EMBEDDED_RELAY: "0" };
    const used = await ensureRelay({ env: optedOut, config: relayConfigFromEnv(optedOut) });
    expect(used).toEqual({ url: `http://127.0.0.1:${port}`, state: "absent", problem: "no relay answers and PI_TASKS_EMBEDDED_RELAY=0" });
    expect(embeddedRelayRecord(env, port)).toBeUndefined();
  });

  test("a relay a Pi started stops once the install it runs from is removed (pi remove), saying so; one started by hand runs on", async () => {
    const install = mkdtempSync(join(tmpdir(), "pi-tasks-removed-install-"));
    cleanups.push(async () => rmSync(install, { recursive: true, force: true }));
    cpSync(join(REPO_ROOT, "dist"), join(install, "dist"), { recursive: true });
    const bundle = join(install, "dist", "pi-tasks.js");
    copyFileSync(join(REPO_ROOT, "package.json"), join(install, "package.json"));
    const instance = Buffer.from(crypto.getRandomValues(new Uint8Array(relayInstanceBytes))).toString("base64url");
    const start = (extra: Record<string, string>) =>
      Bun.spawn([BUN, bundle, "relay", "--port", "0"], { env: { ...process.env, ...extra }, stdout: "pipe", stderr: "pipe" });
    const embedded = start({ [RELAY_INSTANCE_VARIABLE]: instance });
    const byHand = start({});
    cleanups.push(async () => {
      embedded.kill("SIGKILL");
      byHand.kill("SIGKILL");
    });
    for (const relay of [embedded, byHand]) {
      const first = await relay.stdout.getReader().read();
      expect(new TextDecoder().decode(first.value)).toContain('"event":"listening"');
    }
    rmSync(install, { recursive: true, force: true });
    // Within a few checks (embeddedRelayInstallCheckMs) it has stopped, cleanly, and said why.
    const code = await Promise.race([embedded.exited, Bun.sleep(6 * embeddedRelayInstallCheckMs).then(() => "still running")]);
    expect(code).toBe(0);
    expect(await new Response(embedded.stderr).text()).toContain('"event":"install-removed"');
    expect(byHand.exitCode).toBeNull();
  });

  test("PI_TASKS_EMBEDDED_RELAY takes only 0 or 1", () => {
    expect(() => relayConfigFromEnv({ PI_TASKS_EMBEDDED_RELAY: "no" })).toThrow("PI_TASKS_EMBEDDED_RELAY must be 0");
    expect(relayConfigFromEnv({ PI_TASKS_EMBEDDED_RELAY: "1" }).embedded).toBe(true);
  });
});

describe("the relay secret", () => {
  async function started(): Promise<{ env: Record<string, string>; url: string; keys: RelayKeys }> {
    const { env } = defaultPort(home());
    const used = await ensureRelay({ env, config: relayConfigFromEnv(env) });
    expect(used.state).toBe("started");
    return { env, url: used.url, keys: deriveRelayKeys(readRelaySecret(used.secretFile!)!) };
  }

  test("the embedded relay serves only requests with a relay token; its profile stays open and answers a challenge with the secret's proof", async () => {
    const { env, url, keys } = await started();
    const list = await fetch(`${url}/api/session-control/list`);
    expect(list.status).toBe(401);
    expect(((await list.json()) as { error: { code: string } }).error.code).toBe("RELAY_AUTH_REQUIRED");
    const challenge = newChallenge();
    const profiled = await fetch(`${url}/api/task-relay/profile`, { headers: { "x-pi-tasks-challenge": challenge } });
    expect(profiled.status).toBe(200);
    expect(profiled.headers.get("x-pi-tasks-relay-proof")).toBe(challengeProof(keys, challenge));
    // A client of the user (its credentials from the environment) proves the relay, then is served;
    // every reply carries the relay's proof for that request's token.
    const token = signRelayToken(keys);
    const served = await fetch(`${url}/api/session-control/list`, { headers: { authorization: `Bearer ${token}` } });
    expect(served.status).toBe(200);
    expect(served.headers.get("x-pi-tasks-reply-proof")).toBe(replyProof(keys, token));
    const transport = createRelayTransport({ baseUrl: url, auth: authFromEnv(env)! });
    expect(await transport.sessionList()).toEqual([]);
    transport.close();
  });

  test("the CLI reaches the relay a Pi started however it is named: --relay URL (no WOLFPACK_PORT) lists, and the conformance suite passes against it", async () => {
    const { env, url } = await started();
    // The person's shell: no WOLFPACK_PORT, the relay named by its URL (before: a 401 for every request).
    const { WOLFPACK_PORT: _named, ...shell } = env;
    const cli = (args: string[]) =>
      runToExit([BUN, CLI_ENTRY, ...args], { cwd: REPO_ROOT, env: { ...process.env, ...shell }, timeoutMs: 60_000 });
    const listed = await cli(["list", "--relay", url, "--json"]);
    expect({ code: listed.code, stderr: listed.stderr }).toEqual({ code: 0, stderr: "" });
    expect(JSON.parse(listed.stdout)).toMatchObject({ ok: true, relay: url });
    const checked = await cli(["conformance", url, "--json"]);
    const summary = JSON.parse(checked.stdout) as {
      ok: boolean;
      passed: number;
      failed: number;
      failures: string[];
      failureMessages: string[];
    };
    expect({ code: checked.code, failures: summary.failures, messages: summary.failureMessages }).toEqual({
      code: 0,
      failures: [],
      messages: [],
    });
    expect(summary.passed).toBeGreaterThan(60);
  });

  test("a token past its short lifetime is refused (typed, proved), a token of another secret is refused without a proof", async () => {
    const { url, keys } = await started();
    const old = signRelayToken(keys, Date.now() - relayTokenLifetimeMs - relayTokenClockToleranceMs - 1_000);
    const expired = await fetch(`${url}/api/session-control/list`, { headers: { authorization: `Bearer ${old}` } });
    expect(expired.status).toBe(401);
    expect(((await expired.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "RELAY_AUTH_REQUIRED",
      message: expect.stringContaining("expired"),
    });
    expect(expired.headers.get("x-pi-tasks-reply-proof")).toBe(replyProof(keys, old));
    const stranger = signRelayToken(deriveRelayKeys(Buffer.alloc(relaySecretBytes, 9)));
    const refused = await fetch(`${url}/api/session-control/list`, { headers: { authorization: `Bearer ${stranger}` } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("x-pi-tasks-reply-proof")).toBeNull();
  });

  test("with WOLFPACK_JWT_SECRET configured, the embedded relay also takes the Wolfpack JWT as before (reusable, 60 s); the user's Pis send relay tokens", async () => {
    const jwt = "j".repeat(minJwtSecretChars);
    const { env } = defaultPort(home());
    const configured = { ...env, WOLFPACK_JWT_SECRET: jwt };
    const used = await ensureRelay({ env: configured, config: relayConfigFromEnv(configured) });
    expect(used.state).toBe("started");
    const token = await signJwt(jwt);
    for (const _ of [1, 2])
      expect((await fetch(`${used.url}/api/session-control/list`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect((await fetch(`${used.url}/api/session-control/list`)).status).toBe(401);
    const auth = authFromEnv(configured)!;
    expect(auth.secret).toBe(jwt);
    expect(auth.relay?.file).toBe(used.secretFile!);
  });

  test("a relay started by hand without --secret-file behaves as before: no token needed, no proofs given", async () => {
    const relay = await startRelayProcess();
    cleanups.push(() => relay.stop());
    expect((await fetch(`${relay.url}/api/session-control/list`)).status).toBe(200);
    const profiled = await fetch(`${relay.url}/api/task-relay/profile`, { headers: { "x-pi-tasks-challenge": newChallenge() } });
    expect(profiled.headers.get("x-pi-tasks-relay-proof")).toBeNull();
    expect((await fetch(`${relay.url}/api/pi-tasks/relay-instance`)).status).toBe(404);
  });

  test("PI_TASKS_RELAY_SECRET_FILE: a relay named by URL must prove that secret (a relay run by hand with --secret-file does; another is untrusted)", async () => {
    const dir = home();
    const file = join(dir.PI_TASKS_RELAY_SECRET_DIR!, "shared.secret");
    ensureRelaySecret(file);
    const relay = await startRelayProcess({ args: ["--secret-file", file] });
    cleanups.push(() => relay.stop());
    const env = { ...dir, PI_TASKS_RELAY_URL: relay.url, PI_TASKS_RELAY_SECRET_FILE: file };
    expect(await ensureRelay({ env, config: relayConfigFromEnv(env) })).toEqual({ url: relay.url, state: "configured", secretFile: file });
    const otherFile = join(dir.PI_TASKS_RELAY_SECRET_DIR!, "other.secret");
    ensureRelaySecret(otherFile);
    const wrong = { ...env, PI_TASKS_RELAY_SECRET_FILE: otherFile };
    const judged = await ensureRelay({ env: wrong, config: relayConfigFromEnv(wrong) });
    expect(judged).toMatchObject({ state: "untrusted", problemCode: "RELAY_NOT_PROVEN" });
    // Without the variable, the same URL is the user's explicit choice: used unchecked, as before.
    const plain = { ...dir, PI_TASKS_RELAY_URL: relay.url };
    expect(await ensureRelay({ env: plain, config: relayConfigFromEnv(plain) })).toEqual({ url: relay.url, state: "configured" });
  });

  test("a client challenges the relay once, then sends a fresh token per request; after the relay was out of reach it challenges again", async () => {
    const dir = home();
    const file = join(dir.PI_TASKS_RELAY_SECRET_DIR!, "4100.secret");
    ensureRelaySecret(file);
    const port = freePort();
    let relay = await startRelayProcess({ port, args: ["--secret-file", file] });
    cleanups.push(() => relay.stop());
    const seen: string[] = [];
    const counting = ((input: Request | URL | string, init?: RequestInit) => {
      const request = input instanceof Request ? input : new Request(String(input), init);
      seen.push(request.headers.get("x-pi-tasks-challenge") === null ? (request.headers.get("authorization") ?? "none") : "challenge");
      return fetch(request, init);
    }) as typeof fetch;
    const auth = authFromEnv({ PI_TASKS_RELAY_URL: relay.url, PI_TASKS_RELAY_SECRET_FILE: file, WOLFPACK_JWT_SECRET: "" })!;
    const transport = createRelayTransport({ baseUrl: relay.url, auth, fetch: counting });
    cleanups.push(() => transport.close());
    for (const _ of [1, 2, 3]) await transport.sessionList();
    expect(seen[0]).toBe("challenge");
    expect(new Set(seen.slice(1)).size).toBe(3);
    await relay.stop();
    expect(await transport.sessionList().catch((error: { code: string }) => error.code)).toBe("RELAY_UNAVAILABLE");
    relay = await startRelayProcess({ port, args: ["--secret-file", file] });
    seen.length = 0;
    await transport.sessionList();
    expect(seen.map((item) => (item === "challenge" ? item : "token"))).toEqual(["challenge", "token"]);
  });

  test("pi-tasks relay --secret-file refuses an unsafe or missing file before it listens (RELAY_SECRET_INVALID)", async () => {
    const dir = home();
    const file = join(dir.PI_TASKS_RELAY_SECRET_DIR!, "open.secret");
    ensureRelaySecret(file);
    chmodSync(file, 0o644);
    for (const path of [file, join(dir.PI_TASKS_RELAY_SECRET_DIR!, "missing.secret")]) {
      const run = await runToExit([BUN, CLI_ENTRY, "relay", "--port", "0", "--secret-file", path], {
        cwd: REPO_ROOT,
        env: { ...process.env, WOLFPACK_JWT_SECRET: "" },
        timeoutMs: 10_000,
      });
      expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: "" });
      expect(run.stderr).toContain("RELAY_SECRET_INVALID");
    }
  });
});
