/**
 * A relay that answers as Wolfpack's own relay engine does where its answers differ from ours: an
 * HTTP front (Bun.serve, loopback) before our real relay that passes everything through except the
 * seven cases measured against Wolfpack's engine:
 *
 * 1. a send whose envelope has an extra key → 400 `INVALID_REQUEST` (ours: 409 `SOURCE_MISMATCH`);
 * 2. connect with a malformed `epoch` → 409 `RELAY_RESET` (ours: 400);
 * 3. a binding endpoint with an extra key → served (ours: 409 `SOURCE_MISMATCH`);
 * 4. a resolve target with an extra key → 404 `TARGET_NOT_REGISTERED` (ours: 400);
 * 5. a bound `callerSession` over 512 characters → 404 `CALLER_NOT_FOUND` (ours: 400);
 * 6. connect with `leaseMs: null` → the default lease (ours: 400);
 * 7. at most `wolfpackHttpSlots` requests before their body is read (a request stuck in its body
 *    holds its slot), the next refused with an epochless 503 `RELAY_CAPACITY` without
 *    `retryAfterMs` (ours: 28 with it).
 *
 * Its errors are shaped as Wolfpack's (`message` = the code; the relay's epoch on every error but
 * the capacity refusal). For tests only: `pi-tasks conformance` must pass it with no features.
 */
import type { Server } from "bun";
import { ERROR_REGISTRY, type RegisteredErrorCode } from "../src/protocol/errors.ts";
import { HTTP_STATUS } from "../src/protocol/http.ts";
import { maxWireIdChars, relayBodyReadDeadlineMs, wolfpackHttpSlots } from "../src/protocol/limits.ts";
import { RELAY_ENDPOINT_PATH, RELAY_PROFILE, RELAY_PROFILE_PATH } from "../src/protocol/names.ts";
import { isRecord } from "../src/protocol/validate.ts";

export interface WolfpackAnswers {
  readonly url: string;
  /** Requests answered by each of the seven rules (1–7), to show each case was met. */
  readonly met: ReadonlyMap<number, number>;
  stop(): void;
}

const ENVELOPE_KEYS = new Set(["envelopeId", "protocolVersion", "source", "target", "createdAt", "payload"]);
const ENDPOINT_KEYS = new Set(["relay", "id"]);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const extraKeys = (value: unknown, allowed: ReadonlySet<string>) => isRecord(value) && Object.keys(value).some((key) => !allowed.has(key));

function wireError(code: RegisteredErrorCode, epoch: string | undefined, status?: number, close = false): Response {
  const row = ERROR_REGISTRY[code];
  const error = { code, message: code, retryable: row.retryable, ...(code === "RELAY_RESET" ? { mayHaveBeenDelivered: true } : {}) };
  const body = { ok: false, profile: RELAY_PROFILE, ...(epoch === undefined ? {} : { epoch }), error };
  const headers = { "cache-control": "no-store", ...(close ? { connection: "close" } : {}) };
  return Response.json(body, { status: status ?? row.httpStatus ?? 400, headers });
}

/** Which rule answers this request body itself (1, 2, 4, 5), rewrites it (3, 6), or none. */
function judge(
  body: Record<string, unknown>,
): { rule: number; code?: RegisteredErrorCode; rewritten?: Record<string, unknown> } | undefined {
  if (body.operation === "send" && extraKeys(body.envelope, ENVELOPE_KEYS)) return { rule: 1, code: "INVALID_REQUEST" };
  if (body.operation === "connect" && typeof body.epoch === "string" && !UUID.test(body.epoch)) return { rule: 2, code: "RELAY_RESET" };
  if (body.operation !== "connect" && extraKeys(body.endpoint, ENDPOINT_KEYS)) {
    const endpoint = body.endpoint as Record<string, unknown>;
    return { rule: 3, rewritten: { ...body, endpoint: { relay: endpoint.relay, id: endpoint.id } } };
  }
  if (body.operation === "resolve" && extraKeys(body.target, ENDPOINT_KEYS)) return { rule: 4, code: "TARGET_NOT_REGISTERED" };
  const caller = body.callerSession;
  if (body.operation !== "connect" && typeof caller === "string" && caller.length > maxWireIdChars)
    return { rule: 5, code: "CALLER_NOT_FOUND" };
  if (body.operation === "connect" && "leaseMs" in body && body.leaseMs === null) {
    const { leaseMs: _default, ...rest } = body;
    return { rule: 6, rewritten: rest };
  }
  return undefined;
}

