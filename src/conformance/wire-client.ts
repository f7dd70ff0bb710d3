/**
 * Raw `volatile-v1` wire calls for the conformance suite and the relay tests: plain HTTP against
 * a base URL, no pi-tasks client logic in between, so the checks see exactly what the relay
 * answers.
 *
 * - `postJson` / `postBody` / `getPath`: one HTTP exchange, the reply parsed when it is JSON;
 * - `WireSession`: a connected session (`callerSession` + `generation` → endpoint) that issues
 *   bound operations with its binding (and, for a protected registration, its `bindingSecret`);
 * - `makeEnvelope`: a wire envelope with a fresh `createdAt = new Date().toISOString()`;
 * - `openRawRequest`: a raw socket request whose body is sent only partly (slow-body tests);
 * - `useCredentials`: the `authorization` every request to one relay carries unless it sets its
 *   own (a relay that asks for credentials: the user's own, with its relay secret).
 */
import { request as nodeHttpRequest } from "node:http";
import { request as nodeHttpsRequest } from "node:https";
import { RELAY_ENDPOINT_PATH, RELAY_ID, RELAY_PROFILE, RELAY_PROFILE_PATH, WIRE_PROTOCOL_VERSION } from "../protocol/names.ts";
import { WIRE_TEST_TIMEOUT_MS } from "./timing.ts";

export interface WireEndpoint {
  readonly relay: string;
  readonly id: string;
}

export interface WireEnvelopeValue {
  readonly envelopeId: string;
  readonly protocolVersion: number;
  readonly source: WireEndpoint;
  readonly target: WireEndpoint;
  readonly payload: unknown;
  readonly createdAt: string;
}

export interface WireReply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The parsed JSON body, or `undefined` when the body is not JSON. */
  readonly body: any;
  /** Wall time from sending the request to having read the whole reply. */
  readonly elapsedMs: number;
  /** `performance.now()` when the whole reply had been read. */
  readonly receivedAt: number;
}

export interface RequestOptions {
  /** Extra headers (e.g. `origin`, `authorization`). */
  readonly headers?: Record<string, string>;
  /** `Content-Type` of a POST; `null` sends none. Default `application/json`. */
  readonly contentType?: string | null;
  readonly timeoutMs?: number;
  /** Path below the base URL (default: the relay endpoint path). */
  readonly path?: string;
  /** Aborts the request (combined with the timeout). */
  readonly signal?: AbortSignal;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function joinUrl(baseUrl: string, path: string): string {
  return `${baseUrl.replace(/\/+$/, "")}${path}`;
}

/** An `authorization` header value for one request (a fresh token each time), by relay origin. */
const credentials = new Map<string, () => string>();

/** Every request to the relay at `baseUrl` without an `authorization` of its own carries `authorization()`. */
export function useCredentials(baseUrl: string, authorization: () => string): void {
  credentials.set(new URL(baseUrl).origin, authorization);
}

function withCredentials(url: string | URL, headers: RequestInit["headers"]): Headers {
  const authorization = credentials.get(new URL(url).origin);
  const given = new Headers(headers);
  if (authorization !== undefined && !given.has("authorization")) given.set("authorization", authorization());
  return given;
}

export async function httpRequest(url: string, init: RequestInit & { timeoutMs?: number; signal?: AbortSignal }): Promise<WireReply> {
  const timeout = AbortSignal.timeout(init.timeoutMs ?? WIRE_TEST_TIMEOUT_MS);
  const signal = init.signal === undefined ? timeout : AbortSignal.any([timeout, init.signal]);
  const headers = withCredentials(url, init.headers);
  const started = performance.now();
  const response = await fetch(url, { ...init, headers, signal });
  const text = await response.text();
  const receivedAt = performance.now();
  return { status: response.status, headers: response.headers, text, body: parseJson(text), elapsedMs: receivedAt - started, receivedAt };
}

/** POSTs raw bytes or text to the relay endpoint (or `options.path`). */
export function postBody(
  baseUrl: string,
  body: string | Uint8Array | ReadableStream<Uint8Array>,
  options: RequestOptions = {},
): Promise<WireReply> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  const contentType = options.contentType === undefined ? "application/json" : options.contentType;
  if (contentType !== null) headers["content-type"] = contentType;
  // fetch labels a string body text/plain by itself; bytes go out without a Content-Type.
  const payload = contentType === null && typeof body === "string" ? new TextEncoder().encode(body) : body;
  return httpRequest(joinUrl(baseUrl, options.path ?? RELAY_ENDPOINT_PATH), {
    method: "POST",
    headers,
    body: payload as RequestInit["body"],
    // Node's fetch sends a stream body only when told it may (`duplex: "half"`); Bun accepts it too.
    ...(payload instanceof ReadableStream ? ({ duplex: "half" } as RequestInit) : {}),
    timeoutMs: options.timeoutMs,
    signal: options.signal,
  });
}

