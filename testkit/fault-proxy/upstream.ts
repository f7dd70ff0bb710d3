/**
 * The fault proxy's side toward the relay: a request forwarded as it came (hop-by-hop headers
 * dropped, redirects not followed), and the relay's reply passed back with its status and headers.
 */
import type { ProxyRequest } from "./types.ts";

export const HOP_BY_HOP = new Set([
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

function forwardHeaders(headers: Headers): Headers {
  const out = new Headers();
  headers.forEach((value, name) => {
    if (!HOP_BY_HOP.has(name.toLowerCase())) out.set(name, value);
  });
  return out;
}

/** Sends `request` on to `target` (the relay origin), with the incoming method and headers. */
export function forwardTo(target: string, request: ProxyRequest, incoming: Request): Promise<Response> {
  const method = incoming.method;
  return fetch(`${target}${request.path}`, {
    method,
    headers: forwardHeaders(incoming.headers),
    ...(method === "GET" || method === "HEAD" ? {} : { body: request.text }),
    redirect: "manual",
  });
}

/** The relay's reply, read whole and answered with its status and end-to-end headers. */
export async function relayed(upstream: Response): Promise<Response> {
  const text = await upstream.text();
  const headers: Record<string, string> = {};
  upstream.headers.forEach((value, name) => {
    if (!HOP_BY_HOP.has(name.toLowerCase())) headers[name] = value;
  });
  return new Response(text, { status: upstream.status, headers });
}
