/**
 * The relay's HTTP handling, independent of any socket: routes, middleware (origin, OPTIONS,
 * authentication — the optional JWT and the relay secret, relay-auth.ts — client gate, bounded
 * request slots) and the request rules (no query strings on relay paths, exact `application/json`,
 * body ≤ 64 KiB read within 5 s, strict UTF-8, JSON object with a known operation). Every error body carries `profile:"volatile-v1"` and the epoch; any failure
 * that is not a wire code (an internal one such as `INVARIANT_VIOLATED` included) is answered 503
 * `RELAY_UNAVAILABLE`. It also runs the engine's periodic maintenance.
 *
 * It reads a `RelayRequest` (a fetch `Request` is one) and answers a `RelayReply` (status, headers,
 * text), so it runs on any socket: server.ts puts it on `Bun.serve` under Bun and on `node:http`
 * under Node; in-memory.ts calls it directly. See docs/wire.md.
 */
import { type CappedReadErrors, readCappedBody } from "../protocol/capped-body.ts";
import { errorSpec, TaskError, toTaskError } from "../protocol/errors.ts";
import { HTTP_STATUS } from "../protocol/http.ts";
import { maxRequestBodyBytes, relayBodyReadDeadlineMs, relayBodyReadSweepMs, relayMaintenanceIntervalMs } from "../protocol/limits.ts";
import {
  RELAY_ENDPOINT_PATH,
  RELAY_INSTANCE_PATH,
  RELAY_PROFILE,
  RELAY_PROFILE_PATH,
  SESSION_LIST_PATH,
  SESSION_STATUS_PATH,
} from "../protocol/names.ts";
import {
  FEATURE_BINDING_SECRET,
  isRelayOperation,
  type RelayOperation,
  type SessionListBody,
  type WireErrorBody,
  wireRefusal,
} from "../protocol/wire.ts";
import { type ClientGate, createClientGate } from "./client-gate.ts";
import { createRelayEngine, type RelayEngine } from "./engine.ts";
import { createRelayMetrics, METRICS_PATH, type RelayMetrics } from "./metrics.ts";
import { createRelayAuth, type RelayAuth, withReplyProof } from "./relay-auth.ts";
import { createRequestSlots, type RequestSlots } from "./request-slots.ts";
import type { RelayStore } from "./store/store.ts";

export interface RelayHandlerOptions {
  /** Client addresses or IPv4 CIDRs allowed besides loopback. */
  readonly allow?: readonly string[];
  /** Environment for the optional JWT (`WOLFPACK_JWT_SECRET`, `…_ISSUER`, `…_AUDIENCE`). */
  readonly env?: Record<string, string | undefined>;
  /** Clock for leases, freshness and receipts (tests). */
  readonly now?: () => number;
  /** Where the relay keeps its state; default a new memory store (a fresh epoch). */
  readonly store?: RelayStore;
  /** The relay secret (`--secret-file`): only clients that prove it may use the relay (relay-auth.ts). */
  readonly relaySecret?: Uint8Array;
  /** The embedded relay's instance nonce (base64url): the instance route answers with it. */
  readonly instance?: string;
  /**
   * Who runs the engine's maintenance: `"interval"` (default) every `relayMaintenanceIntervalMs` of
   * real time, or `"caller"`, who calls `engine.maintain()` itself (the simulator, on virtual time).
   */
  readonly maintenance?: "interval" | "caller";
}

/** What the handler reads of a request. A fetch `Request` is one; server.ts builds one from `node:http`. */
export interface RelayRequest {
  /** The absolute URL. */
  readonly url: string;
  readonly method: string;
  readonly headers: { get(name: string): string | null };
  /** The body as a stream (read only when no length is declared). */
  readonly body: ReadableStream<Uint8Array> | null;
  arrayBuffer(): Promise<ArrayBuffer>;
  /** Aborts when the client goes away (a long-held `watch` ends then). */
  readonly signal: AbortSignal;
}

