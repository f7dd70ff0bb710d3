/**
 * The relay transport: HTTP on ky, request lanes on p-queue, deadlines that cover the complete
 * response body, response caps, and the mapping of every failure to a registry `TaskError` that
 * names its relay operation. It sends exactly one HTTP request per call: no hidden retries.
 *
 * Lanes: at most 8 ordinary requests in flight; `acknowledge` and `connect` may use 2 more
 * reserved slots, so ACKs and lease renewal are never starved. Waiters queue FIFO. A waiter
 * aborted by its caller sent nothing and fails with retryable `ABORTED`.
 *
 * A relay that must prove the user's relay secret (auth.ts): before the first request that would
 * carry a token — and again after the relay was out of reach — the transport challenges it on the
 * profile; each request then carries a fresh one-use relay token, and each reply must carry the
 * relay's proof for that token. A relay that cannot prove it gets nothing: `RELAY_NOT_PROVEN`.
 */
import { type CappedReadErrors, readCappedBody } from "../protocol/capped-body.ts";
import ky, { type KyInstance, type Options } from "ky";
import PQueue from "p-queue";
import { utf8Bytes } from "../protocol/canonical-json.ts";
import { isUuid } from "../protocol/endpoint.ts";
import { errorSpec, isRegisteredCode, TaskError } from "../protocol/errors.ts";
import { HTTP_STATUS, isServerErrorStatus, isSuccessStatus } from "../protocol/http.ts";
import { proofMatches, replyProof, signRelayToken } from "../protocol/jwt.ts";
import {
  maxInFlightRequests,
  maxRequestBodyBytes,
  maxResponseBodyBytes,
  msPerSecond,
  defaultRequestDeadlineMs,
  maxRequestDeadlineMs,
  minRequestDeadlineMs,
  reservedRequestSlots,
} from "../protocol/limits.ts";
import {
  RELAY_ENDPOINT_PATH,
  RELAY_PROFILE,
  RELAY_PROFILE_PATH,
  RELAY_REPLY_PROOF_HEADER,
  SESSION_LIST_PATH,
  SESSION_STATUS_PATH,
} from "../protocol/names.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import { isRecord } from "../protocol/validate.ts";
import { EPOCHLESS_CODES, type RelayOperation } from "../protocol/wire.ts";
import { proveRelay, type RelayAuth, type RelaySecretAuth, relaySecretFor, tokenFor } from "./auth.ts";

export type TransportOperation = RelayOperation | "profile" | "session-status" | "session-list";

export interface TransportOptions {
  /** Bare origin of the relay, e.g. `http://127.0.0.1:18790`. */
  readonly baseUrl: string;
  /** Injected fetch (tests, fault proxies). Default: global fetch. */
  readonly fetch?: typeof fetch;
  /** Per-request deadline covering the whole response body. Default 12,000 ms, allowed 1..15,000. */
  readonly requestTimeoutMs?: number;
  /**
   * Credentials: a Wolfpack JWT (sent only to plain-HTTP loopback URLs), and the relay secret this
   * relay must prove (then every request carries a relay token instead).
   */
  readonly auth?: RelayAuth;
}

export interface RequestOptions {
  readonly signal?: AbortSignal;
  /** A second signal that stops the request like `signal` (the session's binding fence). */
  readonly fence?: AbortSignal;
  /** Extra time on top of the request deadline (a `watch` waits on the server). */
  readonly extraDeadlineMs?: number;
}

/** A parsed JSON reply that passed the envelope checks (`ok:true`, profile, epoch). */
export interface SuccessReply {
  readonly epoch: string;
  readonly value: Record<string, unknown>;
  readonly body: Record<string, unknown>;
}

export interface LaneUsage {
  readonly ordinary: number;
  readonly reserved: number;
  readonly waiting: number;
}

