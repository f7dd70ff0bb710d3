/**
 * `binding-secret-v1` (docs/wire.md, our additions) with the real relay started through its CLI:
 * our client picks its own secret and protects its registration with it whenever the relay
 * advertises the feature, so its own connects — renewals, rebinds, a retry after a lost reply —
 * go through at once, while another local process — a raw wire client or a second `VolatileTaskSession`
 * — that names the live session can neither receive, acknowledge, disconnect, watch nor send as
 * it, nor re-register under its name. Every refusal is typed with its exact code and HTTP status,
 * and the victim's mail is still delivered afterwards. Plain clients, and our client against a
 * relay without the feature, work as before. The relay's side alone is checked by the
 * conformance suite (relay.test.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { expectWireError, expectWireValue } from "../../src/conformance/kit.ts";
import { connectRequest, getPath, postJson, type WireReply, WireSession } from "../../src/conformance/wire-client.ts";
import type { RegisteredErrorCode } from "../../src/protocol/errors.ts";
import { HTTP_STATUS } from "../../src/protocol/http.ts";
import { bindingSecretBytes, derivedNameSuffixChars, leaseRenewMarginMs } from "../../src/protocol/limits.ts";
import { RELAY_PROFILE, SESSION_LIST_PATH, SESSION_STATUS_PATH, WIRE_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import {
  type EncodedEnvelope,
  FEATURE_BINDING_SECRET,
  FEATURE_SUCCESSOR,
  FEATURE_WATCH,
  mintBindingSecret,
} from "../../src/protocol/wire.ts";
import {
  createVolatileTaskSession,
  derivedName,
  type VolatileTaskSession,
  type VolatileTaskSessionOptions,
} from "../../src/relay-client/session.ts";
import { failure } from "../../testkit/async.ts";
import { createFaultProxy, type FaultProxy, type ProxyRequest } from "../../testkit/fault-proxy.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";

/** Per-request deadline of the sessions here (never reached). */
const REQUEST_TIMEOUT_MS = 10_000;
/** Time given to a request that must NOT be sent, to show up anyway if the client sent it. */
const LEAK_WINDOW_MS = 100;
/** A lease short enough to wait out in a test. */
const SHORT_LEASE_MS = 400;
/** Slack on top of a `retryAfterMs` before the name is expected to be free. */
const LEASE_SLACK_MS = 100;
/** Characters of a secret: `bindingSecretBytes` in base64url without padding. */
const SECRET_CHARS = Math.ceil((bindingSecretBytes * 4) / 3);

setDefaultTimeout(20_000);

let relay: RelayProcess;
const sessions: VolatileTaskSession[] = [];
const proxies: FaultProxy[] = [];

beforeAll(async () => {
  relay = await startRelayProcess();
});

afterEach(async () => {
  for (const session of sessions.splice(0)) session.close();
  for (const proxy of proxies.splice(0)) await proxy.stop();
});

afterAll(async () => {
  await relay.stop();
});

function newProxy(): FaultProxy {
  const proxy = createFaultProxy({ target: relay.url });
  proxies.push(proxy);
  return proxy;
}

/** A proxy whose profile replies advertise everything but `binding-secret-v1` (an older relay). */
function proxyWithoutFeature(): FaultProxy {
  const proxy = newProxy();
  proxy.push({
    operation: "profile",
    kind: "rewrite",
    times: Infinity,
    rewrite: (body) => ({ ...body, features: [FEATURE_WATCH, FEATURE_SUCCESSOR] }),
  });
  return proxy;
}

function sessionName(label: string): string {
  return `secret-${label}-${crypto.randomUUID().slice(0, 8)}`;
}

function open(url: string, options: Partial<VolatileTaskSessionOptions> = {}): VolatileTaskSession {
  const session = createVolatileTaskSession({ url, callerSession: sessionName("s"), requestTimeoutMs: REQUEST_TIMEOUT_MS, ...options });
  sessions.push(session);
  return session;
}

function envelopeTo(session: VolatileTaskSession, target: TaskEndpoint): EncodedEnvelope {
  const envelopeId = crypto.randomUUID();
  const envelope = {
    envelopeId,
    protocolVersion: WIRE_PROTOCOL_VERSION,
    source: session.binding()!.endpoint,
    target,
    payload: { text: "hello" },
    createdAt: new Date().toISOString(),
  };
  return { envelopeId, text: JSON.stringify(envelope) };
}