export function postJson(baseUrl: string, value: unknown, options: RequestOptions = {}): Promise<WireReply> {
  return postBody(baseUrl, JSON.stringify(value), options);
}

export function getPath(
  baseUrl: string,
  path: string,
  options: Omit<RequestOptions, "path" | "contentType"> & { method?: string } = {},
): Promise<WireReply> {
  return httpRequest(joinUrl(baseUrl, path), {
    method: options.method ?? "GET",
    headers: options.headers ?? {},
    timeoutMs: options.timeoutMs,
    signal: options.signal,
  });
}

export function getProfile(baseUrl: string, options: Omit<RequestOptions, "path" | "contentType"> = {}): Promise<WireReply> {
  return getPath(baseUrl, RELAY_PROFILE_PATH, options);
}

/** A session name unique to this test run. */
export function uniqueName(label: string): string {
  return `${label}-${crypto.randomUUID()}`;
}

export function localEndpoint(id: string = crypto.randomUUID()): WireEndpoint {
  return { relay: RELAY_ID, id };
}

export interface EnvelopeOptions {
  readonly envelopeId?: string;
  readonly payload?: unknown;
  /** Default: `new Date().toISOString()` at the time of the call. */
  readonly createdAt?: string;
}

export function makeEnvelope(source: WireEndpoint, target: WireEndpoint, options: EnvelopeOptions = {}): WireEnvelopeValue {
  return {
    envelopeId: options.envelopeId ?? crypto.randomUUID(),
    protocolVersion: WIRE_PROTOCOL_VERSION,
    source: { relay: source.relay, id: source.id },
    target: { relay: target.relay, id: target.id },
    payload: options.payload ?? { note: "conformance" },
    createdAt: options.createdAt ?? new Date().toISOString(),
  };
}

export interface ConnectOptions {
  readonly callerSession?: string;
  readonly generation?: string;
  readonly leaseMs?: number;
  readonly epoch?: string;
  readonly protocolVersions?: readonly number[];
  readonly label?: string;
  readonly headers?: Record<string, string>;
  /**
   * `binding-secret-v1`: the client's own secret (e.g. `mintBindingSecret()`), which protects the
   * registration and lets a connect of the same client renew or replace a live protected one.
   */
  readonly bindingSecret?: string;
}

export function connectRequest(options: ConnectOptions & { callerSession: string; generation: string }): Record<string, unknown> {
  return {
    operation: "connect",
    profile: RELAY_PROFILE,
    callerSession: options.callerSession,
    generation: options.generation,
    protocolVersions: options.protocolVersions ?? [WIRE_PROTOCOL_VERSION],
    ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
    ...(options.epoch === undefined ? {} : { epoch: options.epoch }),
    ...(options.bindingSecret === undefined ? {} : { bindingSecret: options.bindingSecret }),
  };
}

/** Thrown by the helpers when the relay refuses something a test expected to succeed. */
export class WireFailure extends Error {
  readonly operation: string;
  readonly reply: WireReply;

  constructor(operation: string, reply: WireReply) {
    super(`${operation} failed: HTTP ${reply.status} ${reply.text.slice(0, 500)}`);
    this.name = "WireFailure";
    this.operation = operation;
    this.reply = reply;
  }
}

/** The `value` of a successful reply; throws `WireFailure` otherwise. */
export function valueOf(operation: string, reply: WireReply): any {
  if (reply.status !== 200 || reply.body?.ok !== true) throw new WireFailure(operation, reply);
  return reply.body.value;
}

