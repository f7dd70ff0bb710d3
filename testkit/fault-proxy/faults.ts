/**
 * The fault proxy's faults as a table: one handler per fault kind (testkit/fault-proxy.ts says
 * what each does), given the rule that matched and the exchange it faults — the request, its
 * forwarding to the relay, and the parking where `hold` and `hang` wait.
 */
import { KiB, maxResponseBodyBytes } from "../../src/protocol/limits.ts";
import { RELAY_PROFILE } from "../../src/protocol/names.ts";
import type { Parking } from "./parking.ts";
import { chunkedResponse, droppedResponse, JSON_HEADERS, jsonResponse, padReply, slowBodyResponse } from "./responses.ts";
import type { FaultKind, FaultRule, ProxyRequest } from "./types.ts";
import { relayed } from "./upstream.ts";

/** The request a fault handles, and what a handler may do with it. */
export interface Exchange {
  readonly incoming: Request;
  readonly request: ProxyRequest;
  readonly parking: Parking;
  /** Forwards the request to the relay (counted as forwarded); the relay's reply, unread. */
  forward(): Promise<Response>;
}

type Handler<K extends FaultKind> = (rule: Extract<FaultRule, { kind: K }>, exchange: Exchange) => Response | Promise<Response>;

const FAULT_HANDLERS: { readonly [K in FaultKind]: Handler<K> } = {
  "drop-reply": async (_rule, { forward }) => {
    const upstream = await forward();
    const text = await upstream.text();
    return droppedResponse(upstream.status, text.slice(0, Math.max(1, Math.floor(text.length / 2))));
  },
  "status-429": (rule) =>
    jsonResponse(
      429,
      rule.body ?? { error: "rate limit exceeded" },
      rule.retryAfter === undefined ? {} : { "retry-after": rule.retryAfter },
    ),
  capacity: (rule) =>
    jsonResponse(rule.status ?? 503, {
      ok: false,
      profile: RELAY_PROFILE,
      ...(rule.epoch === undefined ? {} : { epoch: rule.epoch }),
      error: {
        code: "RELAY_CAPACITY",
        message: rule.message ?? "RELAY_CAPACITY",
        retryable: true,
        ...(rule.retryAfterMs === undefined ? {} : { retryAfterMs: rule.retryAfterMs }),
      },
    }),
  delay: async (rule, { forward }) => {
    await Bun.sleep(rule.ms);
    return relayed(await forward());
  },
  hang: async (_rule, { incoming, parking }) => {
    await parking.untilGoneOr(incoming.signal);
    return jsonResponse(504, { error: "hung request ended" });
  },
  hold: async (_rule, { incoming, parking, forward }) => {
    if (!(await parking.hold(incoming.signal))) return jsonResponse(504, { error: "held request ended" });
    return relayed(await forward());
  },
  "slow-body": async (rule, { forward }) => {
    const upstream = await forward();
    return slowBodyResponse(upstream.status, await upstream.text(), rule.ms);
  },
  "malformed-json": (rule) =>
    new Response(rule.text ?? '{"ok":true,"profile":"volatile-v1",', { status: rule.status ?? 200, headers: JSON_HEADERS }),
  "wrong-profile": (rule) => jsonResponse(200, { ok: true, profile: rule.profile ?? "durable-v2", epoch: crypto.randomUUID(), value: {} }),
  oversized: async (rule, { forward }) => {
    const upstream = await forward();
    const text = padReply(await upstream.text(), rule.bytes ?? maxResponseBodyBytes + KiB);
    return rule.chunked === true
      ? chunkedResponse(upstream.status, text)
      : new Response(text, { status: upstream.status, headers: JSON_HEADERS });
  },
  rewrite: async (rule, { forward, request }) => {
    const upstream = await forward();
    const text = await upstream.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    const rewritten = rule.rewrite(parsed, { status: upstream.status, operation: request.operation, request, headers: upstream.headers });
    return jsonResponse(rule.status ?? upstream.status, rewritten === undefined ? parsed : rewritten);
  },
  reply: (rule) => jsonResponse(rule.status, rule.body, rule.headers),
};

/** The response of `rule`'s fault to the exchange. */
export async function applyFault(rule: FaultRule, exchange: Exchange): Promise<Response> {
  const handler = FAULT_HANDLERS[rule.kind] as Handler<FaultKind>;
  return handler(rule as never, exchange);
}