export interface RelayTransport {
  readonly baseUrl: string;
  readonly requestTimeoutMs: number;
  /**
   * POSTs one relay operation whose JSON text the caller built (the session splices a stored
   * envelope's text in as is); resolves with the success reply or throws a mapped TaskError.
   */
  post(operation: RelayOperation, bodyText: string, options?: RequestOptions): Promise<SuccessReply>;
  /** GET /api/task-relay/profile. */
  profile(options?: RequestOptions): Promise<Record<string, unknown>>;
  /** GET /api/session-control/status?session=NAME (our relay, and Wolfpack's session control). */
  sessionStatus(session: string, options?: RequestOptions): Promise<ListedSession>;
  /** GET /api/session-control/list: the live registrations. */
  sessionList(options?: RequestOptions): Promise<ListedSession[]>;
  usage(): LaneUsage;
  /** Aborts everything in flight and refuses new requests with `RELAY_CLOSED`. */
  close(): void;
}

const RESERVED_OPERATIONS: ReadonlySet<TransportOperation> = new Set(["acknowledge", "connect"]);
const FORCED_RETRYABLE: ReadonlySet<string> = new Set(["RELAY_CAPACITY", "RELAY_UNAVAILABLE", "PEER_UNREACHABLE"]);
const HTTP_TOO_MANY_REQUESTS = HTTP_STATUS.tooManyRequests;
/** UTF-8 bytes one UTF-16 code unit can take (a surrogate pair is two units for four bytes). */
const MAX_UTF8_BYTES_PER_UNIT = 3;
const HTTP_UNAUTHORIZED = HTTP_STATUS.unauthorized;
const HTTP_NOT_FOUND = HTTP_STATUS.notFound;
const HTTP_METHOD_NOT_ALLOWED = HTTP_STATUS.methodNotAllowed;

export function validateDeadline(value: number | undefined): number {
  if (value === undefined) return defaultRequestDeadlineMs;
  if (!Number.isInteger(value) || value < minRequestDeadlineMs || value > maxRequestDeadlineMs) {
    throw new TaskError("INVALID_CONFIGURATION", {
      message: `requestTimeoutMs must be an integer from ${minRequestDeadlineMs} to ${maxRequestDeadlineMs}`,
      details: { requestTimeoutMs: value },
    });
  }
  return value;
}

function retryAfterFrom(body: unknown, headers: Headers): number | undefined {
  const fromBody = isRecord(body) && isRecord(body.error) ? body.error.retryAfterMs : undefined;
  if (typeof fromBody === "number" && Number.isFinite(fromBody) && fromBody >= 0) return fromBody;
  const header = headers.get("retry-after");
  if (header !== null && /^\d+$/.test(header.trim())) return Number(header.trim()) * msPerSecond;
  return undefined;
}

const JSON_CONTENT = { "content-type": "application/json" } as const;
/** One decoder for every reply (a decoder per reply showed in the client's profile). */
const replyDecoder = new TextDecoder();

function withAuthorization(options: Options, authorization: string | undefined): Options {
  return authorization === undefined ? options : { ...options, headers: { authorization } };
}

/** The relay-secret side of one transport (auth.ts): the challenge once, a token per request, the reply proofs. */
interface RelayProofs {
  /** A fresh relay token, once the relay proved itself (challenged now if it has not yet). */
  token(): Promise<string>;
  /** Throws `RELAY_NOT_PROVEN` unless `reply` carries the relay's proof for `token`. */
  checkReply(reply: Response, token: string, operation: TransportOperation): void;
  /** The relay must prove itself again before the next token. */
  forget(): void;
}

/**
 * Retryable: the user's own relay may answer on that address again, so what waits to be sent stays
 * pending (never quarantined) and goes to a relay that proves itself.
 */
function notProven(relay: RelaySecretAuth, problem: string, operation?: TransportOperation): TaskError {
  return new TaskError("RELAY_NOT_PROVEN", {
    retryable: true,
    message: `The relay at ${relay.url} cannot prove it is yours (${problem}; your relay secret is ${relay.file}); pi-tasks sends it nothing.`,
    details: { url: relay.url, file: relay.file, problem, ...(operation === undefined ? {} : { operation }) },
  });
}