export interface Binding {
  readonly epoch: string;
  readonly callerSession: string;
  readonly endpoint: WireEndpoint;
}

/** A session connected to a relay over the raw wire. */
export class WireSession {
  readonly baseUrl: string;
  readonly callerSession: string;
  readonly generation: string;
  epoch: string;
  endpoint: WireEndpoint;
  leaseExpiresAt: string;
  private readonly headers: Record<string, string>;
  /** The secret this session connected with (`binding-secret-v1`), if any; the relay never sends it back. */
  readonly bindingSecret: string | undefined;

  // Fields assigned one by one, not as constructor parameter properties: Node's type stripping
  // runs this file as it is, and it has no parameter properties.
  private constructor(state: {
    baseUrl: string;
    callerSession: string;
    generation: string;
    epoch: string;
    endpoint: WireEndpoint;
    leaseExpiresAt: string;
    headers: Record<string, string>;
    bindingSecret: string | undefined;
  }) {
    this.baseUrl = state.baseUrl;
    this.callerSession = state.callerSession;
    this.generation = state.generation;
    this.epoch = state.epoch;
    this.endpoint = state.endpoint;
    this.leaseExpiresAt = state.leaseExpiresAt;
    this.headers = state.headers;
    this.bindingSecret = state.bindingSecret;
  }

  static async connect(baseUrl: string, options: ConnectOptions = {}): Promise<WireSession> {
    const callerSession = options.callerSession ?? uniqueName(options.label ?? "session");
    const generation = options.generation ?? crypto.randomUUID();
    const reply = await postJson(baseUrl, connectRequest({ ...options, callerSession, generation }), { headers: options.headers });
    const value = valueOf("connect", reply);
    return new WireSession({
      baseUrl,
      callerSession,
      generation,
      epoch: reply.body.epoch,
      endpoint: value.endpoint,
      leaseExpiresAt: value.leaseExpiresAt,
      headers: options.headers ?? {},
      bindingSecret: options.bindingSecret,
    });
  }

  get binding(): Binding {
    return { epoch: this.epoch, callerSession: this.callerSession, endpoint: this.endpoint };
  }

  /**
   * The full request body of a bound operation (binding and secret first, then `fields`, which may
   * override them; `bindingSecret: undefined` leaves the secret out).
   */
  request(operation: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      operation,
      profile: RELAY_PROFILE,
      ...this.binding,
      ...(this.bindingSecret === undefined ? {} : { bindingSecret: this.bindingSecret }),
      ...fields,
    };
  }

  call(operation: string, fields: Record<string, unknown> = {}, options: RequestOptions = {}): Promise<WireReply> {
    return postJson(this.baseUrl, this.request(operation, fields), {
      ...options,
      headers: { ...this.headers, ...(options.headers ?? {}) },
    });
  }

  /** Runs a bound operation and returns its `value`; throws `WireFailure` on any error. */
  async ok(operation: string, fields: Record<string, unknown> = {}, options: RequestOptions = {}): Promise<any> {
    return valueOf(operation, await this.call(operation, fields, options));
  }

  /**
   * Re-sends `connect` with this session's name and generation (a renewal, or a retry after a lost
   * reply); a protected session sends its secret again unless `options` say otherwise
   * (`bindingSecret: undefined` leaves it out).
   */
  renew(options: Omit<ConnectOptions, "callerSession" | "generation"> = {}): Promise<WireReply> {
    const own = this.bindingSecret === undefined ? {} : { bindingSecret: this.bindingSecret };
    return postJson(this.baseUrl, connectRequest({ ...own, ...options, callerSession: this.callerSession, generation: this.generation }), {
      headers: this.headers,
    });
  }

  envelopeTo(target: WireEndpoint, options: EnvelopeOptions = {}): WireEnvelopeValue {
    return makeEnvelope(this.endpoint, target, options);
  }

  send(envelope: WireEnvelopeValue | Record<string, unknown>, options: RequestOptions = {}): Promise<WireReply> {
    return this.call("send", { envelope }, options);
  }

  /** Sends a fresh envelope to `target` and returns it with its acceptance; throws on refusal. */
  async sendOk(
    target: WireEndpoint,
    options: EnvelopeOptions = {},
  ): Promise<{ envelope: WireEnvelopeValue; accepted: any; reply: WireReply }> {
    const envelope = this.envelopeTo(target, options);
    const reply = await this.send(envelope);
    return { envelope, accepted: valueOf("send", reply), reply };
  }

  receive(cursor: string, limit?: number): Promise<WireReply> {
    return this.call("receive", { cursor, ...(limit === undefined ? {} : { limit }) });
  }

  async page(cursor: string, limit?: number): Promise<any> {
    return valueOf("receive", await this.receive(cursor, limit));
  }

  /** Every unacknowledged delivery after `cursor`, following `nextCursor` page by page. */
  async drain(cursor = "0"): Promise<{ cursor: string; envelope: WireEnvelopeValue }[]> {
    const all: { cursor: string; envelope: WireEnvelopeValue }[] = [];
    let at = cursor;
    for (;;) {
      const page = await this.page(at);
      all.push(...page.deliveries);
      if (!page.hasMore) return all;
      if (page.nextCursor === at) throw new Error(`receive made no progress at cursor ${at}`);
      at = page.nextCursor;
    }
  }

  acknowledge(envelopeId: string): Promise<WireReply> {
    return this.call("acknowledge", { envelopeId });
  }

  disconnect(): Promise<WireReply> {
    return this.call("disconnect");
  }
}