/** A well-formed secret of another client. */
function strangerSecret(): string {
  return mintBindingSecret();
}

/** The request bodies the proxy saw, as objects. */
function bodies(proxy: FaultProxy, operation?: string): Record<string, unknown>[] {
  return proxy
    .requests()
    .filter((request: ProxyRequest) => request.method === "POST" && (operation === undefined || request.operation === operation))
    .map((request) => request.body as Record<string, unknown>);
}

/** The secret our client sent with its last request (seen at the proxy), a connect or a bound operation. */
function lastSecret(proxy: FaultProxy, operation?: string): string {
  const secret = bodies(proxy, operation).at(-1)?.bindingSecret;
  if (typeof secret !== "string") throw new Error("the last request carried no bindingSecret");
  return secret;
}

/** Asserts a typed refusal: the code, its registry status and retryable flag, and the relay's epoch. */
function refused(reply: WireReply, code: RegisteredErrorCode): Record<string, unknown> {
  return expectWireError(reply, code, { epoch: relay.epoch, requireEpoch: true });
}

// ---------------------------------------------------------------------------------------------

describe("our client protects its registration", () => {
  test("it picks its own secret, sends it on connect and on every bound operation; the secret shows nowhere else", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    const peer = open(relay.url);
    await peer.connect();
    const bound = await session.connect();
    const [connect] = bodies(proxy, "connect");
    const chosen = connect!.bindingSecret as string;
    expect(chosen).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(chosen.length).toBe(SECRET_CHARS);
    expect(Buffer.from(chosen, "base64url").length).toBe(bindingSecretBytes);
    expect(Object.keys(connect!)).not.toContain("previousSecret");
    // Another session object picks another secret.
    const other = open(proxy.url);
    await other.connect();
    expect(lastSecret(proxy, "connect")).not.toBe(chosen);

    const mail = envelopeTo(session, peer.binding()!.endpoint);
    await session.send(mail);
    await peer.send(envelopeTo(peer, bound.endpoint));
    const page = await session.receive("0");
    await session.acknowledge(page.deliveries[0]!.envelopeId);
    await session.watch(page.nextCursor, 0);
    await session.resolve(peer.binding()!.endpoint);
    const health = await session.health();
    const boundOps = bodies(proxy).filter((body) => body.operation !== "connect" && body.callerSession === session.callerSession);
    expect(boundOps.map((body) => body.operation)).toEqual(["send", "receive", "acknowledge", "watch", "resolve", "health"]);
    const secret = chosen;
    for (const body of boundOps) expect(body.bindingSecret).toBe(secret);

    // Not in the binding, the relay's session routes, health, or an error's details.
    const error = await failure(session.acknowledge(crypto.randomUUID()));
    expect(error.code).toBe("INVALID_REQUEST");
    const status = await getPath(relay.url, `${SESSION_STATUS_PATH}?session=${encodeURIComponent(session.callerSession)}`);
    const list = await getPath(relay.url, SESSION_LIST_PATH);
    for (const shown of [
      JSON.stringify(session.binding()),
      status.text,
      list.text,
      JSON.stringify(health),
      JSON.stringify(error.toJSON()),
      error.message,
    ]) {
      expect(shown).not.toContain(secret);
    }
    expect(session.status()).toBe("ready");
  });

  test("a lease renewal and a rebind carry the same secret and go through; the rebind's new endpoint is protected by it", async () => {
    let offsetMs = 0;
    const proxy = newProxy();
    const session = open(proxy.url, { now: () => Date.now() + offsetMs });
    const first = await session.connect();
    await session.health();
    const secret = lastSecret(proxy);

    // Inside the renewal window: the next operation renews first, with the same generation.
    offsetMs = first.leaseDeadline - Date.now() - (REQUEST_TIMEOUT_MS + leaseRenewMarginMs) + 1;
    await session.health();
    const [initial, renewal] = bodies(proxy, "connect");
    expect({ bindingSecret: renewal!.bindingSecret, generation: renewal!.generation }).toEqual({
      bindingSecret: secret,
      generation: initial!.generation,
    });
    expect(session.binding()!.endpoint).toEqual(first.endpoint);
    expect(lastSecret(proxy)).toBe(secret);

    const second = await session.rebind();
    expect(second.endpoint.id).not.toBe(first.endpoint.id);
    const rebind = bodies(proxy, "connect")[2]!;
    expect(rebind.bindingSecret).toBe(secret);
    expect(rebind.generation).not.toBe(renewal!.generation);
    await session.health();
    expect(lastSecret(proxy)).toBe(secret);
    for (const body of bodies(proxy, "connect")) expect(Object.keys(body)).not.toContain("previousSecret");

    const asOwner = (endpoint: TaskEndpoint, bindingSecret?: string) =>
      postJson(relay.url, {
        operation: "health",
        profile: RELAY_PROFILE,
        epoch: relay.epoch,
        callerSession: session.callerSession,
        endpoint,
        bindingSecret,
      });
    refused(await asOwner(second.endpoint), "BINDING_SECRET_REQUIRED");
    refused(await asOwner(second.endpoint, strangerSecret()), "BINDING_SECRET_INVALID");
    refused(await asOwner(first.endpoint, secret), "REGISTRATION_EXPIRED");
    expectWireValue(await asOwner(second.endpoint, secret), "health", relay.epoch);
  });

  test("a connect whose reply was lost: the retry binds at once to the registration it made (no SESSION_PROTECTED); an intruder with another secret is still refused", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    proxy.push({ operation: "connect", kind: "drop-reply" });
    const lost = await failure(session.connect());
    expect({ code: lost.code, retryable: lost.retryable }).toEqual({ code: "RELAY_UNAVAILABLE", retryable: true });
    expect(session.status()).toBe("unbound");
    // The relay did register it: the name is live and protected by the secret the client chose.
    const made = await getPath(relay.url, `${SESSION_STATUS_PATH}?session=${encodeURIComponent(session.callerSession)}`);
    expect(made.status).toBe(HTTP_STATUS.ok);

    const bound = await session.connect();
    expect(bound.endpoint).toEqual(made.body.taskEndpoint);
    const [first, retry] = bodies(proxy, "connect");
    expect(bodies(proxy, "connect").length).toBe(2);
    expect({ generation: retry!.generation, bindingSecret: retry!.bindingSecret }).toEqual({
      generation: first!.generation,
      bindingSecret: first!.bindingSecret,
    });
    expect(session.status()).toBe("ready");

    // The same after a lost rebind reply: the next connect takes the new registration over at once.
    proxy.push({ operation: "connect", kind: "drop-reply" });
    expect((await failure(session.rebind())).code).toBe("RELAY_UNAVAILABLE");
    const rebound = await session.connect();
    expect(rebound.endpoint.id).not.toBe(bound.endpoint.id);
    const statusNow = await getPath(relay.url, `${SESSION_STATUS_PATH}?session=${encodeURIComponent(session.callerSession)}`);
    expect(statusNow.body.taskEndpoint).toEqual(rebound.endpoint);

    // An intruder with its own secret: a raw connect and a second client are refused, as before.
    const raw = await postJson(relay.url, {
      ...connectRequest({ callerSession: session.callerSession, generation: crypto.randomUUID() }),
      bindingSecret: strangerSecret(),
    });
    expect(raw.status).toBe(HTTP_STATUS.forbidden);
    expect(refused(raw, "SESSION_PROTECTED").retryAfterMs as number).toBeGreaterThan(0);
    const rival = open(relay.url, { callerSession: session.callerSession });
    expect((await failure(rival.connect())).code).toBe("SESSION_PROTECTED");

    // The session works, and its mail arrives.
    const sender = await WireSession.connect(relay.url, { label: "secret-sender" });
    const { envelope } = await sender.sendOk(rebound.endpoint);
    expect((await session.receive("0")).deliveries.map((delivery) => delivery.envelopeId)).toEqual([envelope.envelopeId]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("an intruder on the same relay", () => {
  test("cannot receive, acknowledge, disconnect, watch or send as a live protected session; the mail is still delivered", async () => {
    const victim = open(relay.url);
    const bound = await victim.connect();
    const sender = await WireSession.connect(relay.url, { label: "secret-sender" });
    const { envelope } = await sender.sendOk(bound.endpoint);

    // Everything an intruder can learn: the name and endpoint (status route) and the epoch.
    const status = await getPath(relay.url, `${SESSION_STATUS_PATH}?session=${encodeURIComponent(victim.callerSession)}`);
    expect(status.body.taskEndpoint).toEqual(bound.endpoint);
    const asVictim = (operation: string, fields: Record<string, unknown>, bindingSecret?: string) =>
      postJson(relay.url, {
        operation,
        profile: RELAY_PROFILE,
        epoch: relay.epoch,
        callerSession: victim.callerSession,
        endpoint: bound.endpoint,
        ...fields,
        bindingSecret,
      });
    const attempts: Record<string, Record<string, unknown>> = {
      receive: { cursor: "0" },
      acknowledge: { envelopeId: envelope.envelopeId },
      disconnect: {},
      watch: { cursor: "0", waitMs: 0 },
      send: { envelope: { ...sender.envelopeTo(sender.endpoint), source: bound.endpoint } },
    };
    for (const [operation, fields] of Object.entries(attempts)) {
      const missing = await asVictim(operation, fields);
      expect({ operation, status: missing.status }).toEqual({ operation, status: HTTP_STATUS.unauthorized });
      refused(missing, "BINDING_SECRET_REQUIRED");
      const guessed = await asVictim(operation, fields, strangerSecret());
      expect({ operation, status: guessed.status }).toEqual({ operation, status: HTTP_STATUS.forbidden });
      refused(guessed, "BINDING_SECRET_INVALID");
    }

    // Nothing was read, acknowledged, ended or sent: the victim still gets its mail, once.
    expect(victim.status()).toBe("ready");
    const page = await victim.receive("0");
    expect(page.deliveries.map((delivery) => delivery.envelopeId)).toEqual([envelope.envelopeId]);
    expect(await victim.acknowledge(envelope.envelopeId)).toEqual({ duplicate: false });
    expect(await sender.drain()).toEqual([]);
    expect(await victim.watch("0", 0)).toEqual({ pending: false, highestCursor: "1" });
  });

  test("cannot re-register under the name: a raw connect and a second client get 403 SESSION_PROTECTED with retryAfterMs; the victim keeps its endpoint", async () => {
    const victim = open(relay.url);
    const bound = await victim.connect();
    const sender = await WireSession.connect(relay.url, { label: "secret-sender" });

    for (const fields of [{}, { bindingSecret: strangerSecret() }]) {
      const request = { ...connectRequest({ callerSession: victim.callerSession, generation: crypto.randomUUID() }), ...fields };
      const reply = await postJson(relay.url, request);
      expect(reply.status).toBe(HTTP_STATUS.forbidden);
      const error = refused(reply, "SESSION_PROTECTED");
      expect(error.retryAfterMs as number).toBeGreaterThan(0);
    }

    // A second process with the same name: one connect, a typed retryable refusal, no retry.
    const proxy = newProxy();
    const rival = open(proxy.url, { callerSession: victim.callerSession });
    const error = await failure(rival.connect());
    expect({
      code: error.code,
      retryable: error.retryable,
      httpStatus: error.details.httpStatus,
      operation: error.details.operation,
    }).toEqual({
      code: "SESSION_PROTECTED",
      retryable: true,
      httpStatus: HTTP_STATUS.forbidden,
      operation: "connect",
    });
    expect(error.details.retryAfterMs as number).toBeGreaterThan(0);
    expect(rival.status()).toBe("unbound");
    await Bun.sleep(LEAK_WINDOW_MS);
    expect(bodies(proxy, "connect").length).toBe(1);

    // The victim was not superseded: it keeps its endpoint and gets mail sent to it.
    const { envelope } = await sender.sendOk(bound.endpoint);
    expect((await victim.receive("0")).deliveries.map((delivery) => delivery.envelopeId)).toEqual([envelope.envelopeId]);
    expect(victim.binding()!.endpoint).toEqual(bound.endpoint);
  });

  test("a restarted process under the same name waits out the crashed one's lease, then binds", async () => {
    const crashed = open(relay.url, { leaseMs: SHORT_LEASE_MS });
    await crashed.connect();
    // The process is gone without a disconnect: its lease runs out on its own.
    crashed.close();
    const restarted = open(relay.url, { callerSession: crashed.callerSession });
    const error = await failure(restarted.connect());
    expect(error.code).toBe("SESSION_PROTECTED");
    const retryAfterMs = error.details.retryAfterMs as number;
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(SHORT_LEASE_MS);
    await Bun.sleep(retryAfterMs + LEASE_SLACK_MS);
    const bound = await restarted.connect();
    expect(restarted.status()).toBe("ready");
    expect((await restarted.receive("0")).deliveries).toEqual([]);
    expect(bound.callerSession).toBe(crashed.callerSession);
  });

  test("after the protected session disconnects, the name is free", async () => {
    const first = open(relay.url);
    const retired = await first.connect();
    await first.disconnect();
    const next = open(relay.url, { callerSession: first.callerSession });
    const bound = await next.connect();
    expect(bound.endpoint.id).not.toBe(retired.endpoint.id);
    expect((await next.receive("0")).deliveries).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("compatibility", () => {
  test("a plain client that sends no secret works as before: unprotected, and another connect takes its name", async () => {
    const name = sessionName("plain");
    const plain = await WireSession.connect(relay.url, { callerSession: name });
    expectWireValue(await plain.call("health"), "health", relay.epoch);
    const { envelope } = await plain.sendOk(plain.endpoint);
    expect((await plain.drain()).map((delivery) => delivery.envelope.envelopeId)).toEqual([envelope.envelopeId]);
    expectWireValue(await plain.acknowledge(envelope.envelopeId), "acknowledged", relay.epoch);
    const successor = await WireSession.connect(relay.url, { callerSession: name });
    expect(successor.endpoint.id).not.toBe(plain.endpoint.id);
    refused(await plain.call("health"), "REGISTRATION_EXPIRED");
  });

  test("against a relay without binding-secret-v1 our client sends no secret fields and works as before", async () => {
    const proxy = proxyWithoutFeature();
    const session = open(proxy.url);
    const peer = open(relay.url);
    await peer.connect();
    const first = await session.connect();
    expect(session.features().has(FEATURE_BINDING_SECRET)).toBe(false);
    await session.send(envelopeTo(session, peer.binding()!.endpoint));
    await peer.send(envelopeTo(peer, first.endpoint));
    const page = await session.receive("0");
    expect(page.deliveries.length).toBe(1);
    await session.acknowledge(page.deliveries[0]!.envelopeId);
    await session.watch(page.nextCursor, 0);
    await session.rebind();
    await session.health();
    await session.disconnect();
    const sent = bodies(proxy);
    expect(sent.map((body) => body.operation)).toEqual([
      "connect",
      "send",
      "receive",
      "acknowledge",
      "watch",
      "connect",
      "health",
      "disconnect",
    ]);
    for (const body of sent) expect(Object.keys(body)).not.toContain("bindingSecret");
  });

  test("SESSION_PROTECTED: a connect surfaces it as is (retryable, retryAfterMs); a rebind binds under a derived name once; a typed 403 BINDING_SECRET_INVALID retires the binding", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    const protectedReply = {
      operation: "connect",
      kind: "reply",
      status: 403,
      body: relayErrorBody("SESSION_PROTECTED", { retryable: true, retryAfterMs: 1_234 }),
    } as const;
    proxy.push(protectedReply);
    const connecting = await failure(session.connect());
    expect({ code: connecting.code, retryAfterMs: connecting.details.retryAfterMs, retryable: connecting.retryable }).toEqual({
      code: "SESSION_PROTECTED",
      retryAfterMs: 1_234,
      retryable: true,
    });
    const first = await session.connect();
    expect(first.callerSession).toBe(session.callerSession);
    // A rebind whose name another registration holds binds under `<name>~<generation prefix>`.
    proxy.push(protectedReply);
    const rebound = await session.rebind();
    expect(rebound.callerSession).toBe(derivedName(session.callerSession, rebound.generation));
    expect(rebound.callerSession).toMatch(new RegExp(`^${session.callerSession}~.{${derivedNameSuffixChars}}$`));
    expect(
      bodies(proxy)
        .slice(-2)
        .map((body) => body.callerSession),
    ).toEqual([session.callerSession, rebound.callerSession]);
    // Held too: surfaced as is, nothing bound.
    proxy.push({ ...protectedReply, times: 2 });
    const rebinding = await failure(session.rebind());
    expect(rebinding.code).toBe("SESSION_PROTECTED");
    expect(session.status()).toBe("unbound");
    await session.connect();
    proxy.push({ operation: "receive", kind: "reply", status: 403, body: relayErrorBody("BINDING_SECRET_INVALID") });
    const error = await failure(session.receive("0"));
    expect({ code: error.code, cause: error.details.cause }).toEqual({ code: "RELAY_RESET", cause: "BINDING_SECRET_INVALID" });
    expect(session.status()).toBe("reset");
  });
});

function relayErrorBody(code: RegisteredErrorCode, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ok: false, profile: RELAY_PROFILE, epoch: relay.epoch, error: { code, message: "server text", retryable: false, ...extra } };
}