function createRelayProofs(
  relay: RelaySecretAuth,
  baseUrl: string,
  fetcher: typeof fetch,
  timeoutMs: number,
  closing: AbortSignal,
): RelayProofs {
  let proven: Promise<void> | undefined;
  async function challenge(): Promise<void> {
    const probe = await proveRelay(baseUrl, fetcher, relay.keys, AbortSignal.any([closing, AbortSignal.timeout(timeoutMs)]));
    if (probe.proven) return;
    if (closing.aborted) throw new TaskError("RELAY_CLOSED", { details: { operation: "profile" } });
    if (probe.failure !== undefined) {
      const timedOut = probe.failure instanceof Error && probe.failure.name === "TimeoutError";
      throw new TaskError(timedOut ? "RELAY_TIMEOUT" : "RELAY_UNAVAILABLE", {
        details: { operation: "profile", problem: "the relay's challenge went unanswered" },
      });
    }
    throw notProven(relay, probe.relay ? "it did not answer the challenge with the secret's proof" : "it is not a volatile-v1 relay");
  }
  return {
    async token() {
      if (proven === undefined) {
        const attempt = challenge();
        proven = attempt;
        attempt.catch(() => {
          if (proven === attempt) proven = undefined;
        });
      }
      await proven;
      return signRelayToken(relay.keys);
    },
    checkReply(reply, token, operation) {
      if (proofMatches(replyProof(relay.keys, token), reply.headers.get(RELAY_REPLY_PROOF_HEADER))) return;
      reply.body?.cancel().catch(() => undefined);
      throw notProven(relay, `its ${reply.status} reply carries no proof for this request's token`, operation);
    },
    forget() {
      proven = undefined;
    },
  };
}

/** ky options carrying a request's stop signal to the fetch below (see `ky.create`). */
function relaySignal(signal: AbortSignal): Options {
  // Not a declared ky option: ky passes unknown options to fetch as they are.
  return { relaySignal: signal } as Options;
}

const REPLY_READ_ERRORS: CappedReadErrors = {
  tooLarge: (bytes) => new TaskError("INVALID_RESPONSE", { details: { problem: "response body too large", bytes } }),
  aborted: (signal) => signal.reason,
};

/** Reads a response body as text within the response cap (counted per chunk while streaming). */
async function readCapped(response: Response, signal: AbortSignal): Promise<string> {
  return replyDecoder.decode(await readCappedBody(response, maxResponseBodyBytes, signal, REPLY_READ_ERRORS));
}

/** Maps a reply (status + parsed body) to a success or a registry error. */
function interpret(status: number, body: unknown, headers: Headers): SuccessReply {
  if (status === HTTP_TOO_MANY_REQUESTS) {
    const retryAfterMs = retryAfterFrom(body, headers);
    throw new TaskError("RELAY_CAPACITY", { details: { httpStatus: status, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) } });
  }
  const relayBody = isRecord(body) && body.profile === RELAY_PROFILE;
  // A 401 is the JWT's, unless a relay error body names another code (BINDING_SECRET_REQUIRED).
  if (
    status === HTTP_UNAUTHORIZED &&
    !(relayBody && isRecord(body.error) && typeof body.error.code === "string" && body.error.code !== "RELAY_AUTH_REQUIRED")
  ) {
    throw new TaskError("RELAY_AUTH_REQUIRED", { details: { httpStatus: status } });
  }
  // A gateway or proxy failure in front of the relay is transient, not a profile mismatch.
  if (!relayBody && isServerErrorStatus(status)) {
    throw new TaskError("RELAY_UNAVAILABLE", {
      details: { httpStatus: status, mayHaveBeenDelivered: true, problem: "server error without a relay body" },
    });
  }
  // Not found, or no such method, without a relay body: not a relay at all (a Wolfpack with only its
  // v2 task relay answers its profile path so), never a malformed relay.
  if (!relayBody && (status === HTTP_NOT_FOUND || status === HTTP_METHOD_NOT_ALLOWED))
    throw new TaskError("RELAY_PROFILE_REQUIRED", { details: { httpStatus: status, problem: "not a relay: no relay body" } });
  if (!isRecord(body)) throw new TaskError("INVALID_RESPONSE", { details: { httpStatus: status, problem: "reply is not a JSON object" } });
  if (body.profile !== RELAY_PROFILE) throw new TaskError("RELAY_PROFILE_REQUIRED", { details: { httpStatus: status } });
  const epoch = body.epoch;
  if (epoch !== undefined && !isUuid(epoch))
    throw new TaskError("INVALID_RESPONSE", { details: { httpStatus: status, problem: "epoch is not a UUID" } });
  if (body.ok === true) {
    if (!isSuccessStatus(status) || epoch === undefined) {
      throw new TaskError("INVALID_RESPONSE", {
        details: { httpStatus: status, problem: "success without epoch or with an error status" },
      });
    }
    return { epoch: epoch as string, value: isRecord(body.value) ? body.value : {}, body };
  }
  const error = body.error;
  if (body.ok !== false || !isRecord(error) || typeof error.code !== "string" || error.code.length === 0) {
    throw new TaskError("INVALID_RESPONSE", { details: { httpStatus: status, problem: "malformed error body" } });
  }
  const code = error.code;
  if (epoch === undefined && !EPOCHLESS_CODES.has(code)) {
    throw new TaskError("INVALID_RESPONSE", { details: { httpStatus: status, problem: `epochless ${code}`, code } });
  }
  const retryAfterMs = retryAfterFrom(body, headers);
  throw relayRefusal(
    { code, retryable: error.retryable, mayHaveBeenDelivered: error.mayHaveBeenDelivered },
    { httpStatus: status, ...(epoch === undefined ? {} : { epoch }), ...(retryAfterMs === undefined ? {} : { retryAfterMs }) },
  );
}

