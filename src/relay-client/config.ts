/**
 * Where the relay is: `PI_TASKS_RELAY_URL` (a bare origin), else
 * `http://127.0.0.1:${WOLFPACK_PORT ?? 18790}`. Plain HTTP only on loopback; HTTPS anywhere.
 */
import { TaskError } from "../protocol/errors.ts";
import { DEFAULT_RELAY_PORT, MAX_TCP_PORT, MIN_TCP_PORT } from "../protocol/limits.ts";
import { isLoopbackHttpUrl } from "./auth.ts";

function invalid(message: string, details: Record<string, unknown>): TaskError {
  return new TaskError("INVALID_CONFIGURATION", { message, details });
}

/** Validates a relay base URL: a bare https origin, or a bare http origin on loopback. */
export function normaliseRelayUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(`relay URL ${value} is not a URL`, { url: value });
  }
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
    throw invalid(`relay URL ${value} must be a bare origin (no path, query or credentials)`, { url: value });
  }
  if (url.protocol !== "https:" && !isLoopbackHttpUrl(url.href)) {
    throw invalid(`relay URL ${value} must be https, or http on 127.0.0.1, [::1] or localhost`, { url: value });
  }
  return url.origin;
}

export function relayUrlFromEnv(env: Record<string, string | undefined>): string {
  const explicit = env.PI_TASKS_RELAY_URL?.trim();
  if (explicit) return normaliseRelayUrl(explicit);
  const portText = env.WOLFPACK_PORT?.trim();
  if (!portText) return `http://127.0.0.1:${DEFAULT_RELAY_PORT}`;
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port < MIN_TCP_PORT || port > MAX_TCP_PORT) {
    throw invalid(`WOLFPACK_PORT must be an integer from ${MIN_TCP_PORT} to ${MAX_TCP_PORT}`, { WOLFPACK_PORT: portText });
  }
  return `http://127.0.0.1:${port}`;
}