/** What the handler answers; each socket writes it its own way. */
export interface RelayReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The body text (JSON), or null for none. */
  readonly body: string | null;
}

/** A `RelayReply` as a fetch `Response` (Bun's socket, the in-memory relay). */
export function replyResponse(reply: RelayReply): Response {
  return new Response(reply.body, { status: reply.status, headers: reply.headers });
}

export interface RelayHandler {
  readonly epoch: string;
  readonly engine: RelayEngine;
  /** Answers one HTTP request; `peer` is the client's address (for the client gate). */
  handle(request: RelayRequest, peer: string | undefined): Promise<RelayReply>;
  /** Stops maintenance and closes the engine (and its store). */
  close(): Promise<void>;
}

const JSON_HEADERS = { "content-type": "application/json", "cache-control": "no-store" } as const;
const EARLY_HEADERS = { ...JSON_HEADERS, connection: "close" } as const;
const NO_STORE = { "cache-control": "no-store" } as const;
/** A 401 names its challenge (RFC 9110): the JWT's, or for a missing binding secret the feature's. */
const JWT_CHALLENGE = { "www-authenticate": 'Bearer realm="wolfpack"' } as const;
const BINDING_SECRET_CHALLENGE = { "www-authenticate": FEATURE_BINDING_SECRET } as const;

/** HTTP status of a wire error; body-size and body-time rejections keep INVALID_REQUEST. */
function statusOf(error: TaskError): number {
  const override = error.details.httpStatus;
  if (typeof override === "number") return override;
  return errorSpec(error.code).httpStatus ?? HTTP_STATUS.unavailable;
}

function errorBody(error: TaskError, epoch: string): WireErrorBody {
  return { ok: false, profile: RELAY_PROFILE, epoch, error: wireRefusal(error) };
}

/** Errors the relay may put on the wire; anything else is an internal failure. */
function wireError(error: unknown): TaskError {
  const failure = toTaskError(error);
  if (failure.code !== "TASK_ERROR" && errorSpec(failure.code).httpStatus !== undefined) return failure;
  return new TaskError("RELAY_UNAVAILABLE", { details: { mayHaveBeenDelivered: true } });
}

function rejection(code: string, httpStatus: number, problem: string): TaskError {
  return new TaskError(code, { details: { httpStatus, problem } });
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

function tooLarge(): TaskError {
  return rejection("INVALID_REQUEST", HTTP_STATUS.payloadTooLarge, `body is larger than ${maxRequestBodyBytes} bytes`);
}

function tooSlow(): TaskError {
  return rejection("INVALID_REQUEST", HTTP_STATUS.requestTimeout, `body not read within ${relayBodyReadDeadlineMs} ms`);
}

const REQUEST_READ_ERRORS: CappedReadErrors = { tooLarge: () => tooLarge(), aborted: () => tooSlow() };

/**
 * Body reads under way with the time they began; one sweep every `relayBodyReadSweepMs` fails those
 * past `relayBodyReadDeadlineMs` (a timer and an AbortController per request cost more than the
 * read of a small declared body, the relay's hot path).
 */
const reading = new Map<(error: TaskError) => void, number>();
let sweeper: ReturnType<typeof setInterval> | undefined;

function sweep(): void {
  const now = performance.now();
  for (const [fail, startedAt] of reading) if (now - startedAt >= relayBodyReadDeadlineMs) fail(tooSlow());
  if (reading.size === 0 && sweeper !== undefined) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

/** `read` raced against the body-read deadline (swept, not timed one by one). */
async function withinReadDeadline<T>(read: Promise<T>): Promise<T> {
  let fail: (error: TaskError) => void = () => undefined;
  const expired = new Promise<never>((_, reject) => {
    fail = reject;
  });
  reading.set(fail, performance.now());
  if (sweeper === undefined) {
    sweeper = setInterval(sweep, relayBodyReadSweepMs);
    sweeper.unref?.();
  }
  try {
    return await Promise.race([read, expired]);
  } finally {
    reading.delete(fail);
  }
}

/** Reads the body within the deadline and size limit, as strict UTF-8. */
async function readBody(request: RelayRequest): Promise<string> {
  const declared = request.headers.get("content-length");
  let bytes: Uint8Array;
  if (declared !== null && Number(declared) <= maxRequestBodyBytes) {
    // A declared length within the limit is read natively, in one piece.
    const body = request.arrayBuffer();
    body.catch(() => undefined);
    bytes = new Uint8Array(await withinReadDeadline(body));
  } else {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), relayBodyReadDeadlineMs);
    try {
      bytes = await readCappedBody(request, maxRequestBodyBytes, deadline.signal, REQUEST_READ_ERRORS);
    } finally {
      clearTimeout(timer);
    }
  }
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw rejection("INVALID_REQUEST", HTTP_STATUS.badRequest, "body is not strict UTF-8");
  }
}

