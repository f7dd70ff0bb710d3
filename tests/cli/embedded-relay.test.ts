/**
 * The embedded relay (src/cli/embedded-relay.ts): started only when nothing answers at the default
 * loopback URL, one per port under a lock, recorded so `/tasks` can say pi-tasks started it and
 * `pi-tasks relay stop` can stop it; never for an explicit URL, an opt-out or a busy port.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { embeddedRelayRecord, ensureRelay, stopEmbeddedRelay } from "../../src/cli/embedded-relay.ts";
import { isAlive } from "../../src/cli/spawned.ts";
import { RELAY_PROFILE } from "../../src/protocol/limits.ts";
import { relayConfigFromEnv } from "../../src/relay-client/config.ts";
import { freePort } from "../../kit/relay-process.ts";

setDefaultTimeout(30_000);

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const step of cleanups.splice(0).reverse()) await Promise.resolve().then(step).catch(() => undefined);
});

function home(): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-home-"));
  const env = { PI_TASKS_HOME: dir, WOLFPACK_JWT_SECRET: "" };
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

function defaultPort(env: Record<string, string>): { env: Record<string, string>; port: number } {
  const port = freePort();
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
    // Its output goes to the log in the state directory; no lock is left behind.
    expect(readFileSync(first.record!.log, "utf8")).toContain('"event":"listening"');
    expect(existsSync(join(env.PI_TASKS_HOME!, "relays", `${port}.lock`))).toBe(false);

    const later = await ensureRelay({ env, config });
    expect(later.state).toBe("running");
    expect(later.record?.pid).toBe(first.record!.pid);

    // `pi-tasks relay stop` stops exactly it, and then nothing answers.
    expect(await stopEmbeddedRelay(env, port)).toEqual({ stopped: true, pid: first.record!.pid });
    expect(isAlive(first.record!.pid)).toBe(false);
    expect(embeddedRelayRecord(env, port)).toBeUndefined();
    expect(await stopEmbeddedRelay(env, port)).toEqual({ stopped: false });
  });

  test("two Pis starting at once start one relay (the lock), and both use it", async () => {
    const { env } = defaultPort(home());
    const config = relayConfigFromEnv(env);
    const [a, b] = await Promise.all([ensureRelay({ env, config }), ensureRelay({ env, config })]);
    expect([a.state, b.state].sort()).toEqual(["running", "started"]);
    const started = a.state === "started" ? a : b;
    expect((a.state === "running" ? a : b).record?.pid).toBe(started.record!.pid);
  });

  test("a lock left by a dead process is stale and taken over", async () => {
    const { env, port } = defaultPort(home());
    mkdirSync(join(env.PI_TASKS_HOME!, "relays"), { recursive: true });
    // A pid that does not exist (far above the kernel's default pid_max).
    writeFileSync(join(env.PI_TASKS_HOME!, "relays", `${port}.lock`), "4194303");
    const used = await ensureRelay({ env, config: relayConfigFromEnv(env) });
    expect(used.state).toBe("started");
  });
});

describe("when pi-tasks starts no relay", () => {
  test("PI_TASKS_RELAY_URL names the relay: it is used as configured, nothing is probed or started", async () => {
    const env: Record<string, string> = { ...home(), PI_TASKS_RELAY_URL: "http://127.0.0.1:9" };
    let probes = 0;
    const used = await ensureRelay({ env, config: relayConfigFromEnv(env), fetch: (async () => (probes += 1, new Response("{}"))) as unknown as typeof fetch });
    expect(used).toEqual({ url: "http://127.0.0.1:9", state: "configured" });
    expect(probes).toBe(0);
    expect(existsSync(join(env.PI_TASKS_HOME!, "relays"))).toBe(false);
  });

  test("something else answers on the port (Wolfpack, a user's relay, another service): it is left alone", async () => {
    const { env, port } = defaultPort(home());
    const other = Bun.serve({ hostname: "127.0.0.1", port, fetch: () => new Response("not a relay", { status: 404 }) });
    cleanups.push(() => other.stop(true));
    const used = await ensureRelay({ env, config: relayConfigFromEnv(env) });
    expect(used.state).toBe("running");
    expect(used.problem).toContain("not a volatile-v1 relay");
    expect(embeddedRelayRecord(env, port)).toBeUndefined();
  });

  test("PI_TASKS_EMBEDDED_RELAY=0 opts out: nothing is started, the session is told why", async () => {
    const { env, port } = defaultPort(home());
    const optedOut = { ...env, PI_TASKS_EMBEDDED_RELAY: "0" };
    const used = await ensureRelay({ env: optedOut, config: relayConfigFromEnv(optedOut) });
    expect(used).toEqual({ url: `http://127.0.0.1:${port}`, state: "absent", problem: "no relay answers and PI_TASKS_EMBEDDED_RELAY=0" });
    expect(embeddedRelayRecord(env, port)).toBeUndefined();
  });

  test("PI_TASKS_EMBEDDED_RELAY takes only 0 or 1", () => {
    expect(() => relayConfigFromEnv({ PI_TASKS_EMBEDDED_RELAY: "no" })).toThrow("PI_TASKS_EMBEDDED_RELAY must be 0");
    expect(relayConfigFromEnv({ PI_TASKS_EMBEDDED_RELAY: "1" }).embedded).toBe(true);
  });
});
