/**
 * The standalone relay, started through its CLI (`pi-tasks relay --port 0`), checked over real
 * HTTP: the full conformance suite, plus what needs process control — restart (`RELAY_RESET` with
 * the new epoch), signals (exit 0, a parked watch and a half-sent request not waited out), the
 * readiness line, and the optional JWT (`WOLFPACK_JWT_SECRET`, issuer, audience).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn } from "bun";
import { expectWireError, expectWireValue } from "../../src/conformance/kit.ts";
import {
  connectRequest,
  getPath,
  getProfile,
  openRawRequest,
  postBody,
  postJson,
  uniqueName,
  WireSession,
} from "../../src/conformance/wire-client.ts";
import { isUuid } from "../../src/protocol/endpoint.ts";
import { signJwt } from "../../src/protocol/jwt.ts";
import {
  jwtClockToleranceMs,
  minJwtSecretChars,
  jwtTokenLifetimeMs,
  KiB,
  minLeaseMs,
  maxRequestBodyBytes,
  relayMaintenanceIntervalMs,
  maxWatchWaitMs,
  minWatchWaitMs,
} from "../../src/protocol/limits.ts";
import { RELAY_ENDPOINT_PATH, RELAY_PROFILE, SESSION_STATUS_PATH } from "../../src/protocol/names.ts";
import { RELAY_FEATURES } from "../../src/relay-server/engine.ts";
import { settlesWithin } from "../../testkit/async.ts";
import { BUN, CLI_ENTRY, REPO_ROOT, type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { describeConformance } from "../helpers/conformance-tests.ts";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** How long a test waits for a relay process to start or exit before it gives up. */
const PROCESS_TIMEOUT_MS = 10_000;

// ---------------------------------------------------------------------------------------------
// The conformance suite against the CLI-started relay
// ---------------------------------------------------------------------------------------------

let relay: RelayProcess | undefined;
beforeAll(async () => {
  relay = await startRelayProcess();
});
afterAll(async () => {
  await relay?.stop();
});

describeConformance(() => relay!.url, RELAY_FEATURES);

// ---------------------------------------------------------------------------------------------
// Process control
// ---------------------------------------------------------------------------------------------