/**
 * A relay's refusal (an error body's, or one envelope's in a batch answer) as the error the client
 * acts on: a registered code keeps its own retryability, capacity and unavailability are always
 * retryable, an unknown code is as retryable as the relay says.
 */
export function relayRefusal(
  error: { readonly code: string; readonly retryable?: unknown; readonly mayHaveBeenDelivered?: unknown },
  details: Record<string, unknown>,
): TaskError {
  const code = error.code;
  const retryable = FORCED_RETRYABLE.has(code) || (isRegisteredCode(code) ? errorSpec(code).retryable : error.retryable === true);
  return new TaskError(code, {
    retryable,
    details: { ...details, ...(error.mayHaveBeenDelivered === true ? { mayHaveBeenDelivered: true } : {}) },
  });
}

/** The ky instance of one transport: no retries, no ky timeout, no thrown HTTP errors. */
function createHttp(baseUrl: string, baseFetch: typeof fetch, jwtAuth: RelayAuth | undefined): KyInstance {
  return ky.create({
    prefixUrl: baseUrl,
    retry: 0,
    timeout: false,
    throwHttpErrors: false,
    // Each request's stop signal travels as the option `relaySignal`, which ky hands to fetch as an
    // unknown option: ky then joins no signal of its own per request (this is the hot path).
    fetch: (input: Request | URL | string, init?: RequestInit) =>
      baseFetch(input, { signal: (init as { relaySignal?: AbortSignal } | undefined)?.relaySignal ?? null }),
    // The JWT hook exists only when a Wolfpack secret is configured (no per-request cost otherwise).
    ...(jwtAuth === undefined ? {} : { hooks: { beforeRequest: [jwtHook(jwtAuth)] } }),
  });
}

/** Signs each request with a Wolfpack JWT, unless it already carries an authorization. */
function jwtHook(jwtAuth: RelayAuth): (request: Request) => Promise<void> {
  return async (request) => {
    if (request.headers.has("authorization")) return;
    const token = await tokenFor(jwtAuth, request.url);
    if (token !== undefined) request.headers.set("authorization", `Bearer ${token}`);
  };
}

/** The request lanes: ordinary slots for everything, reserved ones only `acknowledge` and `connect` may add. */
interface Lanes {
  laneFor(operation: TransportOperation): PQueue;
  usage(): LaneUsage;
}

function createLanes(): Lanes {
  const ordinary = new PQueue({ concurrency: maxInFlightRequests });
  const reserved = new PQueue({ concurrency: reservedRequestSlots });
  return {
    laneFor(operation) {
      if (!RESERVED_OPERATIONS.has(operation)) return ordinary;
      // ACK and connect take an ordinary slot when one is free, else their reserved slots.
      return ordinary.pending < maxInFlightRequests && ordinary.size === 0 ? ordinary : reserved;
    },
    usage: () => ({ ordinary: ordinary.pending, reserved: reserved.pending, waiting: ordinary.size + reserved.size }),
  };
}

