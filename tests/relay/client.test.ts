/**
 * The relay client (transport + session) against the real relay started through its CLI, directly
 * and through the fault proxy (testkit/fault-proxy.ts).
 *
 * Covers the client's reaction to a lost binding, its own error codes and its JWT (docs/wire.md),
 * early lease renewal, retryable failures kept retryable, slot release, 401, pending forwarding,
 * a missing profile, oversized bodies, and late replies of a retired binding against its
 * successor. No eager `.rejects`: every failure is captured with `.then(…, …)` first.
 */
import { afterAll, afterEach, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ERROR_REGISTRY, TaskError } from "../../src/protocol/errors.ts";
import { signJwt, verifyJwt } from "../../src/protocol/jwt.ts";
import {
  minJwtSecretChars,
  leaseRenewMarginMs,
  maxInFlightRequests,
  maxRequestBodyBytes,
  maxResponseBodyBytes,
  msPerSecond,
  maxReceivePageItems,
  defaultRequestDeadlineMs,
  maxRequestDeadlineMs,
  minRequestDeadlineMs,
  reservedRequestSlots,
} from "../../src/protocol/limits.ts";
import { RELAY_ID, RELAY_PROFILE, WIRE_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import {
  type EncodedEnvelope,
  EPOCHLESS_CODES,
  FEATURE_ACK_BATCH,
  FEATURE_ACK_CARRY,
  FEATURE_SEND_BATCH,
  FEATURE_BINDING_SECRET,
  FEATURE_MAIL_EXPIRY,
  FEATURE_QUOTAS,
  FEATURE_STRICT_ANSWERS,
  FEATURE_SUCCESSOR,
  FEATURE_WATCH,
} from "../../src/protocol/wire.ts";
import { authFromEnv, type RelayAuth, tokenFor } from "../../src/relay-client/auth.ts";
import { isLoopbackHttpUrl } from "../../src/relay-client/config.ts";
import { RELAY_SECRET_DIR_VARIABLE } from "../../src/trust/relay-secret.ts";
import { createVolatileTaskSession, type VolatileTaskSession, type VolatileTaskSessionOptions } from "../../src/relay-client/session.ts";
import { createRelayTransport } from "../../src/relay-client/transport.ts";
import { eventually, failure, settlesWithin } from "../../testkit/async.ts";
import { createFaultProxy, type FaultProxy, type FaultRule } from "../../testkit/fault-proxy.ts";
import { freePort, type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/** Deadline for tests that hold requests on purpose (never reached). */
const HOLD_DEADLINE_MS = 10_000;
/** Short deadline for timeout tests. */
const SHORT_DEADLINE_MS = 300;
/** Deadline of the slot-release loop (20 sequential timeouts). */
const LOOP_DEADLINE_MS = 150;
/**
 * How long a test waits for a request its deadline must end: a budget for a loaded machine, not a
 * bound (how close to its deadline a request ends is for `npm run bench`). The faults used never end
 * by themselves (hang, an unsettled fetch) or end in a success (delay, slow body): only the deadline
 * gives RELAY_TIMEOUT.
 */
const DEADLINE_WAIT_MS = 10_000;
/** With `leaseFor(deadline)`, the lease renewal window opens this long after connect. */
const RENEW_AFTER_MS = 9_000;
/**
 * How long a test waits for a call that must not queue behind held requests (they are held until
 * released, so a call behind them would never settle): a budget for a loaded machine.
 */
const QUICK_MS = 10_000;
/** Time given to a request that must NOT be sent, to show up anyway if the client leaked it. */
const LEAK_WINDOW_MS = 100;

// Longer than every wait inside a test (proxy.waitFor / until: 5 s), so a broken client fails an
// assertion with a message instead of a timeout (a timed-out test also kills the shared relay).
setDefaultTimeout(20_000);

let relay: RelayProcess;
const sessions: VolatileTaskSession[] = [];
const proxies: FaultProxy[] = [];
const relays: RelayProcess[] = [];
let nameCounter = 0;

beforeAll(async () => {
  relay = await startRelayProcess();
});

afterEach(async () => {
  for (const session of sessions.splice(0)) session.close();
  for (const proxy of proxies.splice(0)) await proxy.stop();
  for (const extra of relays.splice(0)) await extra.stop();
});

afterAll(async () => {
  await relay.stop();
});

function newProxy(target = relay.url): FaultProxy {
  const proxy = createFaultProxy({ target });
  proxies.push(proxy);
  return proxy;
}

function sessionName(label: string): string {
  nameCounter += 1;
  return `client-${label}-${nameCounter}-${crypto.randomUUID().slice(0, 8)}`;
}

function open(url: string, options: Partial<VolatileTaskSessionOptions> = {}): VolatileTaskSession {
  const session = createVolatileTaskSession({ url, callerSession: sessionName("s"), requestTimeoutMs: HOLD_DEADLINE_MS, ...options });
  sessions.push(session);
  return session;
}

/** Asserts the code, the operation, the registry message and (optionally) `retryable`. */
function expectFailure(error: TaskError, code: keyof typeof ERROR_REGISTRY, operation: string, retryable?: boolean): void {
  expect({ code: error.code, operation: error.details.operation }).toEqual({ code, operation });
  expect(error.message).toBe(ERROR_REGISTRY[code].message);
  if (retryable !== undefined) expect(error.retryable).toBe(retryable);
}

/** Settles a promise into its value or its error, without unhandled rejections. */
function settle<T>(promise: Promise<T>): Promise<T | TaskError> {
  return promise.then(
    (value) => value,
    (error: unknown) => {
      if (error instanceof TaskError) return error;
      throw error;
    },
  );
}

function envelopeTo(session: VolatileTaskSession, target?: TaskEndpoint, payload: unknown = { text: "hello" }): EncodedEnvelope {
  const me = session.binding()!.endpoint;
  const envelopeId = crypto.randomUUID();
  const envelope = {
    envelopeId,
    protocolVersion: WIRE_PROTOCOL_VERSION,
    source: me,
    target: target ?? me,
    payload,
    createdAt: new Date().toISOString(),
  };
  return { envelopeId, text: JSON.stringify(envelope) };
}

/** A lease whose renewal window (less than deadline + leaseRenewMarginMs left) opens RENEW_AFTER_MS after connect. */
function leaseFor(requestTimeoutMs: number): number {
  return RENEW_AFTER_MS + requestTimeoutMs + leaseRenewMarginMs;
}

function range(count: number): number[] {
  return Array.from({ length: count }, (_, index) => index);
}

function seen(proxy: FaultProxy, operation: string): number {
  return proxy.stats().operations[operation]?.seen ?? 0;
}

function relayError(code: string, epoch: string | undefined, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ok: false,
    profile: RELAY_PROFILE,
    ...(epoch === undefined ? {} : { epoch }),
    error: { code, message: `server text for ${code}: xyzzy-server-words`, retryable: false, ...extra },
  };
}

function httpStatusOf(code: keyof typeof ERROR_REGISTRY): number {
  const spec = ERROR_REGISTRY[code] as { httpStatus?: number };
  return spec.httpStatus ?? 400;
}

/** A port nothing listens on (bound once, then released). */

/** A fetch that ignores its abort signal: a reply is delivered even after the client gave up. */
const fetchIgnoringAbort = (async (input: string | URL | Request, init?: RequestInit) => {
  const request = new Request(input as Request, init);
  const body = request.method === "GET" || request.method === "HEAD" ? undefined : await request.text();
  return fetch(request.url, { method: request.method, headers: request.headers, ...(body === undefined ? {} : { body }) });
}) as unknown as typeof fetch;

// ---------------------------------------------------------------------------------------------
// Lanes
// ---------------------------------------------------------------------------------------------

describe("request lanes", () => {
  test("ordinary requests in flight never exceed maxInFlightRequests; acknowledges get through on the reserved slots, never beyond them", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    const mail = range(3).map(() => envelopeTo(session));
    for (const envelope of mail) await session.send(envelope);
    proxy.resetStats();

    proxy.push({ operation: "receive", kind: "hold", times: Number.POSITIVE_INFINITY });
    const extra = 4;
    const receives = range(maxInFlightRequests + extra).map(() => settle(session.receive("0")));
    await proxy.waitFor((stats) => stats.held >= maxInFlightRequests);
    await Bun.sleep(LEAK_WINDOW_MS);
    expect(proxy.stats().held).toBe(maxInFlightRequests);
    expect(proxy.stats().maxInFlight).toBe(maxInFlightRequests);
    expect(session.transport.usage()).toEqual({ ordinary: maxInFlightRequests, reserved: 0, waiting: extra });

    // While every ordinary slot hangs, an acknowledge still reaches the relay and completes.
    expect(await settlesWithin(session.acknowledge(mail[0]!.envelopeId), "the request", QUICK_MS)).toEqual({ duplicate: false });
    expect(proxy.stats().operations.acknowledge).toEqual({ seen: 1, forwarded: 1, faulted: 0 });

    // Hold acknowledges too: only the reserved slots go out; the next one waits.
    proxy.push({ operation: "acknowledge", kind: "hold", times: Number.POSITIVE_INFINITY });
    const acks = [mail[1]!, mail[2]!, mail[0]!].map((envelope) => settle(session.acknowledge(envelope.envelopeId)));
    await proxy.waitFor((stats) => stats.held >= maxInFlightRequests + reservedRequestSlots);
    await Bun.sleep(LEAK_WINDOW_MS);
    expect(proxy.stats().held).toBe(maxInFlightRequests + reservedRequestSlots);
    expect(proxy.stats().maxInFlight).toBe(maxInFlightRequests + reservedRequestSlots);
    expect(session.transport.usage()).toEqual({ ordinary: maxInFlightRequests, reserved: reservedRequestSlots, waiting: extra + 1 });

    proxy.clear();
    proxy.release();
    const receiveResults = await Promise.all(receives);
    const ackResults = await Promise.all(acks);
    for (const result of receiveResults) expect(result).not.toBeInstanceOf(TaskError);
    expect(ackResults).toEqual([{ duplicate: false }, { duplicate: false }, { duplicate: true }]);
    expect(proxy.stats().maxInFlight).toBe(maxInFlightRequests + reservedRequestSlots);
    expect(session.transport.usage()).toEqual({ ordinary: 0, reserved: 0, waiting: 0 });
  });

  test("a lease renewal (connect) gets through on a reserved slot while every ordinary slot hangs", async () => {
    const proxy = newProxy();
    let skew = 0;
    const requestTimeoutMs = 5_000;
    const session = open(proxy.url, { leaseMs: leaseFor(requestTimeoutMs), requestTimeoutMs, now: () => Date.now() + skew });
    const bound = await session.connect();
    proxy.push({ operation: "receive", kind: "hold", times: maxInFlightRequests });
    const hanging = range(maxInFlightRequests).map(() => settle(session.receive("0")));
    await proxy.waitFor((stats) => stats.held >= maxInFlightRequests);
    // Inside the renewal window the next operation renews first: the connect is not starved.
    skew = RENEW_AFTER_MS + 1_000;
    const next = settle(session.receive("0"));
    await proxy.waitFor((stats) => (stats.operations.connect?.forwarded ?? 0) === 2, QUICK_MS);
    expect(await eventually(() => session.binding()!.leaseDeadline > bound.leaseDeadline, QUICK_MS)).toBe(true);
    expect(session.binding()!.endpoint).toEqual(bound.endpoint);
    expect(session.transport.usage()).toEqual({ ordinary: maxInFlightRequests, reserved: 0, waiting: 1 });
    proxy.release();
    for (const result of await Promise.all([...hanging, next])) expect(result).not.toBeInstanceOf(TaskError);
  });

  test("waiters are served in FIFO order", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    proxy.push({ operation: "receive", kind: "hold", times: maxInFlightRequests });
    const hanging = range(maxInFlightRequests).map(() => settle(session.receive("0", { limit: maxReceivePageItems })));
    await proxy.waitFor((stats) => stats.held >= maxInFlightRequests);

    // Waiters A..E, told apart by their page limit.
    const marks = [1, 2, 3, 4, 5];
    const queued: Array<Promise<unknown>> = [];
    for (const limit of marks) {
      queued.push(settle(session.receive("0", { limit })));
      expect(await eventually(() => session.transport.usage().waiting === queued.length, 5_000)).toBe(true);
    }
    await Bun.sleep(LEAK_WINDOW_MS);
    expect(proxy.stats().held).toBe(maxInFlightRequests);
    expect(session.transport.usage()).toEqual({ ordinary: maxInFlightRequests, reserved: 0, waiting: marks.length });
    // Free one slot: the waiters then cycle through that single slot one by one.
    proxy.release(1);
    for (const result of await Promise.all(queued)) expect(result).not.toBeInstanceOf(TaskError);
    const arrivals = proxy
      .requests()
      .filter((request) => request.operation === "receive" && request.fault === undefined)
      .map((request) => (request.body as { limit: number }).limit);
    expect(arrivals).toEqual(marks);

    proxy.release();
    await Promise.all(hanging);
    expect(session.transport.usage()).toEqual({ ordinary: 0, reserved: 0, waiting: 0 });
  });

  test("abort: a queued waiter fails ABORTED (sent:false) and is never sent; an in-flight abort fails ABORTED", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    proxy.push({ operation: "receive", kind: "hold", times: Number.POSITIVE_INFINITY });

    // In flight: the request reached the proxy, then the caller aborts.
    const inFlight = new AbortController();
    const inFlightCall = failure(session.receive("0", { limit: 9, signal: inFlight.signal }));
    await proxy.waitFor((stats) => stats.held >= 1);
    inFlight.abort();
    const inFlightError = await inFlightCall;
    expectFailure(inFlightError, "ABORTED", "receive", true);
    expect(inFlightError.details.sent).toBe(true);
    expect(inFlightError.details.mayHaveBeenDelivered).toBe(true);
    await proxy.waitFor((stats) => stats.held === 0);

    // Queued: every slot is held, the waiter is aborted before a slot frees.
    const hanging = range(maxInFlightRequests).map(() => settle(session.receive("0", { limit: maxReceivePageItems })));
    await proxy.waitFor((stats) => stats.held >= maxInFlightRequests);
    const queued = new AbortController();
    const queuedCall = failure(session.receive("0", { limit: 7, signal: queued.signal }));
    expect(await eventually(() => session.transport.usage().waiting === 1, 5_000)).toBe(true);
    queued.abort();
    const queuedError = await queuedCall;
    expectFailure(queuedError, "ABORTED", "receive", true);
    expect(queuedError.details.sent).toBe(false);
    expect(queuedError.details.mayHaveBeenDelivered).toBeUndefined();
    expect(session.transport.usage().waiting).toBe(0);

    proxy.clear();
    proxy.release();
    await Promise.all(hanging);
    await Bun.sleep(LEAK_WINDOW_MS);
    const limits = proxy.requests().map((request) => (request.body as { limit?: number } | undefined)?.limit);
    expect(limits).toContain(9);
    expect(limits).not.toContain(7);
    expect(session.status()).toBe("ready");
    expect(session.transport.usage()).toEqual({ ordinary: 0, reserved: 0, waiting: 0 });
  });

  test("every failure path releases its slot: after 10 sequential failures of each kind the lanes are empty and a request succeeds", async () => {
    const rounds = maxInFlightRequests + reservedRequestSlots;
    const proxy = newProxy();
    const session = open(proxy.url, { requestTimeoutMs: LOOP_DEADLINE_MS });
    await session.connect();
    const cases: Array<[FaultRule, keyof typeof ERROR_REGISTRY]> = [
      [{ operation: "receive", kind: "status-429" }, "RELAY_CAPACITY"],
      [{ operation: "receive", kind: "capacity", epoch: relay.epoch, retryAfterMs: 5 }, "RELAY_CAPACITY"],
      [{ operation: "receive", kind: "hang" }, "RELAY_TIMEOUT"],
      [{ operation: "receive", kind: "delay", ms: LOOP_DEADLINE_MS * 2 }, "RELAY_TIMEOUT"],
      [{ operation: "receive", kind: "malformed-json" }, "INVALID_RESPONSE"],
      [{ operation: "receive", kind: "oversized" }, "INVALID_RESPONSE"],
      [{ operation: "receive", kind: "oversized", chunked: true }, "INVALID_RESPONSE"],
      [{ operation: "receive", kind: "drop-reply" }, "RELAY_UNAVAILABLE"],
      [{ operation: "receive", kind: "wrong-profile" }, "RELAY_PROFILE_REQUIRED"],
      [{ operation: "receive", kind: "reply", status: 401, body: { error: "unauthorized" } }, "RELAY_AUTH_REQUIRED"],
    ];
    for (const [rule, code] of cases) {
      proxy.push({ ...rule, times: rounds });
      for (let round = 0; round < rounds; round += 1) {
        const error = await failure(session.receive("0"));
        expectFailure(error, code, "receive");
      }
      expect({ fault: rule.kind, usage: session.transport.usage() }).toEqual({
        fault: rule.kind,
        usage: { ordinary: 0, reserved: 0, waiting: 0 },
      });
    }
    // Aborts in flight (held, then aborted by the caller).
    proxy.push({ operation: "receive", kind: "hold", times: rounds });
    for (let round = 0; round < rounds; round += 1) {
      const controller = new AbortController();
      const before = seen(proxy, "receive");
      const call = failure(session.receive("0", { signal: controller.signal }));
      await proxy.waitFor(() => seen(proxy, "receive") === before + 1);
      controller.abort();
      expectFailure(await call, "ABORTED", "receive", true);
    }
    expect(session.transport.usage()).toEqual({ ordinary: 0, reserved: 0, waiting: 0 });
    expect(proxy.stats().operations.receive!.faulted).toBe(rounds * (cases.length + 1));
    expect(session.status()).toBe("ready");
    const page = await session.receive("0");
    expect(page.deliveries).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Deadlines
// ---------------------------------------------------------------------------------------------

describe("request deadline", () => {
  test("a reply delayed past requestTimeoutMs fails retryable RELAY_TIMEOUT at the deadline, not before; the send may still take effect", async () => {
    const proxy = newProxy();
    const session = open(proxy.url, { requestTimeoutMs: SHORT_DEADLINE_MS });
    await session.connect();
    proxy.push({ operation: "send", kind: "delay", ms: SHORT_DEADLINE_MS * 2 });
    const envelope = envelopeTo(session);
    const started = performance.now();
    const error = await settlesWithin(failure(session.send(envelope)), "the request", DEADLINE_WAIT_MS);
    const elapsed = performance.now() - started;
    expectFailure(error, "RELAY_TIMEOUT", "send", true);
    expect(error.details.mayHaveBeenDelivered).toBe(true);
    expect(elapsed).toBeGreaterThanOrEqual(SHORT_DEADLINE_MS - 5);
    // The relay got it after the client gave up: "may have been delivered" is true.
    await proxy.waitFor((stats) => stats.operations.send!.forwarded === 1 && stats.inFlight === 0);
    const page = await session.receive("0");
    expect(page.deliveries.map((delivery) => delivery.envelopeId)).toEqual([envelope.envelopeId]);
    expect(session.status()).toBe("ready");
  });

  test("a hanging relay fails RELAY_TIMEOUT: the deadline ends the request", async () => {
    const proxy = newProxy();
    const session = open(proxy.url, { requestTimeoutMs: SHORT_DEADLINE_MS });
    await session.connect();
    proxy.push({ operation: "health", kind: "hang" });
    const error = await settlesWithin(failure(session.health()), "the request", DEADLINE_WAIT_MS);
    expectFailure(error, "RELAY_TIMEOUT", "health", true);
    expect(error.details.mayHaveBeenDelivered).toBe(true);
    await proxy.waitFor((stats) => stats.inFlight === 0);
    expect(session.status()).toBe("ready");
  });

  test("the deadline covers the response body, not just the headers", async () => {
    const proxy = newProxy();
    const session = open(proxy.url, { requestTimeoutMs: SHORT_DEADLINE_MS });
    await session.connect();
    proxy.push({ operation: "receive", kind: "slow-body", ms: SHORT_DEADLINE_MS * 3 });
    const error = await settlesWithin(failure(session.receive("0")), "the request", DEADLINE_WAIT_MS);
    expectFailure(error, "RELAY_TIMEOUT", "receive", true);
    expect(session.transport.usage()).toEqual({ ordinary: 0, reserved: 0, waiting: 0 });
  });

  test("an injected fetch that ignores the abort signal and never settles still fails RELAY_TIMEOUT at the deadline and frees its slot", async () => {
    const neverSettles = (() => new Promise<Response>(() => undefined)) as unknown as typeof fetch;
    const transport = createRelayTransport({ baseUrl: "http://127.0.0.1:1", fetch: neverSettles, requestTimeoutMs: SHORT_DEADLINE_MS });
    const started = performance.now();
    const error = await settlesWithin(
      failure(transport.post("send", JSON.stringify({ operation: "send" }))),
      "the request",
      DEADLINE_WAIT_MS,
    );
    const elapsed = performance.now() - started;
    expectFailure(error, "RELAY_TIMEOUT", "send", true);
    expect(error.details.mayHaveBeenDelivered).toBe(true);
    expect(elapsed).toBeGreaterThanOrEqual(SHORT_DEADLINE_MS - 5);
    await Bun.sleep(0);
    expect(transport.usage()).toEqual({ ordinary: 0, reserved: 0, waiting: 0 });
    transport.close();
  });

  test("requestTimeoutMs must lie in minRequestDeadlineMs..maxRequestDeadlineMs", async () => {
    for (const bad of [minRequestDeadlineMs - 1, maxRequestDeadlineMs + 1, minRequestDeadlineMs + 0.5, Number.NaN]) {
      let thrown: unknown;
      try {
        createRelayTransport({ baseUrl: relay.url, requestTimeoutMs: bad });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(TaskError);
      expect((thrown as TaskError).code).toBe("INVALID_CONFIGURATION");
      let fromSession: unknown;
      try {
        createVolatileTaskSession({ url: relay.url, callerSession: "bad-deadline", requestTimeoutMs: bad });
      } catch (error) {
        fromSession = error;
      }
      expect((fromSession as TaskError).code).toBe("INVALID_CONFIGURATION");
    }
    for (const good of [minRequestDeadlineMs, maxRequestDeadlineMs]) {
      const transport = createRelayTransport({ baseUrl: relay.url, requestTimeoutMs: good });
      expect(transport.requestTimeoutMs).toBe(good);
      transport.close();
    }
    const defaulted = createRelayTransport({ baseUrl: relay.url });
    expect(defaulted.requestTimeoutMs).toBe(defaultRequestDeadlineMs);
    defaulted.close();
    // The largest deadline still works against the relay.
    const session = open(relay.url, { requestTimeoutMs: maxRequestDeadlineMs });
    await session.connect();
    expect((await session.receive("0")).deliveries).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Error mapping
// ---------------------------------------------------------------------------------------------

describe("error mapping", () => {
  test("Wolfpack's generic 429 (no profile) is retryable RELAY_CAPACITY with retryAfterMs, and the binding stays", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    const bound = await session.connect();

    proxy.push({ operation: "send", kind: "status-429" });
    const plain = await failure(session.send(envelopeTo(session)));
    expectFailure(plain, "RELAY_CAPACITY", "send", true);
    expect(plain.details.retryAfterMs).toBeUndefined();

    proxy.push({ operation: "send", kind: "status-429", retryAfter: "2" }); // seconds
    const withHeader = await failure(session.send(envelopeTo(session)));
    expectFailure(withHeader, "RELAY_CAPACITY", "send", true);
    expect(withHeader.details.retryAfterMs).toBe(2 * msPerSecond);

    proxy.push({
      operation: "send",
      kind: "status-429",
      body: {
        ok: false,
        profile: RELAY_PROFILE,
        error: { code: "RELAY_CAPACITY", message: "slow down", retryable: true, retryAfterMs: 750 },
      },
    });
    const withBody = await failure(session.send(envelopeTo(session)));
    expectFailure(withBody, "RELAY_CAPACITY", "send", true);
    expect(withBody.details.retryAfterMs).toBe(750);

    expect(session.status()).toBe("ready");
    expect(session.binding()).toEqual(bound);
    expect((await session.send(envelopeTo(session))).duplicate).toBe(false);
  });

  test("typed RELAY_CAPACITY with and without epoch is retryable, keeps retryAfterMs, and does not retire", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    proxy.push({ operation: "receive", kind: "capacity", epoch: relay.epoch, retryAfterMs: 1_234 });
    const withEpoch = await failure(session.receive("0"));
    expectFailure(withEpoch, "RELAY_CAPACITY", "receive", true);
    expect(withEpoch.details.retryAfterMs).toBe(1_234);
    proxy.push({ operation: "receive", kind: "capacity" });
    const epochless = await failure(session.receive("0"));
    expectFailure(epochless, "RELAY_CAPACITY", "receive", true);
    expect(epochless.details.retryAfterMs).toBeUndefined();
    expect(session.status()).toBe("ready");
  });

  test("401 is non-retryable RELAY_AUTH_REQUIRED and not a reset", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    const bound = await session.connect();
    let retired = 0;
    session.onRetire(() => {
      retired += 1;
    });
    proxy.push({
      operation: "receive",
      kind: "reply",
      status: 401,
      body: { error: "unauthorized" },
      headers: { "www-authenticate": 'Bearer realm="wolfpack"' },
    });
    const wolfpackStyle = await failure(session.receive("0"));
    expectFailure(wolfpackStyle, "RELAY_AUTH_REQUIRED", "receive", false);
    proxy.push({ operation: "receive", kind: "reply", status: 401, body: relayError("RELAY_AUTH_REQUIRED", relay.epoch) });
    const typed = await failure(session.receive("0"));
    expectFailure(typed, "RELAY_AUTH_REQUIRED", "receive", false);
    expect(session.status()).toBe("ready");
    expect(retired).toBe(0);
    expect(session.binding()).toEqual(bound);
    expect((await session.receive("0")).deliveries).toEqual([]);
  });

  test("a dropped reply is retryable RELAY_UNAVAILABLE with mayHaveBeenDelivered, and the send took effect", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    proxy.push({ operation: "send", kind: "drop-reply" });
    const envelope = envelopeTo(session);
    const error = await failure(session.send(envelope));
    expectFailure(error, "RELAY_UNAVAILABLE", "send", true);
    expect(error.details.mayHaveBeenDelivered).toBe(true);
    expect(proxy.stats().operations.send).toEqual({ seen: 1, forwarded: 1, faulted: 1 });
    const page = await session.receive("0");
    expect(page.deliveries.map((delivery) => delivery.envelopeId)).toEqual([envelope.envelopeId]);
    // The retry with identical bytes is a duplicate acceptance, not a conflict.
    expect((await session.send(envelope)).duplicate).toBe(true);
    expect(session.status()).toBe("ready");
  });

  test("connection refused is retryable RELAY_UNAVAILABLE naming its operation", async () => {
    const url = `http://127.0.0.1:${freePort()}`;
    const transport = createRelayTransport({ baseUrl: url, requestTimeoutMs: SHORT_DEADLINE_MS * 3 });
    const posted = await failure(transport.post("send", JSON.stringify({ operation: "send" })));
    expectFailure(posted, "RELAY_UNAVAILABLE", "send", true);
    expect(posted.details.mayHaveBeenDelivered).toBe(true);
    transport.close();
    const session = open(url, { requestTimeoutMs: SHORT_DEADLINE_MS * 3 });
    const connect = await failure(session.connect());
    expect(connect.code).toBe("RELAY_UNAVAILABLE");
    expect(connect.retryable).toBe(true);
    expect(typeof connect.details.operation).toBe("string");
    expect(session.status()).toBe("unbound");
  });

  test("a reply with another profile is non-retryable RELAY_PROFILE_REQUIRED and does not retire", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    proxy.push({ operation: "receive", kind: "wrong-profile" });
    const error = await failure(session.receive("0"));
    expectFailure(error, "RELAY_PROFILE_REQUIRED", "receive", false);
    proxy.push({ operation: "receive", kind: "reply", status: 409, body: { ok: false, error: { code: "RELAY_PROFILE_REQUIRED" } } });
    const missingProfile = await failure(session.receive("0"));
    expectFailure(missingProfile, "RELAY_PROFILE_REQUIRED", "receive", false);
    expect(session.status()).toBe("ready");
    expect((await session.receive("0")).deliveries).toEqual([]);
  });

  test("malformed JSON and oversized replies (with and without Content-Length) are retryable INVALID_RESPONSE", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    proxy.push({ operation: "receive", kind: "malformed-json" });
    expectFailure(await failure(session.receive("0")), "INVALID_RESPONSE", "receive", true);
    // A gateway in front of the relay failing (5xx without a relay body, JSON or not) is transient.
    const gateway: FaultRule[] = [
      { operation: "receive", kind: "malformed-json", text: "<html>bad gateway</html>", status: 502 },
      { operation: "receive", kind: "reply", status: 502, body: { error: "bad gateway" } },
    ];
    for (const rule of gateway) {
      proxy.push(rule);
      const error = await failure(session.receive("0"));
      expectFailure(error, "RELAY_UNAVAILABLE", "receive", true);
      expect(error.details.mayHaveBeenDelivered).toBe(true);
    }
    // An otherwise valid page padded past the cap, declared or streamed.
    for (const chunked of [false, true]) {
      proxy.push({ operation: "receive", kind: "oversized", chunked, bytes: maxResponseBodyBytes + 1 });
      const error = await failure(session.receive("0"));
      expectFailure(error, "INVALID_RESPONSE", "receive", true);
      expect(error.details.problem).toBe("response body too large");
    }
    // Exactly maxResponseBodyBytes is still read.
    for (const chunked of [false, true]) {
      proxy.push({ operation: "receive", kind: "oversized", chunked, bytes: maxResponseBodyBytes });
      expect((await session.receive("0")).deliveries).toEqual([]);
    }
    expect(proxy.stats().operations.receive!.faulted).toBe(7);
    expect(session.status()).toBe("ready");
    expect(session.transport.usage()).toEqual({ ordinary: 0, reserved: 0, waiting: 0 });
  });

  test("a request body over maxRequestBodyBytes is PAYLOAD_TOO_LARGE before anything is sent", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    const envelope = envelopeTo(session, undefined, { text: "x".repeat(maxRequestBodyBytes) });
    const error = await failure(session.send(envelope));
    expectFailure(error, "PAYLOAD_TOO_LARGE", "send", false);
    expect(error.details.maxBytes).toBe(maxRequestBodyBytes);
    await Bun.sleep(LEAK_WINDOW_MS);
    expect(seen(proxy, "send")).toBe(0);
    expect(session.status()).toBe("ready");
    expect(session.transport.usage()).toEqual({ ordinary: 0, reserved: 0, waiting: 0 });
  });

  test("messages come from the error registry, never from server text", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    proxy.push({ operation: "receive", kind: "capacity", epoch: relay.epoch, message: "xyzzy-server-words" });
    const capacity = await failure(session.receive("0"));
    expectFailure(capacity, "RELAY_CAPACITY", "receive", true);
    proxy.push({ operation: "resolve", kind: "reply", status: 404, body: relayError("TARGET_NOT_REGISTERED", relay.epoch) });
    const notRegistered = await failure(session.resolve({ relay: RELAY_ID, id: crypto.randomUUID() }));
    expectFailure(notRegistered, "TARGET_NOT_REGISTERED", "resolve", false);
    proxy.push({ operation: "receive", kind: "reply", status: 400, body: relayError("SOME_FUTURE_CODE", relay.epoch) });
    const unknown = await failure(session.receive("0"));
    expect(unknown.code).toBe("SOME_FUTURE_CODE");
    expect(unknown.details.operation).toBe("receive");
    for (const error of [capacity, notRegistered, unknown]) {
      expect(error.message).not.toContain("xyzzy");
      expect(JSON.stringify(error.toJSON())).not.toContain("xyzzy");
    }
    expect(session.status()).toBe("ready");
  });
});

