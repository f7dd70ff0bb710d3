/**
 * `pi-tasks relay [--host 127.0.0.1] [--port 18790] [--allow ADDR[,ADDR…]] [--secret-file PATH] [--store redis://HOST:PORT[/DB] [--allow-persistent-store]]`
 *
 * The port is `--port`, else `WOLFPACK_PORT`, else 18790 — where Pis look for the default relay.
 * Starts the memory-only relay. When ready it prints exactly one JSON line
 * `{"event":"listening","url":…,"epoch":…,"profile":"volatile-v1"}` on stdout (with `"store":URL`
 * when its state lives in Redis); SIGTERM and SIGINT stop it and exit 0 within 2 s.
 *
 * `--store redis://…` (or `rediss://…`, TLS) keeps the state in a Redis that relays on other
 * machines share (docs/multi-machine.md); the default is the in-process store. A Redis that cannot
 * be reached within 2 s, persists to disk (unless `--allow-persistent-store`) or may evict keys is
 * refused before the relay listens: one JSON line on stderr, exit 1; a malformed URL exits 2.
 *
 * `--secret-file PATH` names a relay secret (docs/security.md, "The relay secret"; the file is read,
 * the secret never appears on the command line): the relay then serves only clients that prove it
 * (a relay token per request), proves itself to them, and refuses an unsafe file with
 * `RELAY_SECRET_INVALID` before it listens. The embedded relay is started with its user's secret
 * for the port, and with its instance nonce in `PI_TASKS_RELAY_INSTANCE` (for `relay stop`).
 *
 * `pi-tasks relay stop [--port 18790] [--json]` stops the relay pi-tasks started itself on that
 * port (the embedded relay; see embedded-relay.ts), and nothing else: it signals the recorded pid
 * only after the relay on the port proved it is that very instance with that pid; otherwise it
 * signals nothing, removes the stale record and fails with `RELAY_RECORD_STALE`.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { TaskError } from "../protocol/errors.ts";
import { embeddedRelayInstallCheckMs, maxTcpPort, relayShutdownGraceMs } from "../protocol/limits.ts";
import { RELAY_PROFILE, DEFAULT_RELAY_HOST } from "../protocol/names.ts";
import { defaultRelayPort } from "../relay-client/config.ts";
import { startRelayServer } from "../relay-server/server.ts";
import type { RedisStore } from "../relay-server/store/redis/index.ts";
import { readRelaySecret } from "../trust/relay-secret.ts";
import { instanceFromEnv, stopEmbeddedRelay } from "../host/embedded-relay.ts";

export interface RelayCommandIo {
  readonly stdout: (line: string) => void;
  /** Operator notices (e.g. a persistent Redis allowed by the flag), one JSON line each. */
  readonly stderr?: (line: string) => void;
  readonly env: Record<string, string | undefined>;
}

/** `--port`, else `WOLFPACK_PORT`, else 18790: the relay serves (and `stop` stops) where Pis look for it. */
function parsePort(value: string | undefined, env: Record<string, string | undefined>): number {
  if (value === undefined) return defaultRelayPort(env);
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > maxTcpPort || !/^\d+$/.test(value)) {
    throw new TaskError("CLI_USAGE", { message: `--port must be an integer from 0 to ${maxTcpPort}`, details: { port: value } });
  }
  return port;
}

async function stopCommand(argv: readonly string[], io: RelayCommandIo): Promise<{ value: unknown; json: boolean; text: string }> {
  const { values } = parseArgs({ args: [...argv], options: { port: { type: "string" }, json: { type: "boolean" } }, strict: true });
  const port = parsePort(values.port, io.env);
  const result = await stopEmbeddedRelay(io.env, port);
  if (!result.stopped) {
    throw new TaskError("SESSION_NOT_OWNED", {
      message: `pi-tasks did not start a relay on port ${port}; it stops only its own.`,
      details: { port },
    });
  }
  return {
    value: { ok: true, port, pid: result.pid, stopped: true },
    json: values.json === true,
    text: `Stopped the relay pi-tasks started on port ${port} (pid ${result.pid}). Your Pis leave it stopped until /tasks relay start, or a new Pi session.`,
  };
}

