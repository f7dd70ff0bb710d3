/**
 * A programmable HTTP fault proxy in front of a relay, for client fault tests and benchmarks.
 *
 * It listens on `127.0.0.1` (port 0 = a free port) and forwards every request to `target`
 * unchanged, except for requests matched by a rule, which get the rule's fault instead:
 *
 * ```ts
 * const proxy = createFaultProxy({ target: relay.url });
 * proxy.push({ operation: "send", kind: "drop-reply" });              // next send: forwarded, reply lost
 * proxy.push({ operation: "*", kind: "status-429", times: 10 });        // next 10 requests: Wolfpack 429
 * proxy.push({ operation: ["receive"], kind: "hold", times: Infinity }); // park until release()
 * const session = createVolatileTaskSession({ url: proxy.url, callerSession: "x" });
 * …
 * proxy.stats().operations.send; // { seen, forwarded, faulted }
 * await proxy.stop();
 * ```
 *
 * **Matching.** A request's operation is the `operation` field of its JSON body on the relay POST
 * route; `GET /api/task-relay/profile` is `"profile"`, `GET /api/session-control/status` is
 * `"session-status"`, anything else `"other"`. Rules are tried in push order; the first rule whose
 * `operation` matches (a name, a list of names, or `"*"`), whose optional `when` predicate accepts
 * the request and which has uses left (`times`, default 1; `Infinity` for always) is consumed.
 *
 * **Faults** (`kind`):
 * - `drop-reply`: forward (the operation takes effect), then send the relay's status and half of
 *   its body and reset the connection, so the client sees a network error mid-reply.
 * - `status-429`: answer 429 `{"error":"rate limit exceeded"}` (Wolfpack's generic bucket reply,
 *   no `profile`) without forwarding; `retryAfter` sets a `Retry-After` header, `body` replaces it.
 * - `capacity`: answer `{ok:false, profile:"volatile-v1", epoch?, error:{code:"RELAY_CAPACITY",
 *   message, retryable:true, retryAfterMs?}}` (503 unless `status` is given) without forwarding.
 * - `delay`: wait `ms`, then forward (even if the client gave up meanwhile, as a slow network would).
 * - `hang`: never answer; the request ends when the client disconnects or the proxy stops.
 * - `hold`: park the request until `release()` (or a client disconnect), then forward it.
 * - `slow-body`: forward, send the reply's headers and first half at once, the rest after `ms`
 *   (a deadline must cover the body, not just the headers).
 * - `malformed-json`: 200 (or `status`) with a body that is not JSON (`text`, default a truncated
 *   success object).
 * - `wrong-profile`: a JSON success body whose `profile` is another profile.
 * - `oversized`: forward, then pad the relay's real JSON reply with a `padding` member to exactly
 *   `bytes` (default `maxResponseBodyBytes` + 1 KiB), so only its size is wrong; sent with a
 *   `Content-Length` header, or `chunked: true` streamed without one.
 * - `rewrite`: forward, then replace the parsed JSON reply with `rewrite(body, context)` (mutate
 *   and return it, or return a new value; a returned string is sent as raw text). `status`
 *   overrides the upstream status.
 * - `reply`: answer `status` with `body` (JSON, or raw text if a string) and `headers`, without
 *   forwarding: typed relay errors, 401s, epochless errors, anything hand-made.
 *
 * **Observation.** `stats()` counts per operation the requests `seen`, `forwarded` to the relay
 * and `faulted`, plus requests currently in flight through the proxy and the maximum ever in
 * flight at once (from request arrival until the proxy's handler returns its response).
 * `requests()` is the arrival log with parsed bodies and headers (to check order or tokens), each
 * with `clientGoneAt` when its client disconnected before the proxy answered (e.g. a process that
 * exited with its long poll open).
 */
import type { Server } from "bun";
import { eventually } from "./async.ts";
import {
  KiB,
  maxResponseBodyBytes,
  RELAY_ENDPOINT_PATH,
  RELAY_PROFILE,
  RELAY_PROFILE_PATH,
  SESSION_STATUS_PATH,
} from "../src/protocol/limits.ts";

export type ProxyOperation = string;