/** The path and query of a request URL. A `URL` is parsed only when a query is present (the hot path has none). */
interface Route {
  readonly pathname: string;
  readonly search: string;
}

function routeOf(href: string): Route {
  // An absolute URL: the path starts at the first "/" after "scheme://host".
  const start = href.indexOf("/", href.indexOf("//") + 2);
  if (start < 0) return { pathname: "/", search: "" };
  const query = href.indexOf("?", start);
  const hash = href.indexOf("#", start);
  if (query < 0 && hash < 0) return { pathname: href.slice(start), search: "" };
  const parsed = new URL(href);
  return { pathname: parsed.pathname, search: parsed.search };
}

function isJsonContentType(value: string | null): boolean {
  if (value === "application/json") return true;
  if (value === null) return false;
  return value.split(";")[0]!.trim().toLowerCase() === "application/json";
}

/** Answers a failure: its wire error, with the epoch the relay serves when it is answered. */
type Fail = (error: unknown, early?: boolean, extra?: Record<string, string>) => RelayReply;

function respond(body: unknown, status: number, headers: Record<string, string> = JSON_HEADERS): RelayReply {
  return { status, headers, body: JSON.stringify(body) };
}

function failWith(engine: RelayEngine, metrics: RelayMetrics): Fail {
  return (error, early = false, extra = {}) => {
    const failure = wireError(error);
    metrics.refused(failure.code);
    return respond(errorBody(failure, engine.epoch), statusOf(failure), { ...(early ? EARLY_HEADERS : JSON_HEADERS), ...extra });
  };
}

/** A relay POST read and parsed: the operation and its body, or the reply that refuses it. */
type RelayPost = { readonly operation: RelayOperation; readonly body: Record<string, unknown> } | { readonly reply: RelayReply };

/**
 * The request rules of the relay path: POST, no query string, JSON content type, the body read
 * within its limits, a JSON object with a known operation.
 */
async function readRelayPost(request: RelayRequest, url: Route, fail: Fail): Promise<RelayPost> {
  if (request.method !== "POST") return { reply: fail(rejection("INVALID_REQUEST", HTTP_STATUS.methodNotAllowed, "use POST"), true) };
  if (url.search !== "")
    return { reply: fail(rejection("INVALID_REQUEST", HTTP_STATUS.badRequest, "query strings are not allowed"), true) };
  if (!isJsonContentType(request.headers.get("content-type"))) {
    return { reply: fail(rejection("INVALID_REQUEST", HTTP_STATUS.badRequest, "content-type must be application/json"), true) };
  }
  let text: string;
  try {
    text = await readBody(request);
  } catch (error) {
    return { reply: fail(error, true) };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { reply: fail(rejection("INVALID_REQUEST", HTTP_STATUS.badRequest, "body is not JSON")) };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return { reply: fail(rejection("INVALID_REQUEST", HTTP_STATUS.badRequest, "body is not a JSON object")) };
  }
  const body = parsed as Record<string, unknown>;
  if (!isRelayOperation(body.operation)) return { reply: fail(rejection("INVALID_REQUEST", HTTP_STATUS.badRequest, "unknown operation")) };
  return { operation: body.operation, body };
}