// ---------------------------------------------------------------------------------------------
// Raw sockets
// ---------------------------------------------------------------------------------------------

export interface RawHttpReply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly body: any;
}

export interface RawRequest {
  /** Resolves once the request head and the partial body were handed to the socket. */
  readonly sent: Promise<void>;
  /** Resolves with the parsed reply when the socket closed, or `undefined` if it closed without one. */
  readonly reply: Promise<RawHttpReply | undefined>;
  /** True once the socket closed (the server answered and hung up, or `close()` was called). */
  closed(): boolean;
  /** Destroys the socket. */
  close(): void;
}

export interface RawRequestOptions {
  readonly method?: string;
  readonly path?: string;
  readonly headers?: Record<string, string>;
  /** The declared `Content-Length`. */
  readonly contentLength: number;
  /** The part of the body actually sent (shorter than `contentLength` for a slow body). */
  readonly body: string;
}

/**
 * Sends a request head and (part of) a body to the relay with node's own HTTP client, then keeps the
 * request open: used to hold requests in the relay's body-read phase. The reply, whatever its
 * framing (a `Content-Length`, chunked, or until the connection closes), is decoded by node.
 */
export function openRawRequest(baseUrl: string, options: RawRequestOptions): RawRequest {
  const url = new URL(options.path ?? RELAY_ENDPOINT_PATH, baseUrl);
  let isClosed = false;
  const request = (url.protocol === "https:" ? nodeHttpsRequest : nodeHttpRequest)(url, {
    method: options.method ?? "POST",
    // A connection of its own: a held request never shares a socket.
    agent: false,
    headers: Object.fromEntries(
      withCredentials(url, {
        "content-type": "application/json",
        "content-length": String(options.contentLength),
        ...(options.headers ?? {}),
      }),
    ),
  });
  request.on("error", () => undefined);
  const sent = new Promise<void>((resolveSent, rejectSent) => {
    request.once("error", rejectSent);
    request.write(options.body, (error) => (error ? rejectSent(error) : resolveSent()));
  });
  sent.catch(() => undefined);
  const reply = new Promise<RawHttpReply | undefined>((resolveReply) => {
    let answered: { status: number; headers: Headers; text: string } | undefined;
    request.on("response", (response) => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(response.headers))
        for (const item of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, item);
      const current = { status: response.statusCode ?? 0, headers, text: "" };
      answered = current;
      response.setEncoding("utf8");
      response.on("data", (text: string) => {
        current.text += text;
      });
      response.on("error", () => undefined);
    });
    request.on("close", () => {
      isClosed = true;
      resolveReply(answered === undefined ? undefined : { ...answered, body: parseJson(answered.text) });
    });
  });
  return {
    sent,
    reply,
    closed: () => isClosed,
    close: () => {
      isClosed = true;
      request.destroy();
    },
  };
}