export interface ProxyRequest {
  /** 1-based arrival number. */
  readonly seq: number;
  readonly operation: ProxyOperation;
  readonly method: string;
  /** Path and query as received. */
  readonly path: string;
  /** The parsed JSON body (POST), or undefined. */
  readonly body: unknown;
  /** The raw body text ("" for GET). */
  readonly text: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The fault applied, or undefined when passed through. */
  readonly fault: FaultKind | undefined;
  readonly receivedAt: number;
  /** `Date.now()` when the client disconnected before the proxy answered it; undefined otherwise. */
  readonly clientGoneAt?: number;
}

export interface RewriteContext {
  readonly status: number;
  readonly operation: ProxyOperation;
  readonly request: ProxyRequest;
  readonly headers: Headers;
}

export type Fault =
  | { readonly kind: "drop-reply" }
  | { readonly kind: "status-429"; readonly retryAfter?: string; readonly body?: unknown }
  | {
      readonly kind: "capacity";
      readonly retryAfterMs?: number;
      readonly epoch?: string;
      readonly message?: string;
      readonly status?: number;
    }
  | { readonly kind: "delay"; readonly ms: number }
  | { readonly kind: "hang" }
  | { readonly kind: "hold" }
  | { readonly kind: "slow-body"; readonly ms: number }
  | { readonly kind: "malformed-json"; readonly text?: string; readonly status?: number }
  | { readonly kind: "wrong-profile"; readonly profile?: string }
  | { readonly kind: "oversized"; readonly chunked?: boolean; readonly bytes?: number }
  | { readonly kind: "rewrite"; readonly rewrite: (body: any, context: RewriteContext) => unknown; readonly status?: number }
  | { readonly kind: "reply"; readonly status: number; readonly body: unknown; readonly headers?: Readonly<Record<string, string>> };

export type FaultKind = Fault["kind"];

export type FaultRule = Fault & {
  /** Operation name(s) to match, or `"*"` for every request. */
  readonly operation: ProxyOperation | readonly ProxyOperation[];
  /** How many matching requests this rule faults (default 1; `Infinity` = until cleared). */
  readonly times?: number;
  /** Extra predicate on the request (e.g. a body field). */
  readonly when?: (request: ProxyRequest) => boolean;
};

export interface RuleHandle {
  /** Requests this rule has faulted so far. */
  hits(): number;
  /** Uses left. */
  remaining(): number;
  /** Removes the rule (requests it already holds stay held until released). */
  cancel(): void;
}

export interface OperationStats {
  seen: number;
  forwarded: number;
  faulted: number;
}

export interface ProxyStats {
  readonly operations: Readonly<Record<ProxyOperation, Readonly<OperationStats>>>;
  readonly total: Readonly<OperationStats>;
  /** Requests whose proxy handler has not returned yet. */
  readonly inFlight: number;
  /** Highest `inFlight` since start (or the last `resetStats()`). */
  readonly maxInFlight: number;
  /** Requests parked by `hold` right now. */
  readonly held: number;
}

export interface FaultProxy {
  readonly url: string;
  readonly port: number;
  /** Adds a rule after the existing ones. */
  push(rule: FaultRule): RuleHandle;
  /** Removes every rule (held requests stay held until `release()` or `stop()`). */
  clear(): void;
  stats(): ProxyStats;
  /** Zeroes the counters and the log; `maxInFlight` restarts from the current `inFlight`. */
  resetStats(): void;
  requests(): readonly ProxyRequest[];
  /** Forwards the oldest `count` held requests (default: all); returns how many were released. */
  release(count?: number): number;
  /** Polls `predicate(stats)` every few ms until true; rejects after `timeoutMs` (default 5 s). */
  waitFor(predicate: (stats: ProxyStats) => boolean, timeoutMs?: number): Promise<void>;
  /** Ends held and hanging requests, stops listening and closes connections. */
  stop(): Promise<void>;
}

export interface FaultProxyOptions {
  /** Relay origin to forward to, e.g. `http://127.0.0.1:18790`. */
  readonly target: string;
  /** Listen port (default 0 = free port). */
  readonly port?: number;
}

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "content-encoding",
  "host",
  "te",
  "upgrade",
  "proxy-connection",
]);
const JSON_HEADERS = { "content-type": "application/json", "cache-control": "no-store" } as const;
const WAIT_POLL_MS = 5;
const DEFAULT_WAIT_MS = 5_000;
const OVERSIZE_CHUNK_BYTES = 16 * KiB;