/** What the routes below work with; each part keeps its own state. */
interface Parts {
  readonly engine: RelayEngine;
  readonly auth: RelayAuth;
  readonly gate: ClientGate;
  readonly slots: RequestSlots;
  readonly fail: Fail;
  /** The paths the relay answers (the instance route only for an embedded relay). */
  readonly routes: ReadonlySet<string>;
  readonly metrics: RelayMetrics;
}

async function relayPost(
  { engine, fail, metrics }: Parts,
  request: RelayRequest,
  url: Route,
  releaseSlot: () => void,
): Promise<RelayReply> {
  const post = await readRelayPost(request, url, fail);
  if ("reply" in post) return post.reply;
  const started = performance.now();
  try {
    // The signal is read only by a held `watch` (a socket adapter may make it on demand).
    const result = await engine.handle(post.operation, post.body, {
      get signal() {
        return request.signal;
      },
      releaseSlot,
    });
    const valueJson = "rawValueJson" in result ? result.rawValueJson : JSON.stringify(result.value);
    return {
      status: HTTP_STATUS.ok,
      headers: JSON_HEADERS,
      body: `{"ok":true,"profile":"${RELAY_PROFILE}","epoch":"${engine.epoch}","value":${valueJson}}`,
    };
  } catch (error) {
    return fail(error, false, toTaskError(error).code === "BINDING_SECRET_REQUIRED" ? BINDING_SECRET_CHALLENGE : {});
  } finally {
    metrics.request(post.operation, performance.now() - started);
  }
}

async function routeGet(parts: Parts, request: RelayRequest, url: Route): Promise<RelayReply> {
  const started = performance.now();
  try {
    return await answerGet(parts, request, url);
  } finally {
    parts.metrics.request(`GET ${url.pathname}`, performance.now() - started);
  }
}

async function answerGet({ engine, auth, fail, metrics }: Parts, request: RelayRequest, url: Route): Promise<RelayReply> {
  if (request.method !== "GET") return fail(rejection("INVALID_REQUEST", HTTP_STATUS.methodNotAllowed, "use GET"), true);
  if (url.pathname === METRICS_PATH) {
    if (url.search !== "") return fail(rejection("INVALID_REQUEST", HTTP_STATUS.badRequest, "query strings are not allowed"), true);
    return {
      status: HTTP_STATUS.ok,
      headers: { "content-type": metrics.contentType, "cache-control": "no-store" },
      body: await metrics.text(),
    };
  }
  if (url.pathname === RELAY_PROFILE_PATH || url.pathname === RELAY_INSTANCE_PATH) {
    if (url.search !== "") return fail(rejection("INVALID_REQUEST", HTTP_STATUS.badRequest, "query strings are not allowed"), true);
    if (url.pathname === RELAY_INSTANCE_PATH) return respond(auth.instance(request.headers, engine.epoch), HTTP_STATUS.ok);
    return respond(engine.profile(), HTTP_STATUS.ok, { ...JSON_HEADERS, ...auth.challengeHeaders(request.headers) });
  }
  if (url.pathname === SESSION_LIST_PATH)
    return respond({ ok: true, sessions: await engine.sessionList() } satisfies SessionListBody, HTTP_STATUS.ok);
  const query = new URL(request.url).searchParams;
  const names = [...query.keys()];
  const session = query.get("session");
  if (session === null || session === "" || names.length !== 1) {
    return fail(rejection("INVALID_REQUEST", HTTP_STATUS.badRequest, "exactly one query parameter `session` is required"));
  }
  return respond(await engine.sessionStatus(session), HTTP_STATUS.ok);
}