// ---------------------------------------------------------------------------------------------
// Binding lifecycle
// ---------------------------------------------------------------------------------------------

describe("binding", () => {
  test("the lease is renewed before an operation inside the renewal window, keeping the endpoint id", async () => {
    const proxy = newProxy();
    let skew = 0;
    const requestTimeoutMs = 1_000;
    const leaseMs = leaseFor(requestTimeoutMs);
    const session = open(proxy.url, { leaseMs, requestTimeoutMs, now: () => Date.now() + skew });
    const first = await session.connect();
    expect(first.leaseDeadline).toBeLessThanOrEqual(Date.now() + leaseMs);
    await session.receive("0");
    expect(seen(proxy, "connect")).toBe(1);

    // Renewal starts when less than requestTimeoutMs + leaseRenewMarginMs remains.
    skew = RENEW_AFTER_MS - 2_000;
    await session.receive("0");
    expect(seen(proxy, "connect")).toBe(1);
    skew = RENEW_AFTER_MS + 500;
    await session.receive("0");
    expect(seen(proxy, "connect")).toBe(2);
    const connects = proxy.requests().filter((request) => request.operation === "connect");
    const [initial, renewal] = connects.map((request) => request.body as Record<string, unknown>);
    expect(initial!.epoch).toBeUndefined();
    expect(renewal!.epoch).toBe(relay.epoch);
    expect(renewal!.generation).toBe(initial!.generation);
    expect(renewal!.leaseMs).toBe(leaseMs);
    // binding-secret-v1: the renewal carries the secret the session chose, as every connect of it does.
    expect(typeof initial!.bindingSecret).toBe("string");
    expect(renewal!.bindingSecret).toBe(initial!.bindingSecret);
    // The renewal precedes the operation that triggered it.
    expect(proxy.requests().at(-1)!.operation).toBe("receive");
    expect(proxy.requests().at(-2)!.operation).toBe("connect");
    const renewed = session.binding()!;
    expect(renewed.endpoint).toEqual(first.endpoint);
    expect(renewed.epoch).toBe(first.epoch);
    expect(renewed.leaseDeadline).toBeGreaterThan(first.leaseDeadline);
    expect(session.status()).toBe("ready");
  });

  test("the binding secret comes from no reply: a connect reply naming one changes nothing; a lost renewal reply is retried with the same secret", async () => {
    const proxy = newProxy();
    let skew = 0;
    const requestTimeoutMs = 1_000;
    const session = open(proxy.url, { leaseMs: leaseFor(requestTimeoutMs), requestTimeoutMs, now: () => Date.now() + skew });
    const planted = "p".repeat(64);
    proxy.push({
      operation: "connect",
      kind: "rewrite",
      rewrite: (body) => ({ ...body, value: { ...body.value, bindingSecret: planted } }),
    });
    const first = await session.connect();
    await session.receive("0");
    const sent = () =>
      proxy
        .requests()
        .filter((request) => request.method === "POST")
        .map((request) => request.body as Record<string, unknown>);
    const own = sent()[0]!.bindingSecret;
    expect(sent().map((body) => body.bindingSecret)).toEqual([own, own]);
    expect(own).not.toBe(planted);

    // Inside the renewal window the renewal's reply is lost: the operation fails retryable, and
    // the next one renews again, same generation and secret, and the relay lets it through.
    skew = RENEW_AFTER_MS + 500;
    proxy.push({ operation: "connect", kind: "drop-reply" });
    expectFailure(await failure(session.receive("0")), "RELAY_UNAVAILABLE", "connect", true);
    expect(session.status()).toBe("ready");
    await session.receive("0");
    const connects = sent().filter((body) => body.operation === "connect");
    expect(connects.length).toBe(3);
    expect(new Set(connects.map((body) => body.generation)).size).toBe(1);
    expect(connects.map((body) => body.bindingSecret)).toEqual([own, own, own]);
    expect(session.binding()!.endpoint).toEqual(first.endpoint);
    expect(sent().at(-1)!.bindingSecret).toBe(own);
  });

  test("an epoch change in a success reply retires the binding: RELAY_RESET, in-flight calls aborted, later calls need a rebind without touching the network", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    const bound = await session.connect();
    const retirements: TaskError[] = [];
    session.onRetire((error) => retirements.push(error));

    proxy.push({ operation: "health", kind: "hold" });
    const inFlight = failure(session.health());
    await proxy.waitFor((stats) => stats.held >= 1);
    const otherEpoch = crypto.randomUUID();
    proxy.push({
      operation: "receive",
      kind: "rewrite",
      rewrite: (body) => ({ ...body, epoch: otherEpoch }),
    });
    const error = await failure(session.receive("0"));
    expectFailure(error, "RELAY_RESET", "receive", false);
    expect(error.details.epoch).toBe(otherEpoch);
    expect(error.details.priorEndpoint).toEqual(bound.endpoint);
    expect(session.status()).toBe("reset");
    const aborted = await inFlight;
    expectFailure(aborted, "RELAY_RESET", "health", false);
    expect(retirements.length).toBe(1);
    expect(retirements[0]!.code).toBe("RELAY_RESET");

    const before = proxy.stats().total.seen;
    const later = await Promise.all([
      failure(session.receive("0")),
      failure(session.send(envelopeTo(session))),
      failure(session.resolve(bound.endpoint)),
      failure(session.acknowledge("some-envelope")),
      failure(session.watch("0", 0)),
      failure(session.health()),
      failure(session.disconnect()),
      failure(session.connect()),
    ]);
    for (const failed of later) {
      expect(failed.code).toBe("RELAY_REBIND_REQUIRED");
      expect(failed.retryable).toBe(false);
      expect(typeof failed.details.operation).toBe("string");
    }
    await Bun.sleep(LEAK_WINDOW_MS);
    expect(proxy.stats().total.seen).toBe(before);
    expect(retirements.length).toBe(1);

    // rebind(): a connect without epoch and with a new generation binds a fresh endpoint.
    const fresh = await session.rebind();
    const [firstConnect, rebindConnect] = proxy
      .requests()
      .filter((request) => request.operation === "connect")
      .map((request) => request.body as Record<string, unknown>);
    expect(rebindConnect!.epoch).toBeUndefined();
    expect(rebindConnect!.generation).not.toBe(firstConnect!.generation);
    expect(fresh.endpoint.id).not.toBe(bound.endpoint.id);
    expect(fresh.epoch).toBe(relay.epoch);
    expect(session.status()).toBe("ready");
    expect((await session.receive("0")).deliveries).toEqual([]);
    expect(retirements.length).toBe(1);
  });

  test("an epoch change in an error reply or in a renewal reply retires the binding", async () => {
    const proxy = newProxy();
    const first = open(proxy.url);
    await first.connect();
    proxy.push({ operation: "receive", kind: "reply", status: 400, body: relayError("INVALID_CURSOR", crypto.randomUUID()) });
    const fromError = await failure(first.receive("0"));
    expectFailure(fromError, "RELAY_RESET", "receive", false);
    expect(first.status()).toBe("reset");

    let skew = 0;
    const second = open(proxy.url, { leaseMs: leaseFor(1_000), requestTimeoutMs: 1_000, now: () => Date.now() + skew });
    await second.connect();
    skew = RENEW_AFTER_MS + 1_000;
    proxy.push({ operation: "connect", kind: "rewrite", rewrite: (body) => ({ ...body, epoch: crypto.randomUUID() }) });
    const fromRenewal = await failure(second.receive("0"));
    expect(fromRenewal.code).toBe("RELAY_RESET");
    expect(second.status()).toBe("reset");
    expect(seen(proxy, "receive")).toBe(1);

    // A renewal that names another endpoint retires the binding as well.
    let thirdSkew = 0;
    const third = open(proxy.url, { leaseMs: leaseFor(1_000), requestTimeoutMs: 1_000, now: () => Date.now() + thirdSkew });
    await third.connect();
    thirdSkew = RENEW_AFTER_MS + 1_000;
    proxy.push({
      operation: "connect",
      kind: "rewrite",
      rewrite: (body) => ({ ...body, value: { ...body.value, endpoint: { relay: RELAY_ID, id: crypto.randomUUID() } } }),
    });
    const rotated = await failure(third.receive("0"));
    expect(rotated.code).toBe("RELAY_RESET");
    expect(rotated.details.renewedEndpoint).toBeDefined();
    expect(third.status()).toBe("reset");
    expect(seen(proxy, "receive")).toBe(1);
  });

  test("each reset-set code retires the binding", async () => {
    // BINDING_SECRET_REQUIRED comes as a typed 401: not mistaken for the JWT's RELAY_AUTH_REQUIRED.
    const codes = [
      "RELAY_RESET",
      "REGISTRATION_EXPIRED",
      "SOURCE_MISMATCH",
      "CALLER_NOT_FOUND",
      "CALLER_DEAD",
      "BINDING_SECRET_REQUIRED",
      "BINDING_SECRET_INVALID",
    ] as const;
    const proxy = newProxy();
    for (const code of codes) {
      const session = open(proxy.url);
      await session.connect();
      let retired = 0;
      session.onRetire(() => {
        retired += 1;
      });
      proxy.push({
        operation: "send",
        kind: "reply",
        status: httpStatusOf(code),
        body: relayError(code, relay.epoch, { mayHaveBeenDelivered: true }),
      });
      const error = await failure(session.send(envelopeTo(session)));
      expect({ code: error.code, cause: error.details.cause, operation: error.details.operation }).toEqual({
        code: "RELAY_RESET",
        cause: code,
        operation: "send",
      });
      expect(error.retryable).toBe(false);
      expect(session.status()).toBe("reset");
      expect(retired).toBe(1);
      expect((await failure(session.receive("0"))).code).toBe("RELAY_REBIND_REQUIRED");
    }
  });

  test("transient, auth, capacity, abort, profile and malformed failures never retire the binding", async () => {
    const proxy = newProxy();
    const session = open(proxy.url, { requestTimeoutMs: SHORT_DEADLINE_MS });
    const bound = await session.connect();
    let retired = 0;
    session.onRetire(() => {
      retired += 1;
    });
    const cases: Array<[FaultRule, string]> = [
      [
        {
          operation: "receive",
          kind: "reply",
          status: 503,
          body: relayError("RELAY_UNAVAILABLE", relay.epoch, { retryable: true, mayHaveBeenDelivered: true }),
        },
        "RELAY_UNAVAILABLE",
      ],
      [{ operation: "receive", kind: "reply", status: 503, body: relayError("RELAY_UNAVAILABLE", undefined) }, "RELAY_UNAVAILABLE"],
      [{ operation: "receive", kind: "drop-reply" }, "RELAY_UNAVAILABLE"],
      [{ operation: "receive", kind: "hang" }, "RELAY_TIMEOUT"],
      [{ operation: "receive", kind: "reply", status: 401, body: { error: "unauthorized" } }, "RELAY_AUTH_REQUIRED"],
      [{ operation: "receive", kind: "status-429" }, "RELAY_CAPACITY"],
      [{ operation: "receive", kind: "capacity", epoch: relay.epoch }, "RELAY_CAPACITY"],
      [{ operation: "receive", kind: "wrong-profile" }, "RELAY_PROFILE_REQUIRED"],
      [
        { operation: "receive", kind: "reply", status: 409, body: relayError("RELAY_PROFILE_REQUIRED", relay.epoch) },
        "RELAY_PROFILE_REQUIRED",
      ],
      [{ operation: "receive", kind: "malformed-json" }, "INVALID_RESPONSE"],
      [{ operation: "receive", kind: "oversized", chunked: true }, "INVALID_RESPONSE"],
      [{ operation: "receive", kind: "reply", status: 400, body: relayError("INVALID_REQUEST", relay.epoch) }, "INVALID_REQUEST"],
      [{ operation: "receive", kind: "reply", status: 400, body: relayError("INVALID_CURSOR", relay.epoch) }, "INVALID_CURSOR"],
    ];
    for (const [rule, code] of cases) {
      proxy.push(rule);
      const error = await failure(session.receive("0"));
      expect({ rule: rule.kind, code: error.code, status: session.status() }).toEqual({ rule: rule.kind, code, status: "ready" });
    }
    proxy.push({ operation: "receive", kind: "hold" });
    const controller = new AbortController();
    const aborted = failure(session.receive("0", { signal: controller.signal }));
    await proxy.waitFor((stats) => stats.held >= 1);
    controller.abort();
    expect((await aborted).code).toBe("ABORTED");

    expect(session.status()).toBe("ready");
    expect(retired).toBe(0);
    expect((await session.receive("0")).deliveries).toEqual([]);
    expect(session.binding()!.endpoint).toEqual(bound.endpoint);
    expect(seen(proxy, "connect")).toBe(1);
  });

  test("a real relay restart gives RELAY_RESET, then rebind() binds a fresh endpoint on the new epoch", async () => {
    const first = await startRelayProcess();
    relays.push(first);
    const session = open(first.url, { requestTimeoutMs: 2_000 });
    const before = await session.connect();
    const envelope = envelopeTo(session);
    await session.send(envelope);
    await first.stop();
    const second = await startRelayProcess({ port: first.port });
    relays.push(second);
    expect(second.epoch).not.toBe(first.epoch);

    const reset = await failure(session.receive("0"));
    expectFailure(reset, "RELAY_RESET", "receive", false);
    expect(reset.details.mayHaveBeenDelivered).toBe(true);
    expect(session.status()).toBe("reset");
    expect((await failure(session.send(envelope))).code).toBe("RELAY_REBIND_REQUIRED");

    const after = await session.rebind();
    expect(after.epoch).toBe(second.epoch);
    expect(after.endpoint.id).not.toBe(before.endpoint.id);
    expect(after.generation).not.toBe(before.generation);
    expect(session.status()).toBe("ready");
    // The accepted mail of the old lifetime is gone (memory-only relay): no replay.
    expect((await session.receive("0")).deliveries).toEqual([]);
  });

  test("a late reply of a retired binding cannot overwrite or retire its successor", async () => {
    const proxy = newProxy();
    const session = open(proxy.url, { fetch: fetchIgnoringAbort });
    const retired = await session.connect();
    const retirements: TaskError[] = [];
    session.onRetire((error) => retirements.push(error));

    // A receive of the first binding is held at the proxy...
    proxy.push({ operation: "receive", kind: "hold" });
    const late = failure(session.receive("0"));
    await proxy.waitFor((stats) => stats.held >= 1);
    // ...the binding is retired by another call, and a successor is bound.
    proxy.push({
      operation: "health",
      kind: "reply",
      status: 409,
      body: relayError("RELAY_RESET", relay.epoch, { mayHaveBeenDelivered: true }),
    });
    expect((await failure(session.health())).code).toBe("RELAY_RESET");
    expect((await late).code).toBe("RELAY_RESET");
    const successor = await session.rebind();
    expect(successor.endpoint.id).not.toBe(retired.endpoint.id);

    // Now the old receive reaches the relay, which answers REGISTRATION_EXPIRED (a reset-set code)
    // for the superseded endpoint; the reply reaches the client's fetch after all.
    proxy.release();
    await proxy.waitFor((stats) => stats.operations.receive!.forwarded === 1 && stats.inFlight === 0);
    await Bun.sleep(LEAK_WINDOW_MS);
    expect(session.status()).toBe("ready");
    expect(session.binding()).toEqual(successor);
    expect(retirements.length).toBe(1);
    const envelope = envelopeTo(session);
    await session.send(envelope);
    expect((await session.receive("0")).deliveries.map((delivery) => delivery.envelopeId)).toEqual([envelope.envelopeId]);
  });

  test("a competing controller's binding retires the old handle, and the old handle cannot touch the successor", async () => {
    // Unprotected registrations (a relay without binding-secret-v1): a second process may take the name.
    const proxy = newProxy();
    proxy.push({ operation: "profile", kind: "rewrite", times: Infinity, rewrite: (body) => ({ ...body, features: [] }) });
    const name = sessionName("shared");
    const old = open(proxy.url, { callerSession: name });
    const oldBinding = await old.connect();
    const successor = open(proxy.url, { callerSession: name });
    const newBinding = await successor.connect();
    expect(newBinding.endpoint.id).not.toBe(oldBinding.endpoint.id);

    const error = await failure(old.receive("0"));
    expect({ code: error.code, cause: error.details.cause }).toEqual({ code: "RELAY_RESET", cause: "REGISTRATION_EXPIRED" });
    const before = proxy.stats().total.seen;
    expect((await failure(old.send(envelopeTo(old)))).code).toBe("RELAY_REBIND_REQUIRED");
    expect((await failure(old.disconnect())).code).toBe("RELAY_REBIND_REQUIRED");
    expect(proxy.stats().total.seen).toBe(before);
    expect(successor.status()).toBe("ready");
    expect((await successor.receive("0")).deliveries).toEqual([]);
  });

  test("concurrent explicit connect() calls: the second gets retryable RELAY_BUSY; rebind during a connect too", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    proxy.push({ operation: "connect", kind: "delay", ms: 50 });
    const first = session.connect();
    const second = await failure(session.connect());
    expectFailure(second, "RELAY_BUSY", "connect", true);
    const rebinding = await failure(session.rebind());
    expectFailure(rebinding, "RELAY_BUSY", "connect", true);
    const bound = await first;
    expect(session.binding()).toEqual(bound);
    expect(seen(proxy, "connect")).toBe(1);
    // An operation issued during a connect waits for it instead of connecting again.
    proxy.push({ operation: "connect", kind: "delay", ms: 50 });
    const renewal = session.connect();
    const page = await session.receive("0");
    expect(page.deliveries).toEqual([]);
    await renewal;
    expect(seen(proxy, "connect")).toBe(2);
  });

  test("close() during a connect fails it with RELAY_CLOSED", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    proxy.push({ operation: "connect", kind: "hold" });
    const connecting = failure(session.connect());
    await proxy.waitFor((stats) => stats.held >= 1);
    session.close();
    expectFailure(await connecting, "RELAY_CLOSED", "connect", false);
    expect(session.binding()).toBeUndefined();
    expect(session.status()).toBe("closed");
  });

  test("the session-status route reports the binding; an unknown session is CALLER_NOT_FOUND", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    const bound = await session.connect();
    const status = await session.transport.sessionStatus(session.callerSession);
    expect(status.session).toBe(session.callerSession);
    expect(status.taskEndpoint).toEqual(bound.endpoint);
    expect((status.taskTransport as Record<string, unknown>).epoch).toBe(relay.epoch);
    expect(seen(proxy, "session-status")).toBe(1);
    const unknown = await failure(session.transport.sessionStatus(sessionName("nobody")));
    expectFailure(unknown, "CALLER_NOT_FOUND", "session-status", false);
    // A transport-level lookup never retires the session's binding.
    expect(session.status()).toBe("ready");
  });

  test("after close() every call fails RELAY_CLOSED, in-flight calls included, and nothing is sent", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    proxy.push({ operation: "receive", kind: "hold" });
    const inFlight = failure(session.receive("0"));
    await proxy.waitFor((stats) => stats.held >= 1);
    session.close();
    expectFailure(await inFlight, "RELAY_CLOSED", "receive", false);
    expect(session.status()).toBe("closed");
    const before = proxy.stats().total.seen;
    const later = await Promise.all([
      failure(session.receive("0")),
      failure(session.send(envelopeTo(session))),
      failure(session.connect()),
      failure(session.rebind()),
      failure(session.health()),
      failure(session.transport.profile()),
    ]);
    for (const error of later) {
      expect(error.code).toBe("RELAY_CLOSED");
      expect(error.retryable).toBe(false);
      expect(typeof error.details.operation).toBe("string");
    }
    await Bun.sleep(LEAK_WINDOW_MS);
    expect(proxy.stats().total.seen).toBe(before);
  });
});