/** What the front's answers need: the relay behind it, its epoch, and the count of each rule met. */
interface Front {
  readonly upstream: string;
  readonly epoch: string | undefined;
  count(rule: number): void;
}

/** Passes a request through as it came (headers and raw body), and its reply back as it came. */
async function forward(upstream: string, request: Request, path: string, body?: Uint8Array | string): Promise<Response> {
  const headers = new Headers(request.headers);
  headers.delete("host");
  headers.delete("content-length");
  const init: RequestInit = { method: request.method, headers, ...(body === undefined ? {} : { body }) };
  const reply = await fetch(`${upstream}${path}`, init);
  const replyBody = await reply.arrayBuffer();
  return new Response(replyBody, { status: reply.status, headers: reply.headers });
}

/** Wolfpack's profile: ours without `features` (it advertises none). */
async function profileReply(upstream: string, request: Request, path: string): Promise<Response> {
  const reply = await forward(upstream, request, path);
  if (reply.status !== 200) return reply;
  const { features: _none, ...rest } = (await reply.json()) as Record<string, unknown>;
  return Response.json(rest, { status: 200, headers: { "cache-control": "no-store" } });
}

/** The body, or undefined when it did not arrive within `relayBodyReadDeadlineMs` (as both relays bound it). */
async function bodyOf(request: Request): Promise<Uint8Array | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), relayBodyReadDeadlineMs);
  });
  try {
    const read = request.arrayBuffer().then((buffer) => new Uint8Array(buffer));
    return await Promise.race([read, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The front's answer to one request; `bodyRead` frees its pre-body slot once the body is in. */
async function answer(front: Front, request: Request, bodyRead: () => void): Promise<Response> {
  const { upstream, epoch } = front;
  const url = new URL(request.url);
  const path = `${url.pathname}${url.search}`;
  if (request.method === "GET" && url.pathname === RELAY_PROFILE_PATH && url.search === "") return profileReply(upstream, request, path);
  if (request.method !== "POST" || url.pathname !== RELAY_ENDPOINT_PATH) return forward(upstream, request, path);
  const raw = await bodyOf(request);
  bodyRead();
  // A body too late: 408, and the connection is closed (its rest would be read as a request).
  if (raw === undefined) return wireError("INVALID_REQUEST", epoch, HTTP_STATUS.requestTimeout, true);
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
  } catch {
    return forward(upstream, request, path, raw);
  }
  const rule = isRecord(body) ? judge(body) : undefined;
  if (rule === undefined) return forward(upstream, request, path, raw);
  front.count(rule.rule);
  if (rule.code !== undefined) return wireError(rule.code, epoch);
  return forward(upstream, request, path, JSON.stringify(rule.rewritten));
}

/** Starts the front on a free loopback port before the relay at `upstream` (its base URL). */
export async function startWolfpackAnswers(upstream: string): Promise<WolfpackAnswers> {
  const profile = (await (await fetch(`${upstream}${RELAY_PROFILE_PATH}`)).json()) as { epoch?: string };
  const epoch = profile.epoch;
  const met = new Map<number, number>();
  const count = (rule: number) => met.set(rule, (met.get(rule) ?? 0) + 1);
  const front: Front = { upstream, epoch, count };
  let inFlight = 0;

  const server: Server<undefined> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(request) {
      if (inFlight >= wolfpackHttpSlots) {
        count(7);
        return wireError("RELAY_CAPACITY", undefined);
      }
      // A pre-body slot: held until the body is read (or the request ends before it is).
      inFlight += 1;
      let held = true;
      const release = () => {
        if (held) inFlight -= 1;
        held = false;
      };
      try {
        return await answer(front, request, release);
      } catch {
        return wireError("RELAY_UNAVAILABLE", undefined);
      } finally {
        release();
      }
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, met, stop: () => server.stop(true) };
}
