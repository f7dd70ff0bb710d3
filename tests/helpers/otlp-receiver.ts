/**
 * A small OTLP/HTTP traces receiver for tests: `POST /v1/traces` with an OTLP JSON body (what
 * @opentelemetry/exporter-trace-otlp-http sends), answered `200 {}`. It keeps every body as text (a
 * test can look for what must never be exported) and the spans flattened: hex ids, attributes as
 * plain values, events with theirs, and the resource's attributes.
 */
import type { Server } from "bun";

export type AttributeValue = string | number | boolean | undefined;

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** Empty or undefined for a root span. */
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly attributes: Record<string, AttributeValue>;
  readonly events: { readonly name: string; readonly attributes: Record<string, AttributeValue> }[];
  readonly status: { readonly code?: number; readonly message?: string };
  readonly resource: Record<string, AttributeValue>;
}

export interface OtlpReceiver {
  /** The base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`). */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Every request body received, as text. */
  readonly bodies: string[];
  /** Requests that were not a POST to /v1/traces with a JSON body. */
  readonly refused: string[];
  stop(): Promise<void>;
}

interface OtlpKeyValue {
  key: string;
  value?: { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
}

function attributesOf(list: readonly OtlpKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) {
    const raw = value?.stringValue ?? value?.intValue ?? value?.boolValue ?? value?.doubleValue;
    out[key] = value?.intValue === undefined ? raw : Number(value.intValue);
  }
  return out;
}

function collect(body: any, into: ReceivedSpan[]): void {
  for (const resourceSpans of body?.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        into.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId === "" ? undefined : span.parentSpanId,
          name: span.name,
          attributes: attributesOf(span.attributes),
          events: (span.events ?? []).map((event: any) => ({ name: event.name, attributes: attributesOf(event.attributes) })),
          status: span.status ?? {},
          resource,
        });
      }
    }
  }
}

export function startOtlpReceiver(): OtlpReceiver {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const refused: string[] = [];
  const server: Server<undefined> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(request) {
      const path = new URL(request.url).pathname;
      const type = request.headers.get("content-type") ?? "";
      if (request.method !== "POST" || path !== "/v1/traces" || !type.includes("application/json")) {
        refused.push(`${request.method} ${path} ${type}`);
        return new Response("not found", { status: 404 });
      }
      const text = await request.text();
      bodies.push(text);
      collect(JSON.parse(text), spans);
      return Response.json({});
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    spans,
    bodies,
    refused,
    stop: () => server.stop(true),
  };
}