function matches(rule: FaultRule, request: ProxyRequest): boolean {
  const wanted = rule.operation;
  const hit = wanted === "*" || (typeof wanted === "string" ? wanted === request.operation : wanted.includes(request.operation));
  return hit && (rule.when === undefined || rule.when(request));
}

function operationOf(method: string, pathname: string, body: unknown): ProxyOperation {
  if (method === "GET" && pathname === RELAY_PROFILE_PATH) return "profile";
  if (method === "GET" && pathname === SESSION_STATUS_PATH) return "session-status";
  if (
    pathname === RELAY_ENDPOINT_PATH &&
    typeof body === "object" &&
    body !== null &&
    typeof (body as { operation?: unknown }).operation === "string"
  ) {
    return (body as { operation: string }).operation;
  }
  return "other";
}

function forwardHeaders(headers: Headers): Headers {
  const out = new Headers();
  headers.forEach((value, name) => {
    if (!HOP_BY_HOP.has(name.toLowerCase())) out.set(name, value);
  });
  return out;
}

function jsonResponse(status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): Response {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return new Response(text, { status, headers: { ...JSON_HEADERS, ...headers } });
}

/** A response that sends its headers and a few bytes, then resets the connection. */
function droppedResponse(status: number, partial: string): Response {
  let sent = false;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(new TextEncoder().encode(partial));
        return;
      }
      // Erroring with `undefined` makes Bun close the socket without logging an error.
      controller.error(undefined);
    },
  });
  return new Response(stream, { status, headers: JSON_HEADERS });
}

/** The reply text padded with a `padding` member to exactly `bytes` UTF-8 bytes (ASCII padding). */
function padReply(text: string, bytes: number): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = { ok: true, profile: RELAY_PROFILE, original: text };
  }
  const base = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : { value: parsed };
  const frame = JSON.stringify({ ...base, padding: "" });
  const padding = "x".repeat(Math.max(0, bytes - new TextEncoder().encode(frame).byteLength));
  return JSON.stringify({ ...base, padding });
}

function chunkedResponse(status: number, text: string): Response {
  const bytes = new TextEncoder().encode(text);
  let offset = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.byteLength) {
        controller.close();
        return;
      }
      controller.enqueue(bytes.slice(offset, offset + OVERSIZE_CHUNK_BYTES));
      offset += OVERSIZE_CHUNK_BYTES;
    },
  });
  return new Response(stream, { status, headers: JSON_HEADERS });
}