/**
 * One request's stop, by whichever comes first: the deadline, the caller's signal, the fence,
 * or close(). Its stop also settles the exchange (`expired`) for a fetch that ignores its
 * signal. (Listeners, not AbortSignal.any: this is the client's hot path.)
 */
interface RequestStop {
  readonly signal: AbortSignal;
  /** Rejects with the stop's reason once stopped. */
  readonly expired: Promise<never>;
  stop(reason: unknown): void;
  /** Removes the listeners on the caller's signal and the fence. */
  release(): void;
}

function createRequestStop(callerSignal: AbortSignal | undefined, fence: AbortSignal | undefined): RequestStop {
  const controller = new AbortController();
  let expire: (reason: unknown) => void = () => undefined;
  const expired = new Promise<never>((_, reject) => {
    expire = reject;
  });
  expired.catch(() => undefined);
  const stop = (reason: unknown) => {
    if (controller.signal.aborted) return;
    controller.abort(reason);
    expire(reason);
  };
  const onCaller = () => stop(callerSignal?.reason);
  const onFence = () => stop(fence?.reason);
  if (callerSignal?.aborted) stop(callerSignal.reason);
  else callerSignal?.addEventListener("abort", onCaller, { once: true });
  if (fence?.aborted) stop(fence.reason);
  else fence?.addEventListener("abort", onFence, { once: true });
  return {
    signal: controller.signal,
    expired,
    stop,
    release() {
      callerSignal?.removeEventListener("abort", onCaller);
      fence?.removeEventListener("abort", onFence);
    },
  };
}

type Decode<T> = (status: number, parsed: unknown, headers: Headers) => T;
/** Sends one request; `authorization` is the relay token's header value, when there is one. */
type Run = (signal: AbortSignal, authorization: string | undefined) => Promise<Response>;

/** Sends one request (with a relay token and its reply proof, when the relay must prove itself) and reads its body. */
async function sendAndRead(
  operation: TransportOperation,
  run: Run,
  signal: AbortSignal,
  proofs: RelayProofs | undefined,
): Promise<{ reply: Response; text: string }> {
  // The profile goes without a token: it is how a relay proves itself first.
  const token = proofs === undefined || operation === "profile" ? undefined : await proofs.token();
  const reply = await run(signal, token === undefined ? undefined : `Bearer ${token}`);
  if (proofs !== undefined && token !== undefined) proofs.checkReply(reply, token, operation);
  return { reply, text: await readCapped(reply, signal) };
}

/**
 * `sendAndRead` within the deadline. The deadline covers the request and its whole body, not the
 * wait for a lane; the timer is cleared on settle and unref'd (a finished request keeps nothing alive).
 */