/** Spawns `pi-tasks relay --port 0` directly (for tests that read all of stdout or expect a refusal). */
function spawnRelayCli(env: Record<string, string | undefined> = {}) {
  return spawn([BUN, CLI_ENTRY, "relay", "--port", "0"], {
    cwd: REPO_ROOT,
    env: { ...process.env, WOLFPACK_JWT_SECRET: "", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
}

/** A secret of exactly `length` characters. */
function secretOf(length: number): string {
  return `${crypto.randomUUID()}${crypto.randomUUID()}`.replaceAll("-", "").padEnd(length, "s").slice(0, length);
}

describe("relay process", () => {
  test("the readiness line is exactly one JSON line {event, url, epoch, profile}", async () => {
    const child = spawnRelayCli();
    try {
      const reader = child.stdout.getReader();
      const decoder = new TextDecoder();
      let stdout = "";
      const readLine = async () => {
        while (!stdout.includes("\n")) {
          const chunk = await reader.read();
          if (chunk.done) break;
          stdout += decoder.decode(chunk.value, { stream: true });
        }
      };
      await settlesWithin(readLine(), "the readiness line", PROCESS_TIMEOUT_MS);
      const line = stdout.slice(0, stdout.indexOf("\n"));
      const ready = JSON.parse(line);
      expect(ready.url).toMatch(/^http:\/\/127\.0\.0\.1:[0-9]+$/);
      expect(isUuid(ready.epoch)).toBe(true);
      expect(line).toBe(JSON.stringify({ event: "listening", url: ready.url, epoch: ready.epoch, profile: RELAY_PROFILE }));
      // The line is written once the relay serves: its profile carries the same epoch.
      const profile = await getProfile(ready.url);
      expect(profile.body.epoch).toBe(ready.epoch);
      // Nothing else is ever written to stdout, up to and including shutdown.
      child.kill("SIGTERM");
      expect(await settlesWithin(child.exited, "exit", PROCESS_TIMEOUT_MS)).toBe(0);
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        stdout += decoder.decode(chunk.value, { stream: true });
      }
      expect(stdout).toBe(`${line}\n`);
    } finally {
      child.kill("SIGKILL");
    }
  });

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    test.concurrent(`${signal} exits 0 without waiting out a parked watch or a half-sent request`, async () => {
      const proc = await startRelayProcess();
      try {
        const session = await WireSession.connect(proc.url, { label: "shutdown" });
        const watch = session
          .call("watch", { cursor: "0", waitMs: maxWatchWaitMs }, { timeoutMs: maxWatchWaitMs + 5_000 })
          .catch((error: unknown) => error);
        const slow = openRawRequest(proc.url, { contentLength: KiB, body: "{" });
        await slow.sent;
        await sleep(100);
        proc.process.kill(signal);
        const code = await settlesWithin(proc.process.exited, `exit after ${signal}`, PROCESS_TIMEOUT_MS);
        expect(code).toBe(0);
        // Neither was waited out: the half-sent request's socket closed with no reply (its body
        // deadline would have answered it), the parked watch ended without an answer (its wait
        // would have). How fast the relay stops is a figure for `npm run bench`.
        expect(await settlesWithin(slow.reply, "the slow request's socket to close", PROCESS_TIMEOUT_MS)).toBeUndefined();
        expect(await settlesWithin(watch, "the parked watch to end", PROCESS_TIMEOUT_MS)).toBeInstanceOf(Error);
      } finally {
        proc.process.kill("SIGKILL");
      }
    });
  }
});

describe("restart", () => {
  let first: RelayProcess | undefined;
  let second: RelayProcess | undefined;
  let stale: WireSession;
  let sender: WireSession;

  beforeAll(async () => {
    first = await startRelayProcess();
    stale = await WireSession.connect(first.url, { label: "restart" });
    sender = await WireSession.connect(first.url, { label: "restart-sender" });
    await sender.sendOk(stale.endpoint);
    expect(await first.stop()).toBe(0);
    // The same port: a client keeps its URL across the restart.
    second = await startRelayProcess({ port: first.port });
  });
  afterAll(async () => {
    await first?.stop();
    await second?.stop();
  });

  test("after a restart every old-epoch request gets 409 RELAY_RESET carrying the new epoch", async () => {
    expect(second!.url).toBe(first!.url);
    expect(second!.epoch).not.toBe(first!.epoch);
    const operations: Record<string, Record<string, unknown>> = {
      health: {},
      receive: { cursor: "0" },
      send: { envelope: stale.envelopeTo(stale.endpoint) },
      acknowledge: { envelopeId: crypto.randomUUID() },
      resolve: { target: stale.endpoint },
      watch: { cursor: "0", waitMs: minWatchWaitMs },
      disconnect: {},
    };
    for (const [operation, fields] of Object.entries(operations)) {
      const reply = await stale.call(operation, fields);
      const error = expectWireError(reply, "RELAY_RESET", { epoch: second!.epoch, requireEpoch: true });
      expect(error.mayHaveBeenDelivered, operation).toBe(true);
    }
    // The mail accepted by the old relay is gone with it (memory only), and so is the sender.
    expectWireError(await sender.call("health"), "RELAY_RESET", { epoch: second!.epoch, requireEpoch: true });
  });

  test("connect with a stale epoch is RELAY_RESET; without an epoch it binds afresh", async () => {
    const name = stale.callerSession;
    const reply = await postJson(second!.url, connectRequest({ callerSession: name, generation: stale.generation, epoch: first!.epoch }));
    expectWireError(reply, "RELAY_RESET", { epoch: second!.epoch, requireEpoch: true });
    // The refused connect registered nothing.
    const status = await getPath(second!.url, `${SESSION_STATUS_PATH}?session=${encodeURIComponent(name)}`);
    expectWireError(status, "CALLER_NOT_FOUND", { epoch: second!.epoch, requireEpoch: true });
    const fresh = await WireSession.connect(second!.url, { callerSession: name, generation: crypto.randomUUID() });
    expect(fresh.epoch).toBe(second!.epoch);
    expect(fresh.endpoint.id).not.toBe(stale.endpoint.id);
    expect(await fresh.drain()).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Optional JWT
// ---------------------------------------------------------------------------------------------

describe("optional JWT", () => {
  const secret = secretOf(minJwtSecretChars);
  const issuer = "pi-tasks-conformance-issuer";
  const audience = "pi-tasks-conformance-audience";
  let plain: RelayProcess | undefined;
  let scoped: RelayProcess | undefined;

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  beforeAll(async () => {
    [plain, scoped] = await Promise.all([
      startRelayProcess({ env: { WOLFPACK_JWT_SECRET: secret, WOLFPACK_JWT_ISSUER: "", WOLFPACK_JWT_AUDIENCE: "" } }),
      startRelayProcess({ env: { WOLFPACK_JWT_SECRET: `  ${secret}  `, WOLFPACK_JWT_ISSUER: issuer, WOLFPACK_JWT_AUDIENCE: audience } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([plain?.stop(), scoped?.stop()]);
  });

  const expectUnauthorized = (reply: Parameters<typeof expectWireError>[0], epoch: string) => {
    expectWireError(reply, "RELAY_AUTH_REQUIRED", { epoch, requireEpoch: true, status: 401 });
    expect(reply.headers.get("www-authenticate")).toBe('Bearer realm="wolfpack"');
  };

  test.concurrent("a WOLFPACK_JWT_SECRET shorter than minJwtSecretChars (after trimming) refuses to start", async () => {
    for (const short of [secretOf(minJwtSecretChars - 1), `   ${secretOf(minJwtSecretChars - 1)}   `]) {
      const child = spawnRelayCli({ WOLFPACK_JWT_SECRET: short });
      try {
        const code = await settlesWithin(child.exited, "the refused relay to exit", PROCESS_TIMEOUT_MS);
        expect(code).not.toBe(0);
        const stdout = await new Response(child.stdout).text();
        const stderr = await new Response(child.stderr).text();
        expect(stdout).not.toContain("listening");
        expect(JSON.parse(stderr.split("\n")[0]!).error.code).toBe("RELAY_AUTH_REQUIRED");
      } finally {
        child.kill("SIGKILL");
      }
    }
  });

  test.concurrent("no token: 401 with WWW-Authenticate Bearer realm=wolfpack and a typed RELAY_AUTH_REQUIRED body", async () => {
    const name = uniqueName("jwt-none");
    expectUnauthorized(await postJson(plain!.url, connectRequest({ callerSession: name, generation: crypto.randomUUID() })), plain!.epoch);
    expectUnauthorized(await getProfile(plain!.url), plain!.epoch);
    expectUnauthorized(await getPath(plain!.url, `${SESSION_STATUS_PATH}?session=${encodeURIComponent(name)}`), plain!.epoch);
    for (const authorization of ["Bearer", "Basic dXNlcjpwYXNz", "Bearer not.a.token", `Token ${await signJwt(secret)}`]) {
      expectUnauthorized(await getProfile(plain!.url, { headers: { authorization } }), plain!.epoch);
    }
    // The refused connect registered nothing.
    const status = await getPath(plain!.url, `${SESSION_STATUS_PATH}?session=${encodeURIComponent(name)}`, {
      headers: bearer(await signJwt(secret)),
    });
    expectWireError(status, "CALLER_NOT_FOUND", { epoch: plain!.epoch, requireEpoch: true });
    // OPTIONS is answered before authentication.
    expect((await getPath(plain!.url, RELAY_ENDPOINT_PATH, { method: "OPTIONS" })).status).toBe(204);
  });

  test.concurrent("a token minted with signJwt is accepted (fresh per request, scheme case-insensitive)", async () => {
    const profile = await getProfile(plain!.url, { headers: bearer(await signJwt(secret)) });
    expect(profile.status).toBe(200);
    expect(profile.body.epoch).toBe(plain!.epoch);
    const name = uniqueName("jwt-ok");
    const connected = await postJson(plain!.url, connectRequest({ callerSession: name, generation: crypto.randomUUID() }), {
      headers: bearer(await signJwt(secret)),
    });
    const value = expectWireValue(connected, "connected", plain!.epoch);
    const request = { operation: "health", profile: RELAY_PROFILE, epoch: plain!.epoch, callerSession: name, endpoint: value.endpoint };
    expectWireValue(
      await postJson(plain!.url, request, { headers: { authorization: `bearer ${await signJwt(secret)}` } }),
      "health",
      plain!.epoch,
    );
    // A token still inside its lifetime, minted a little earlier, is fine too.
    const earlier = await signJwt(secret, { nowMs: Date.now() - jwtTokenLifetimeMs / 2 });
    expectWireValue(await postJson(plain!.url, request, { headers: bearer(earlier) }), "health", plain!.epoch);
  });

  test.concurrent("an expired token, or one signed with another secret, is 401", async () => {
    const longAgo = Date.now() - 100 * (jwtTokenLifetimeMs + jwtClockToleranceMs);
    expectUnauthorized(await getProfile(plain!.url, { headers: bearer(await signJwt(secret, { nowMs: longAgo })) }), plain!.epoch);
    // Just past expiry plus the clock tolerance.
    const justExpired = Date.now() - jwtTokenLifetimeMs - jwtClockToleranceMs - 5_000;
    expectUnauthorized(await getProfile(plain!.url, { headers: bearer(await signJwt(secret, { nowMs: justExpired })) }), plain!.epoch);
    // Issued far in the future.
    const future = Date.now() + 100 * (jwtTokenLifetimeMs + jwtClockToleranceMs);
    expectUnauthorized(await getProfile(plain!.url, { headers: bearer(await signJwt(secret, { nowMs: future })) }), plain!.epoch);
    expectUnauthorized(await getProfile(plain!.url, { headers: bearer(await signJwt(secretOf(minJwtSecretChars + 8))) }), plain!.epoch);
    // A valid token with a tampered signature.
    const token = await signJwt(secret);
    const tampered = `${token.slice(0, -2)}${token.endsWith("AA") ? "BB" : "AA"}`;
    expectUnauthorized(await getProfile(plain!.url, { headers: bearer(tampered) }), plain!.epoch);
  });

  test.concurrent("with WOLFPACK_JWT_ISSUER/AUDIENCE set: the wrong or a missing issuer or audience is 401", async () => {
    const epoch = scoped!.epoch;
    const accepted = await getProfile(scoped!.url, { headers: bearer(await signJwt(secret, { issuer, audience })) });
    expect(accepted.status).toBe(200);
    for (const claims of [
      { issuer: `${issuer}-other`, audience },
      { issuer, audience: `${audience}-other` },
      { audience },
      { issuer },
      {},
    ]) {
      const reply = await getProfile(scoped!.url, { headers: bearer(await signJwt(secret, claims)) });
      expect(reply.status, JSON.stringify(claims)).toBe(401);
      expectUnauthorized(reply, epoch);
    }
    // A relay started with claims also refuses tokens of another secret.
    expectUnauthorized(
      await getProfile(scoped!.url, { headers: bearer(await signJwt(secretOf(minJwtSecretChars), { issuer, audience })) }),
      epoch,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Known deviation
// ---------------------------------------------------------------------------------------------

describe("registration retention and typed 413s", () => {
  // Maintenance deletes an expired registration only if it pins no mail or receipts, and the
  // same generation keeps the endpoint id even after expiry as long as the entry has not been
  // reaped. Ended registrations stay known for the receipt retention window.
  test("a lapsed registration is not reaped at once: the same generation keeps its endpoint id", async () => {
    const session = await WireSession.connect(relay!.url, { label: "reap-receipts" });
    const { envelope } = await session.sendOk(session.endpoint);
    expectWireValue(await session.acknowledge(envelope.envelopeId), "acknowledged", relay!.epoch);
    expectWireValue(await session.renew({ leaseMs: minLeaseMs }), "connected", relay!.epoch);
    // Long enough for at least two maintenance passes.
    await sleep(2 * relayMaintenanceIntervalMs + 200);
    expectWireError(await session.call("health"), "REGISTRATION_EXPIRED", { epoch: relay!.epoch, requireEpoch: true });
    const renewed = expectWireValue(await session.renew(), "connected", relay!.epoch);
    expect(renewed.endpoint).toEqual(session.endpoint);
  });

  // Every error body carries profile:"volatile-v1", including 413 — also for bodies
  // far above the limit (the HTTP layer must not cut them first with an untyped reply).
  test("a body far above the limit still gets a typed 413", async () => {
    const reply = await postBody(relay!.url, new Uint8Array(maxRequestBodyBytes * 32));
    expectWireError(reply, "INVALID_REQUEST", { epoch: relay!.epoch, requireEpoch: true, status: 413 });
  });
});