/**
 * Stops the relay (`stop`) once `script` — the file it runs from — is gone (`pi remove` deleted the
 * install), checked every `embeddedRelayInstallCheckMs`; says so on stderr first.
 */
function watchInstall(script: string | undefined, stop: () => void, io: RelayCommandIo): void {
  if (script === undefined || !existsSync(script)) return;
  const timer = setInterval(() => {
    if (existsSync(script)) return;
    clearInterval(timer);
    io.stderr?.(`${JSON.stringify({ event: "install-removed", script, problem: "the install this relay ran from is gone; stopping" })}\n`);
    stop();
  }, embeddedRelayInstallCheckMs);
  timer.unref();
}

/** The secret of `--secret-file` (a missing file is refused like an unsafe one: the relay must not run open). */
function secretFrom(path: string | undefined): Buffer | undefined {
  if (path === undefined) return undefined;
  const secret = readRelaySecret(resolve(path));
  if (secret === undefined)
    throw new TaskError("RELAY_SECRET_INVALID", {
      message: `The relay secret ${resolve(path)} does not exist (--secret-file).`,
      details: { path: resolve(path) },
    });
  return secret;
}

/**
 * The Redis store of `--store`: connected, its configuration checked, its epoch read. Loaded only
 * when asked for, so a relay in memory never loads the Redis client.
 */
async function openStore(url: string, allowPersistentStore: boolean, io: RelayCommandIo): Promise<RedisStore> {
  const { createRedisStore } = await import("../relay-server/store/redis/index.ts");
  return createRedisStore({
    url,
    env: io.env,
    allowPersistentStore,
    onNotice: (message) => io.stderr?.(`${JSON.stringify({ event: "store-notice", message })}\n`),
  });
}

/** Runs the relay until a signal (resolves with the exit code), or stops the embedded relay. */
export async function relayCommand(
  argv: readonly string[],
  io: RelayCommandIo,
): Promise<number | { value: unknown; json: boolean; text: string }> {
  if (argv[0] === "stop") return stopCommand(argv.slice(1), io);
  const { values, positionals } = parseArgs({
    args: [...argv],
    options: {
      host: { type: "string" },
      port: { type: "string" },
      allow: { type: "string", multiple: true },
      store: { type: "string" },
      "secret-file": { type: "string" },
      "allow-persistent-store": { type: "boolean" },
      json: { type: "boolean" },
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) throw new TaskError("CLI_USAGE", { message: `unexpected argument ${positionals[0]}` });
  if (values["allow-persistent-store"] === true && values.store === undefined) {
    throw new TaskError("CLI_USAGE", { message: "--allow-persistent-store applies to a --store redis://… only" });
  }
  const allow = (values.allow ?? [])
    .flatMap((entry) => entry.split(","))
    .map((entry) => entry.trim())
    .filter(Boolean);
  const port = parsePort(values.port, io.env);
  const relaySecret = secretFrom(values["secret-file"]);
  const instance = instanceFromEnv(io.env);
  const store = values.store === undefined ? undefined : await openStore(values.store, values["allow-persistent-store"] === true, io);
  let server: Awaited<ReturnType<typeof startRelayServer>>;
  try {
    server = await startRelayServer({
      host: values.host ?? DEFAULT_RELAY_HOST,
      port,
      allow,
      env: io.env,
      ...(store === undefined ? {} : { store }),
      ...(relaySecret === undefined ? {} : { relaySecret }),
      ...(instance === undefined ? {} : { instance }),
    });
  } catch (error) {
    await store?.close();
    throw error;
  }
  // The signal handlers are in place before the readiness line: a supervisor may stop the relay as
  // soon as it reads that line.
  const stopped = new Promise<number>((resolve) => {
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      const force = setTimeout(() => resolve(0), relayShutdownGraceMs / 2);
      force.unref();
      server.stop().then(
        () => resolve(0),
        () => resolve(0),
      );
    };
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
    // A relay a Pi started runs from that Pi's install: once the install is removed, it stops.
    if (instance !== undefined) watchInstall(process.argv[1], stop, io);
  });
  io.stdout(
    `${JSON.stringify({ event: "listening", url: server.url, epoch: server.epoch, profile: RELAY_PROFILE, ...(store === undefined ? {} : { store: store.target }) })}\n`,
  );
  return stopped;
}