// ---------------------------------------------------------------------------------------------
// Reply validation
// ---------------------------------------------------------------------------------------------

describe("reply validation", () => {
  type Page = { deliveries: Array<{ cursor: string; envelope: Record<string, unknown> }>; nextCursor: string; hasMore: boolean };

  test("a bad receive page is INVALID_INBOX and does not retire the binding", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    const mail = range(3).map(() => envelopeTo(session));
    for (const envelope of mail) await session.send(envelope);
    const good = await session.receive("0");
    expect(good.deliveries.map((delivery) => delivery.envelopeId)).toEqual(mail.map((envelope) => envelope.envelopeId));

    const corruptions: Array<[string, (page: Page) => void, number?]> = [
      [
        "cursors out of order",
        (page) => {
          page.deliveries = [page.deliveries[1]!, page.deliveries[0]!, page.deliveries[2]!];
        },
      ],
      [
        "duplicate envelopeId",
        (page) => {
          page.deliveries[1]!.envelope = { ...page.deliveries[1]!.envelope, envelopeId: page.deliveries[0]!.envelope.envelopeId };
        },
      ],
      [
        "nextCursor is not the last cursor",
        (page) => {
          page.nextCursor = page.deliveries[0]!.cursor;
        },
      ],
      [
        "nextCursor beyond the last cursor",
        (page) => {
          page.nextCursor = String(BigInt(page.nextCursor) + 1n);
        },
      ],
      [
        "more items than the limit",
        (page) => {
          const last = page.deliveries.at(-1)!;
          page.deliveries.push({
            cursor: String(BigInt(last.cursor) + 1n),
            envelope: { ...last.envelope, envelopeId: crypto.randomUUID() },
          });
          page.nextCursor = page.deliveries.at(-1)!.cursor;
        },
        2,
      ],
      [
        "an envelope addressed to another endpoint",
        (page) => {
          page.deliveries[2]!.envelope = { ...page.deliveries[2]!.envelope, target: { relay: RELAY_ID, id: crypto.randomUUID() } };
        },
      ],
      [
        "a cursor not after the requested cursor",
        (page) => {
          page.deliveries[0]!.cursor = "0";
        },
      ],
      [
        "hasMore on an empty page",
        (page) => {
          page.deliveries = [];
          page.nextCursor = "0";
          page.hasMore = true;
        },
      ],
    ];
    for (const [label, corrupt, limit] of corruptions) {
      proxy.push({
        operation: "receive",
        kind: "rewrite",
        rewrite: (body) => {
          corrupt(body.value as Page);
          return body;
        },
      });
      const error = await failure(session.receive("0", limit === undefined ? {} : { limit }));
      expect({ label, code: error.code, operation: error.details.operation }).toEqual({
        label,
        code: "INVALID_INBOX",
        operation: "receive",
      });
      expect(error.retryable).toBe(false);
    }
    expect(session.status()).toBe("ready");
    expect((await session.receive("0")).deliveries.length).toBe(mail.length);
  });

  test("a send reply for another envelope or with forwarding:pending is INVALID_ACCEPTANCE", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    const rewrites: Array<(value: Record<string, unknown>) => void> = [
      (value) => {
        value.envelopeId = crypto.randomUUID();
      },
      (value) => {
        value.forwarding = "pending";
      },
      (value) => {
        delete value.acceptanceId;
      },
      (value) => {
        value.kind = "queued";
      },
    ];
    for (const rewrite of rewrites) {
      proxy.push({
        operation: "send",
        kind: "rewrite",
        rewrite: (body) => {
          rewrite(body.value);
          return body;
        },
      });
      const error = await failure(session.send(envelopeTo(session)));
      expectFailure(error, "INVALID_ACCEPTANCE", "send", true);
    }
    // Neither a reply without profile nor an oversized reply counts as an acceptance.
    proxy.push({
      operation: "send",
      kind: "rewrite",
      rewrite: (body) => {
        delete body.profile;
        return body;
      },
    });
    expectFailure(await failure(session.send(envelopeTo(session))), "RELAY_PROFILE_REQUIRED", "send", false);
    proxy.push({ operation: "send", kind: "oversized" });
    expectFailure(await failure(session.send(envelopeTo(session))), "INVALID_RESPONSE", "send", true);
    expect(session.status()).toBe("ready");
    const accepted = await session.send(envelopeTo(session));
    expect(accepted.forwarding).toBe("local");
  });

  test("a resolve reply naming another endpoint is INVALID_TARGET", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    const bound = await session.connect();
    expect(await session.resolve(bound.endpoint)).toEqual({ endpoint: bound.endpoint });
    proxy.push({
      operation: "resolve",
      kind: "rewrite",
      rewrite: (body) => ({ ...body, value: { ...body.value, endpoint: { relay: RELAY_ID, id: crypto.randomUUID() } } }),
    });
    const error = await failure(session.resolve(bound.endpoint));
    expectFailure(error, "INVALID_TARGET", "resolve", false);
    // A successorOf claim is not accepted unless the caller asked to follow successors.
    proxy.push({
      operation: "resolve",
      kind: "rewrite",
      rewrite: (body) => ({
        ...body,
        value: { ...body.value, endpoint: { relay: RELAY_ID, id: crypto.randomUUID() }, successorOf: bound.endpoint },
      }),
    });
    expectFailure(await failure(session.resolve(bound.endpoint)), "INVALID_TARGET", "resolve", false);
    expect(session.status()).toBe("ready");
  });

  test("an epochless error is accepted only for EPOCHLESS_CODES; any other code is retryable INVALID_RESPONSE", async () => {
    const proxy = newProxy();
    const session = open(proxy.url);
    await session.connect();
    for (const code of EPOCHLESS_CODES) {
      proxy.push({ operation: "receive", kind: "reply", status: 503, body: relayError(code, undefined) });
      const error = await failure(session.receive("0"));
      expect({ code: error.code, operation: error.details.operation }).toEqual({ code, operation: "receive" });
    }
    for (const code of ["TARGET_NOT_REGISTERED", "RELAY_RESET", "REGISTRATION_EXPIRED", "INVALID_CURSOR"]) {
      expect(EPOCHLESS_CODES.has(code)).toBe(false);
      proxy.push({ operation: "receive", kind: "reply", status: 409, body: relayError(code, undefined) });
      const error = await failure(session.receive("0"));
      expectFailure(error, "INVALID_RESPONSE", "receive", true);
    }
    // A success without an epoch, or with a non-UUID epoch, is malformed too.
    proxy.push({ operation: "receive", kind: "rewrite", rewrite: (body) => ({ ...body, epoch: undefined }) });
    expectFailure(await failure(session.receive("0")), "INVALID_RESPONSE", "receive", true);
    proxy.push({ operation: "receive", kind: "rewrite", rewrite: (body) => ({ ...body, epoch: "not-a-uuid" }) });
    expectFailure(await failure(session.receive("0")), "INVALID_RESPONSE", "receive", true);
    expect(session.status()).toBe("ready");
  });
});