async function handle(parts: Parts, request: RelayRequest, peer: string | undefined): Promise<RelayReply> {
  const { auth, fail, routes } = parts;
  const url = routeOf(request.url);
  if (!routes.has(url.pathname)) return fail(rejection("INVALID_REQUEST", HTTP_STATUS.notFound, "no such route"), true);
  if (request.headers.get("origin") !== null)
    return fail(rejection("PEER_POLICY_REQUIRED", HTTP_STATUS.forbidden, "origin not allowed"), true);
  if (request.method === "OPTIONS") return { status: HTTP_STATUS.noContent, headers: NO_STORE, body: null };
  // The reply proof (relay-auth.ts) goes with whatever is answered to a token of the relay secret.
  const verdict = auth.authorize(request, url.pathname);
  const authorization = verdict instanceof Promise ? await verdict : verdict;
  if (!authorization.ok) {
    const challenge = authorization.error.code === "RELAY_AUTH_REQUIRED" ? JWT_CHALLENGE : {};
    return withReplyProof(fail(authorization.error, true, challenge), authorization.proof);
  }
  return withReplyProof(await authorized(parts, request, url, peer), authorization.proof);
}

/** A request past the origin and auth checks: the client gate, an admission slot, then its route. */
async function authorized(parts: Parts, request: RelayRequest, url: Route, peer: string | undefined): Promise<RelayReply> {
  const { gate, slots, fail } = parts;
  if (!gate.allows(peer, request.headers.get("x-forwarded-for"))) {
    return fail(rejection("PEER_POLICY_REQUIRED", HTTP_STATUS.forbidden, "client address is not allowed"), true);
  }
  let release: () => void;
  try {
    release = slots.enter();
  } catch (error) {
    return fail(error, true);
  }
  try {
    if (url.pathname === RELAY_ENDPOINT_PATH) return await relayPost(parts, request, url, release);
    return await routeGet(parts, request, url);
  } catch (error) {
    return fail(error);
  } finally {
    release();
  }
}

/**
 * Runs the engine's maintenance every `relayMaintenanceIntervalMs`, one run at a time (a shared
 * store may take longer than the period); returns its stop. A failed run (a broken invariant among
 * them) cannot be answered to anyone, so it goes to stderr as one JSON line; stdout carries only
 * the readiness line.
 */
function startMaintenance(engine: RelayEngine): () => void {
  let maintaining = false;
  const maintenance = setInterval(() => {
    if (maintaining) return;
    maintaining = true;
    engine
      .maintain()
      .catch((error: unknown) =>
        process.stderr.write(`${JSON.stringify({ event: "maintenance-failed", error: toTaskError(error).toJSON() })}\n`),
      )
      .finally(() => {
        maintaining = false;
      });
  }, relayMaintenanceIntervalMs);
  maintenance.unref();
  return () => clearInterval(maintenance);
}

export async function createRelayHandler(options: RelayHandlerOptions = {}): Promise<RelayHandler> {
  const auth = createRelayAuth({
    env: options.env ?? process.env,
    ...(options.relaySecret === undefined ? {} : { relaySecret: options.relaySecret }),
    ...(options.instance === undefined ? {} : { instance: options.instance }),
  });
  const engine = await createRelayEngine({
    ...(options.now === undefined ? {} : { now: options.now }),
    ...(options.store === undefined ? {} : { store: options.store }),
  });
  const metrics = createRelayMetrics(() => engine.usage());
  const parts: Parts = {
    engine,
    auth,
    metrics,
    slots: createRequestSlots(),
    gate: createClientGate(options.allow ?? []),
    fail: failWith(engine, metrics),
    routes: new Set([
      RELAY_ENDPOINT_PATH,
      RELAY_PROFILE_PATH,
      SESSION_STATUS_PATH,
      SESSION_LIST_PATH,
      METRICS_PATH,
      ...(auth.instancePath === undefined ? [] : [auth.instancePath]),
    ]),
  };
  const stopMaintenance = options.maintenance === "caller" ? () => undefined : startMaintenance(engine);
  return {
    get epoch() {
      return engine.epoch;
    },
    engine,
    handle: (request, peer) => handle(parts, request, peer),
    async close() {
      stopMaintenance();
      await engine.close();
    },
  };
}