export function createFaultProxy(options: FaultProxyOptions): FaultProxy {
  const target = options.target.replace(/\/+$/, "");
  interface LiveRule {
    readonly rule: FaultRule;
    remaining: number;
    hits: number;
  }
  let rules: LiveRule[] = [];
  let operations: Record<string, OperationStats> = {};
  let log: ProxyRequest[] = [];
  /** Arrival numbers of requests whose client disconnected before the answer, and when. */
  const clientGone = new Map<number, number>();
  let seq = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let stopping = false;
  /** Parked `hold` requests, oldest first: resolve(true) = forward, resolve(false) = give up. */
  const held: Array<(forward: boolean) => void> = [];
  /** Wakers of `hang`/`hold` waits, so stop() can end them. */
  const stopWakers = new Set<() => void>();

  const counter = (operation: string): OperationStats => (operations[operation] ??= { seen: 0, forwarded: 0, faulted: 0 });

  function take(request: ProxyRequest): FaultRule | undefined {
    for (const live of rules) {
      if (live.remaining <= 0 || !matches(live.rule, request)) continue;
      live.remaining -= 1;
      live.hits += 1;
      return live.rule;
    }
    return undefined;
  }

  async function forward(request: ProxyRequest, method: string, headers: Headers): Promise<Response> {
    counter(request.operation).forwarded += 1;
    return fetch(`${target}${request.path}`, {
      method,
      headers: forwardHeaders(headers),
      ...(method === "GET" || method === "HEAD" ? {} : { body: request.text }),
      redirect: "manual",
    });
  }

  async function relay(upstream: Response): Promise<Response> {
    const text = await upstream.text();
    const headers: Record<string, string> = {};
    upstream.headers.forEach((value, name) => {
      if (!HOP_BY_HOP.has(name.toLowerCase())) headers[name] = value;
    });
    return new Response(text, { status: upstream.status, headers });
  }

  /** Resolves when the client disconnects, the proxy stops, or `extra` resolves. */
  function untilGoneOr<T>(signal: AbortSignal, extra?: Promise<T>): Promise<T | "gone"> {
    return new Promise((resolve) => {
      const gone = () => {
        cleanup();
        resolve("gone");
      };
      const cleanup = () => {
        signal.removeEventListener("abort", gone);
        stopWakers.delete(gone);
      };
      if (signal.aborted || stopping) return resolve("gone");
      signal.addEventListener("abort", gone, { once: true });
      stopWakers.add(gone);
      extra?.then((value) => {
        cleanup();
        resolve(value);
      });
    });
  }

  async function handle(incoming: Request, rule: FaultRule | undefined, request: ProxyRequest): Promise<Response> {
    if (rule === undefined) return relay(await forward(request, incoming.method, incoming.headers));
    counter(request.operation).faulted += 1;
    switch (rule.kind) {
      case "drop-reply": {
        const upstream = await forward(request, incoming.method, incoming.headers);
        const text = await upstream.text();
        return droppedResponse(upstream.status, text.slice(0, Math.max(1, Math.floor(text.length / 2))));
      }
      case "status-429":
        return jsonResponse(
          429,
          rule.body ?? { error: "rate limit exceeded" },
          rule.retryAfter === undefined ? {} : { "retry-after": rule.retryAfter },
        );
      case "capacity":
        return jsonResponse(rule.status ?? 503, {
          ok: false,
          profile: RELAY_PROFILE,
          ...(rule.epoch === undefined ? {} : { epoch: rule.epoch }),
          error: {
            code: "RELAY_CAPACITY",
            message: rule.message ?? "RELAY_CAPACITY",
            retryable: true,
            ...(rule.retryAfterMs === undefined ? {} : { retryAfterMs: rule.retryAfterMs }),
          },
        });
      case "delay":
        await Bun.sleep(rule.ms);
        return relay(await forward(request, incoming.method, incoming.headers));
      case "hang":
        await untilGoneOr(incoming.signal);
        return jsonResponse(504, { error: "hung request ended" });
      case "hold": {
        let release: (forward: boolean) => void = () => undefined;
        const released = new Promise<boolean>((resolve) => {
          release = resolve;
        });
        held.push(release);
        const outcome = await untilGoneOr(incoming.signal, released);
        const index = held.indexOf(release);
        if (index >= 0) held.splice(index, 1);
        if (outcome !== true) return jsonResponse(504, { error: "held request ended" });
        return relay(await forward(request, incoming.method, incoming.headers));
      }
      case "slow-body": {
        const upstream = await forward(request, incoming.method, incoming.headers);
        const bytes = new TextEncoder().encode(await upstream.text());
        const half = Math.max(1, Math.floor(bytes.byteLength / 2));
        let step = 0;
        const stream = new ReadableStream<Uint8Array>({
          async pull(controller) {
            step += 1;
            if (step === 1) return controller.enqueue(bytes.slice(0, half));
            if (step === 2) {
              await Bun.sleep(rule.ms);
              try {
                controller.enqueue(bytes.slice(half));
              } catch {
                // The client went away meanwhile.
              }
              return;
            }
            try {
              controller.close();
            } catch {
              // Already cancelled by the client.
            }
          },
        });
        return new Response(stream, { status: upstream.status, headers: JSON_HEADERS });
      }
      case "malformed-json":
        return new Response(rule.text ?? '{"ok":true,"profile":"volatile-v1",', { status: rule.status ?? 200, headers: JSON_HEADERS });
      case "wrong-profile":
        return jsonResponse(200, { ok: true, profile: rule.profile ?? "durable-v2", epoch: crypto.randomUUID(), value: {} });
      case "oversized": {
        const upstream = await forward(request, incoming.method, incoming.headers);
        const text = padReply(await upstream.text(), rule.bytes ?? maxResponseBodyBytes + KiB);
        return rule.chunked === true
          ? chunkedResponse(upstream.status, text)
          : new Response(text, { status: upstream.status, headers: JSON_HEADERS });
      }
      case "rewrite": {
        const upstream = await forward(request, incoming.method, incoming.headers);
        const text = await upstream.text();
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = text;
        }
        const rewritten = rule.rewrite(parsed, {
          status: upstream.status,
          operation: request.operation,
          request,
          headers: upstream.headers,
        });
        return jsonResponse(rule.status ?? upstream.status, rewritten === undefined ? parsed : rewritten);
      }
      case "reply":
        return jsonResponse(rule.status, rule.body, rule.headers);
    }
  }

  const server: Server<undefined> = Bun.serve({
    hostname: "127.0.0.1",
    port: options.port ?? 0,
    // Held and hanging requests may outlive Bun's default 10 s idle timeout.
    idleTimeout: 0,
    async fetch(incoming) {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        const url = new URL(incoming.url);
        const text = incoming.method === "GET" || incoming.method === "HEAD" ? "" : await incoming.text();
        let body: unknown;
        try {
          body = text.length === 0 ? undefined : JSON.parse(text);
        } catch {
          body = undefined;
        }
        const headers: Record<string, string> = {};
        incoming.headers.forEach((value, name) => {
          headers[name.toLowerCase()] = value;
        });
        const draft: ProxyRequest = {
          seq: ++seq,
          operation: operationOf(incoming.method, url.pathname, body),
          method: incoming.method,
          path: `${url.pathname}${url.search}`,
          body,
          text,
          headers,
          fault: undefined,
          receivedAt: Date.now(),
        };
        const rule = stopping ? undefined : take(draft);
        const request: ProxyRequest = { ...draft, fault: rule?.kind };
        log.push(request);
        counter(request.operation).seen += 1;
        if (stopping) return jsonResponse(503, { error: "fault proxy stopping" });
        let answered = false;
        incoming.signal.addEventListener("abort", () => {
          if (!answered) clientGone.set(request.seq, Date.now());
        });
        try {
          return await handle(incoming, rule, request);
        } finally {
          answered = true;
        }
      } catch (error) {
        return jsonResponse(502, { error: `fault proxy: ${error instanceof Error ? error.message : String(error)}` });
      } finally {
        inFlight -= 1;
      }
    },
  });

  const port = server.port ?? 0;

  function snapshot(): ProxyStats {
    const copy: Record<string, OperationStats> = {};
    const total: OperationStats = { seen: 0, forwarded: 0, faulted: 0 };
    for (const [name, value] of Object.entries(operations)) {
      copy[name] = { ...value };
      total.seen += value.seen;
      total.forwarded += value.forwarded;
      total.faulted += value.faulted;
    }
    return { operations: copy, total, inFlight, maxInFlight, held: held.length };
  }

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    push(rule) {
      const live: LiveRule = { rule, remaining: rule.times ?? 1, hits: 0 };
      rules.push(live);
      return {
        hits: () => live.hits,
        remaining: () => live.remaining,
        cancel: () => {
          rules = rules.filter((candidate) => candidate !== live);
        },
      };
    },
    clear() {
      rules = [];
    },
    stats: snapshot,
    resetStats() {
      operations = {};
      log = [];
      clientGone.clear();
      maxInFlight = inFlight;
    },
    requests: () =>
      log.map((request) => (clientGone.has(request.seq) ? { ...request, clientGoneAt: clientGone.get(request.seq) } : request)),
    release(count = Number.POSITIVE_INFINITY) {
      let released = 0;
      while (held.length > 0 && released < count) {
        held.shift()!(true);
        released += 1;
      }
      return released;
    },
    async waitFor(predicate, timeoutMs = DEFAULT_WAIT_MS) {
      if (!(await eventually(() => predicate(snapshot()), timeoutMs, WAIT_POLL_MS))) {
        throw new Error(`fault proxy: condition not met within ${timeoutMs} ms: ${JSON.stringify(snapshot())}`);
      }
    },
    async stop() {
      if (stopping) return;
      stopping = true;
      rules = [];
      for (const waker of [...stopWakers]) waker();
      while (held.length > 0) held.shift()!(false);
      await server.stop(true);
    },
  };
}