// ---------------------------------------------------------------------------------------------
// Advertised features (docs/wire.md, our additions)
// ---------------------------------------------------------------------------------------------

describe("features", () => {
  test("watch and resolve({followSuccessor}) work against our relay, which advertises them", async () => {
    const watcher = open(relay.url);
    await watcher.connect();
    expect([...watcher.features()].sort()).toEqual(
      [
        FEATURE_ACK_BATCH,
        FEATURE_ACK_CARRY,
        FEATURE_BINDING_SECRET,
        FEATURE_MAIL_EXPIRY,
        FEATURE_QUOTAS,
        FEATURE_SEND_BATCH,
        FEATURE_STRICT_ANSWERS,
        FEATURE_SUCCESSOR,
        FEATURE_WATCH,
      ].sort(),
    );
    expect(await watcher.watch("0", 0)).toEqual({ pending: false, highestCursor: "0" });
    await watcher.send(envelopeTo(watcher));
    expect(await watcher.watch("0", 0)).toEqual({ pending: true, highestCursor: "1" });

    const moving = open(relay.url);
    const retired = await moving.connect();
    const fresh = await moving.rebind();
    expect(await watcher.resolve(retired.endpoint, { followSuccessor: true })).toEqual({
      endpoint: fresh.endpoint,
      successorOf: retired.endpoint,
    });
    const plain = await failure(watcher.resolve(retired.endpoint));
    expectFailure(plain, "TARGET_NOT_REGISTERED", "resolve", false);
    expect(watcher.status()).toBe("ready");
  });

  test("acknowledgeBatch (ack-batch-v1): each id's outcome in order; an answer that names other ids is INVALID_RESPONSE", async () => {
    const receiver = open(relay.url);
    await receiver.connect();
    const first = envelopeTo(receiver);
    const second = envelopeTo(receiver);
    await receiver.send(first);
    await receiver.send(second);
    const stranger = crypto.randomUUID();
    expect(await receiver.acknowledgeBatch([first.envelopeId, stranger])).toEqual([
      { envelopeId: first.envelopeId, outcome: "acknowledged" },
      { envelopeId: stranger, outcome: "unknown" },
    ]);
    const proxy = newProxy();
    proxy.push({
      operation: "acknowledge",
      kind: "rewrite",
      rewrite: (body) => ((body.value as { results: unknown[] }).results.reverse(), body),
    });
    const viaProxy = open(proxy.url);
    await viaProxy.connect();
    await viaProxy.send(envelopeTo(viaProxy));
    const page = await viaProxy.receive("0");
    const ids = [page.deliveries[0]!.envelopeId, crypto.randomUUID()];
    expectFailure(await failure(viaProxy.acknowledgeBatch(ids)), "INVALID_RESPONSE", "acknowledge", true);
    expect((await receiver.acknowledgeBatch([second.envelopeId, first.envelopeId])).map((result) => result.outcome)).toEqual([
      "acknowledged",
      "duplicate",
    ]);
  });

  test("send (send-batch-v1): one tick's sends that share a signal leave in one request, each settling with its own outcome", async () => {
    const proxy = newProxy();
    const sender = open(proxy.url);
    await sender.connect();
    const receiver = open(relay.url);
    await receiver.connect();
    const gone = { relay: RELAY_ID, id: crypto.randomUUID() };
    const envelopes = [envelopeTo(sender, receiver.binding()!.endpoint), envelopeTo(sender, gone), envelopeTo(sender, gone)];
    const before = seen(proxy, "send");
    const settled = await Promise.all(envelopes.map((envelope) => settle(sender.send(envelope))));
    expect(seen(proxy, "send") - before).toBe(1);
    expect((settled[0] as { envelopeId: string }).envelopeId).toBe(envelopes[0]!.envelopeId);
    expectFailure(settled[1] as TaskError, "TARGET_NOT_REGISTERED", "send", false);
    // Skipped after its target's refusal: not tried, so deferred (retryable), not refused.
    expect((settled[2] as TaskError).code).toBe("TASK_DELIVERY_DEFERRED");
    expect((await receiver.receive("0")).deliveries.map((delivery) => delivery.envelopeId)).toEqual([envelopes[0]!.envelopeId]);
    // Different signals (or ticks) are different requests; a lone send is a single send.
    await Promise.all([
      sender.send(envelopeTo(sender), new AbortController().signal),
      sender.send(envelopeTo(sender), new AbortController().signal),
    ]);
    expect(seen(proxy, "send") - before).toBe(3);
  });

  test("sendBatch and acknowledgeCarrying: outcomes in order; the carried receipt is admitted before the ids are acknowledged, or they are withheld", async () => {
    const sender = open(relay.url);
    const receiver = open(relay.url);
    await Promise.all([sender.connect(), receiver.connect()]);
    const [first, second] = [envelopeTo(sender, receiver.binding()!.endpoint), envelopeTo(sender, receiver.binding()!.endpoint)];
    const sent = await sender.sendBatch([first, second]);
    expect(sent.map((outcome) => [outcome.envelopeId, outcome.outcome])).toEqual([
      [first.envelopeId, "accepted"],
      [second.envelopeId, "accepted"],
    ]);
    const ids = [first.envelopeId, second.envelopeId];
    const stray = envelopeTo(receiver, { relay: RELAY_ID, id: crypto.randomUUID() });
    const withheld = await receiver.acknowledgeCarrying(ids, [envelopeTo(receiver, sender.binding()!.endpoint), stray]);
    expect(withheld.results.map((result) => result.outcome)).toEqual(["withheld", "withheld"]);
    expect(withheld.sent.map((outcome) => outcome.outcome)).toEqual(["accepted", "refused"]);
    const receipt = envelopeTo(receiver, sender.binding()!.endpoint);
    const carried = await receiver.acknowledgeCarrying(ids, [receipt]);
    expect(carried.results.map((result) => result.outcome)).toEqual(["acknowledged", "acknowledged"]);
    expect((await receiver.receive("0")).deliveries).toEqual([]);
    expect((await sender.receive("0")).deliveries.map((delivery) => delivery.envelopeId)).toHaveLength(2);
  });

  test("against a relay without send-batch-v1, send goes one envelope a request and sendBatch fails INCOMPATIBLE_PROTOCOL without a request", async () => {
    const proxy = newProxy();
    proxy.push({
      operation: "profile",
      kind: "rewrite",
      rewrite: (body) => ({ ...body, features: [] }),
    });
    const sender = open(proxy.url);
    await sender.connect();
    const before = seen(proxy, "send");
    await Promise.all([sender.send(envelopeTo(sender)), sender.send(envelopeTo(sender))]);
    expect(seen(proxy, "send") - before).toBe(2);
    expectFailure(await failure(sender.sendBatch([envelopeTo(sender)])), "INCOMPATIBLE_PROTOCOL", "send");
    expectFailure(
      await failure(sender.acknowledgeCarrying([crypto.randomUUID()], [envelopeTo(sender)])),
      "INCOMPATIBLE_PROTOCOL",
      "acknowledge",
    );
    expect(seen(proxy, "send") - before).toBe(2);
  });

  test("a watch may wait longer than requestTimeoutMs: its wait extends the deadline", async () => {
    const session = open(relay.url, { requestTimeoutMs: SHORT_DEADLINE_MS });
    await session.connect();
    // Answered when its wait elapsed (pending: false), not cut off by the request deadline (RELAY_TIMEOUT).
    expect(await session.watch("0", SHORT_DEADLINE_MS * 2)).toEqual({ pending: false, highestCursor: "0" });
  });

  test("against a relay without features, watch and followSuccessor fail INCOMPATIBLE_PROTOCOL without sending the operation", async () => {
    const proxy = newProxy();
    proxy.push({
      operation: "profile",
      kind: "rewrite",
      rewrite: (body) => {
        delete body.features;
        return body;
      },
    });
    const session = open(proxy.url);
    const bound = await session.connect();
    expect(session.features().size).toBe(0);
    expectFailure(await failure(session.watch("0", 0)), "INCOMPATIBLE_PROTOCOL", "watch", false);
    expectFailure(await failure(session.resolve(bound.endpoint, { followSuccessor: true })), "INCOMPATIBLE_PROTOCOL", "resolve", false);
    expectFailure(
      await failure(session.acknowledgeBatch([crypto.randomUUID(), crypto.randomUUID()])),
      "INCOMPATIBLE_PROTOCOL",
      "acknowledge",
      false,
    );
    await Bun.sleep(LEAK_WINDOW_MS);
    expect(seen(proxy, "watch")).toBe(0);
    expect(seen(proxy, "resolve")).toBe(0);
    expect(seen(proxy, "acknowledge")).toBe(0);
    // Part A behaviour still works.
    expect(await session.resolve(bound.endpoint)).toEqual({ endpoint: bound.endpoint });
    expect(session.status()).toBe("ready");
  });
});

