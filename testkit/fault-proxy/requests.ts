/**
 * How the fault proxy reads a request that arrives: its body (parsed when JSON), its headers,
 * and its operation — the `operation` field of a relay POST body, `"profile"` and
 * `"session-status"` for those GET routes, `"other"` for anything else — which rules match on.
 */
import { RELAY_ENDPOINT_PATH, RELAY_PROFILE_PATH, SESSION_STATUS_PATH } from "../../src/protocol/names.ts";
import type { ProxyOperation, ProxyRequest } from "./types.ts";

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

/** The request as logged (no fault yet); `nextSeq` numbers it once its body has arrived. */
export async function readRequest(incoming: Request, nextSeq: () => number): Promise<ProxyRequest> {
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
  return {
    seq: nextSeq(),
    operation: operationOf(incoming.method, url.pathname, body),
    method: incoming.method,
    path: `${url.pathname}${url.search}`,
    body,
    text,
    headers,
    fault: undefined,
    receivedAt: Date.now(),
  };
}