async function sendWithin(
  operation: TransportOperation,
  run: Run,
  request: RequestStop,
  deadlineMs: number,
  proofs: RelayProofs | undefined,
): Promise<{ reply: Response; text: string }> {
  const timer = setTimeout(() => request.stop(new DOMException("request deadline", "TimeoutError")), deadlineMs);
  timer.unref?.();
  try {
    const exchanged = sendAndRead(operation, run, request.signal, proofs);
    exchanged.catch(() => undefined);
    return await Promise.race([exchanged, request.expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** The reply text as JSON; a body that is not JSON is tolerated only where `interpret` maps the status alone. */
function parseReply(status: number, text: string): unknown {
  try {
    return text.length === 0 ? undefined : JSON.parse(text);
  } catch {
    const mappedByStatus =
      status === HTTP_TOO_MANY_REQUESTS ||
      status === HTTP_UNAUTHORIZED ||
      status === HTTP_NOT_FOUND ||
      status === HTTP_METHOD_NOT_ALLOWED ||
      isServerErrorStatus(status);
    if (!mappedByStatus) {
      throw new TaskError("INVALID_RESPONSE", { details: { httpStatus: status, problem: "reply is not JSON" } });
    }
    return undefined;
  }
}

/** What a failure means for the caller, given whether the request left its lane. */
function mapFailure(
  error: unknown,
  operation: TransportOperation,
  started: boolean,
  callerSignal: AbortSignal | undefined,
  closing: AbortSignal,
  proofs: RelayProofs | undefined,
): TaskError {
  const mayHaveBeenDelivered = started && operation !== "profile" && operation !== "session-status" && operation !== "session-list";
  if (error instanceof TaskError) {
    return error.withDetails({ operation });
  }
  if (closing.aborted) return new TaskError("RELAY_CLOSED", { details: { operation } });
  if (callerSignal?.aborted) {
    return new TaskError("ABORTED", {
      details: { operation, sent: started, ...(mayHaveBeenDelivered ? { mayHaveBeenDelivered: true } : {}) },
    });
  }
  // The relay was out of reach: whatever answers next on its address must prove itself again.
  proofs?.forget();
  const name = error instanceof Error ? error.name : "";
  if (name === "TimeoutError") {
    return new TaskError("RELAY_TIMEOUT", { details: { operation, mayHaveBeenDelivered } });
  }
  return new TaskError("RELAY_UNAVAILABLE", {
    details: { operation, mayHaveBeenDelivered, cause: error instanceof Error ? error.message : String(error) },
  });
}

/** Runs requests through the lanes and stops them all on close. */
interface Exchanger {
  exchange<T>(operation: TransportOperation, run: Run, decode: Decode<T>, requestOptions: RequestOptions): Promise<T>;
  usage(): LaneUsage;
  close(): void;
}

function createExchanger(requestTimeoutMs: number, closing: AbortController, proofs: RelayProofs | undefined): Exchanger {
  const lanes = createLanes();
  /** Stops for every request in flight (close() runs them). */
  const inflight = new Set<(reason: unknown) => void>();
  async function exchange<T>(operation: TransportOperation, run: Run, decode: Decode<T>, requestOptions: RequestOptions): Promise<T> {
    if (closing.signal.aborted) throw new TaskError("RELAY_CLOSED", { details: { operation } });
    const callerSignal = requestOptions.signal;
    const deadlineMs = requestTimeoutMs + (requestOptions.extraDeadlineMs ?? 0);
    const request = createRequestStop(callerSignal, requestOptions.fence);
    inflight.add(request.stop);
    let started = false;
    try {
      return await lanes.laneFor(operation).add(
        async () => {
          started = true;
          const { reply, text } = await sendWithin(operation, run, request, deadlineMs, proofs);
          return decode(reply.status, parseReply(reply.status, text), reply.headers);
        },
        // A waiter aborted (or closed) while queued is removed and never sends.
        { signal: request.signal },
      );
    } catch (error) {
      throw mapFailure(error, operation, started, callerSignal, closing.signal, proofs);
    } finally {
      inflight.delete(request.stop);
      request.release();
    }
  }
  return {
    exchange,
    usage: lanes.usage,
    close() {
      if (closing.signal.aborted) return;
      const reason = new TaskError("RELAY_CLOSED");
      closing.abort(reason);
      for (const stop of [...inflight]) stop(reason);
    },
  };
}

/**
 * A session as the relay's session routes describe it: its name, and its task endpoint and lease
 * when they have the wire's shape (anything else the relay says is kept as it came).
 */
export interface ListedSession {
  readonly session: string;
  readonly taskEndpoint?: TaskEndpoint;
  readonly taskTransport?: { readonly leaseExpiresAt?: string; readonly [field: string]: unknown };
  readonly [field: string]: unknown;
}

function listedSession(value: unknown): ListedSession | undefined {
  if (!isRecord(value) || typeof value.session !== "string") return undefined;
  const { taskEndpoint, taskTransport, ...rest } = value;
  const endpoint = isRecord(taskEndpoint) && typeof taskEndpoint.relay === "string" && typeof taskEndpoint.id === "string";
  // The lease's end is kept only as text; the rest of the transport (epoch, …) as the relay said it.
  const transport = isRecord(taskTransport)
    ? (({ leaseExpiresAt, ...others }) => ({ ...others, ...(typeof leaseExpiresAt === "string" ? { leaseExpiresAt } : {}) }))(taskTransport)
    : undefined;
  return {
    ...rest,
    session: value.session,
    ...(endpoint ? { taskEndpoint: { relay: taskEndpoint.relay as string, id: taskEndpoint.id as string } } : {}),
    ...(transport === undefined ? {} : { taskTransport: transport }),
  };
}

function decodeSessionStatus(status: number, parsed: unknown, headers: Headers): ListedSession {
  const listed = status === HTTP_STATUS.ok && isRecord(parsed) && parsed.ok === undefined ? listedSession(parsed) : undefined;
  if (listed !== undefined) return listed;
  interpret(status, parsed, headers);
  throw new TaskError("INVALID_RESPONSE", { details: { httpStatus: status, problem: "unexpected session status reply" } });
}

function decodeSessionList(status: number, parsed: unknown, headers: Headers): ListedSession[] {
  if (status === HTTP_STATUS.ok && isRecord(parsed) && Array.isArray(parsed.sessions))
    return parsed.sessions.map(listedSession).filter((listed) => listed !== undefined);
  interpret(status, parsed, headers);
  throw new TaskError("INVALID_RESPONSE", { details: { httpStatus: status, problem: "unexpected session list reply" } });
}

/** Refuses a request body over `maxRequestBodyBytes` before anything is sent. */
function checkRequestSize(operation: RelayOperation, text: string): void {
  // A UTF-16 unit is at most 3 UTF-8 bytes: short texts need no byte count.
  const bytes = text.length * MAX_UTF8_BYTES_PER_UNIT <= maxRequestBodyBytes ? 0 : utf8Bytes(text);
  if (bytes > maxRequestBodyBytes) {
    throw new TaskError("PAYLOAD_TOO_LARGE", { details: { operation, bytes, maxBytes: maxRequestBodyBytes } });
  }
}

export function createRelayTransport(options: TransportOptions): RelayTransport {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const requestTimeoutMs = validateDeadline(options.requestTimeoutMs);
  const closing = new AbortController();
  const baseFetch = options.fetch ?? fetch;
  const relaySecret = relaySecretFor(options.auth, baseUrl);
  const jwtAuth = relaySecret === undefined && options.auth?.secret !== undefined ? options.auth : undefined;
  const http = createHttp(baseUrl, baseFetch, jwtAuth);
  const proofs =
    relaySecret === undefined ? undefined : createRelayProofs(relaySecret, baseUrl, baseFetch, requestTimeoutMs, closing.signal);
  const { exchange, usage, close } = createExchanger(requestTimeoutMs, closing, proofs);
  return {
    baseUrl,
    requestTimeoutMs,
    async post(operation, text, requestOptions = {}) {
      checkRequestSize(operation, text);
      const path = RELAY_ENDPOINT_PATH.slice(1);
      const run: Run = (signal, authorization) =>
        http.post(path, {
          body: text,
          headers: authorization === undefined ? JSON_CONTENT : { ...JSON_CONTENT, authorization },
          ...relaySignal(signal),
        });
      return exchange(operation, run, interpret, requestOptions);
    },
    async profile(requestOptions = {}) {
      const run: Run = (signal) => http.get(RELAY_PROFILE_PATH.slice(1), relaySignal(signal));
      return (await exchange("profile", run, interpret, requestOptions)).body;
    },
    sessionStatus(session, requestOptions = {}) {
      const path = `${SESSION_STATUS_PATH.slice(1)}?session=${encodeURIComponent(session)}`;
      const run: Run = (signal, authorization) => http.get(path, withAuthorization(relaySignal(signal), authorization));
      return exchange("session-status", run, decodeSessionStatus, requestOptions);
    },
    sessionList(requestOptions = {}) {
      const run: Run = (signal, authorization) =>
        http.get(SESSION_LIST_PATH.slice(1), withAuthorization(relaySignal(signal), authorization));
      return exchange("session-list", run, decodeSessionList, requestOptions);
    },
    usage,
    close,
  };
}