// ---------------------------------------------------------------------------------------------
// JWT (docs/wire.md)
// ---------------------------------------------------------------------------------------------

describe("JWT", () => {
  const secret = "s".repeat(minJwtSecretChars + 8);

  test("against a relay with WOLFPACK_JWT_SECRET the client authenticates with a fresh token per request", async () => {
    const secured = await startRelayProcess({ env: { WOLFPACK_JWT_SECRET: secret } });
    relays.push(secured);
    const proxy = newProxy(secured.url);
    const auth = authFromEnv({ WOLFPACK_JWT_SECRET: `  ${secret}  ` });
    expect(auth?.secret).toBe(secret);
    const session = open(proxy.url, { auth });
    await session.connect();
    await session.receive("0");
    await session.receive("0");
    const requests = proxy.requests();
    expect(requests.map((request) => request.operation)).toEqual(["profile", "connect", "receive", "receive"]);
    const tokens = requests.map((request) => /^Bearer (\S+)$/.exec(request.headers.authorization ?? "")?.[1]);
    for (const token of tokens) {
      expect(token).toBeDefined();
      expect(await verifyJwt(secret, token!)).toEqual({ ok: true });
    }
    expect(new Set(tokens).size).toBe(tokens.length);

    // Without a token, or with another secret, the relay refuses: RELAY_AUTH_REQUIRED.
    const anonymous = open(proxy.url);
    const refused = await failure(anonymous.connect());
    expect({ code: refused.code, retryable: refused.retryable }).toEqual({ code: "RELAY_AUTH_REQUIRED", retryable: false });
    const wrong = open(proxy.url, { auth: { secret: "w".repeat(minJwtSecretChars) } });
    expect((await failure(wrong.connect())).code).toBe("RELAY_AUTH_REQUIRED");
  });

  test("no token is attached to https or non-loopback URLs", async () => {
    const auth: RelayAuth = { secret };
    expect(await tokenFor(auth, "http://127.0.0.1:18790")).toBeString();
    expect(await tokenFor(auth, "http://localhost:18790")).toBeString();
    expect(await tokenFor(auth, "http://[::1]:18790")).toBeString();
    for (const url of [
      "https://127.0.0.1:18790",
      "https://relay.example.org",
      "http://10.0.0.7:18790",
      "http://100.64.0.1:18790",
      "http://relay.example.org",
      "not a url",
    ]) {
      expect({ url, token: await tokenFor(auth, url) }).toEqual({ url, token: undefined });
      expect(isLoopbackHttpUrl(url)).toBe(false);
    }
    expect(isLoopbackHttpUrl("http://127.0.0.1:1")).toBe(true);

    // The transport's hook does the same: an https relay gets no Authorization header.
    const captured: Array<string | null> = [];
    const capture = (async (input: string | URL | Request, init?: RequestInit) => {
      const request = new Request(input as Request, init);
      captured.push(request.headers.get("authorization"));
      return new Response(
        JSON.stringify({ ok: true, profile: RELAY_PROFILE, epoch: crypto.randomUUID(), value: { kind: "health", store: {} } }),
        {
          status: 200,
          headers: { "content-type": "application/json" },
        },
      );
    }) as unknown as typeof fetch;
    for (const baseUrl of ["https://relay.example.org", "http://127.0.0.1:1"]) {
      const transport = createRelayTransport({ baseUrl, auth, fetch: capture });
      await transport.post("health", JSON.stringify({ operation: "health" }));
      transport.close();
    }
    expect(captured[0]).toBeNull();
    expect(captured[1]).toStartWith("Bearer ");
  });

  test("a secret shorter than minJwtSecretChars is RELAY_AUTH_REQUIRED from authFromEnv", () => {
    // No relay secret either: an empty secret directory (not the person's ~/.pi, which may hold one).
    const none = { [RELAY_SECRET_DIR_VARIABLE]: mkdtempSync(join(tmpdir(), "pi-tasks-no-relay-secret-")) };
    let thrown: unknown;
    try {
      authFromEnv({ ...none, WOLFPACK_JWT_SECRET: "k".repeat(minJwtSecretChars - 1) });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TaskError);
    expect((thrown as TaskError).code).toBe("RELAY_AUTH_REQUIRED");
    expect((thrown as TaskError).retryable).toBe(false);
    expect(authFromEnv({ ...none })).toBeUndefined();
    expect(authFromEnv({ ...none, WOLFPACK_JWT_SECRET: "   " })).toBeUndefined();
    expect(authFromEnv({ ...none, WOLFPACK_JWT_SECRET: "k".repeat(minJwtSecretChars) })?.secret).toBe("k".repeat(minJwtSecretChars));
    const claims = authFromEnv({ ...none, WOLFPACK_JWT_SECRET: secret, WOLFPACK_JWT_ISSUER: "iss-x", WOLFPACK_JWT_AUDIENCE: "aud-y" });
    expect(claims).toEqual({ secret, issuer: "iss-x", audience: "aud-y" });
  });

  test("a token minted from authFromEnv carries iss and aud that the relay side accepts", async () => {
    const auth = authFromEnv({ WOLFPACK_JWT_SECRET: secret, WOLFPACK_JWT_ISSUER: "iss-x", WOLFPACK_JWT_AUDIENCE: "aud-y" })!;
    const token = (await tokenFor(auth, "http://127.0.0.1:1"))!;
    expect(await verifyJwt(secret, token, { issuer: "iss-x", audience: "aud-y" })).toEqual({ ok: true });
    expect((await verifyJwt(secret, token, { issuer: "other" })).ok).toBe(false);
    expect(await signJwt(secret)).not.toBe(await signJwt(secret));
  });
});
