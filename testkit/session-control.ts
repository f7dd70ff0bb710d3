/**
 * Reading the relay's session-control routes (`GET /api/session-control/list` and `…/status`):
 * which sessions are registered, one session's status, and waiting until a session registered.
 */
import { SESSION_LIST_PATH, SESSION_STATUS_PATH } from "../src/protocol/names.ts";
import type { TaskEndpoint } from "../src/protocol/schemas.ts";
import { eventually } from "./async.ts";

/** Live sessions the relay lists (`GET /api/session-control/list`). */
export async function relaySessions(
  url: string,
): Promise<{ session: string; taskEndpoint: TaskEndpoint; taskTransport: { leaseExpiresAt: string } }[]> {
  const reply = await fetch(`${url}${SESSION_LIST_PATH}`);
  const body = (await reply.json()) as { sessions?: unknown };
  if (reply.status !== 200 || !Array.isArray(body.sessions))
    throw new Error(`unexpected session list reply ${reply.status}: ${JSON.stringify(body)}`);
  return body.sessions as never;
}

/** The relay's status body for one session, or the HTTP status when it answered otherwise. */
export async function relaySessionStatus(url: string, session: string): Promise<{ status: number; body: any }> {
  const reply = await fetch(`${url}${SESSION_STATUS_PATH}?session=${encodeURIComponent(session)}`);
  return { status: reply.status, body: await reply.json().catch(() => undefined) };
}

/** The session's `taskEndpoint` from its status, or undefined (not 200, or no relay answering). */
export async function sessionEndpoint(relayUrl: string, session: string): Promise<TaskEndpoint | undefined> {
  const status = await relaySessionStatus(relayUrl, session).catch(() => undefined);
  return status?.status === 200 ? (status.body as { taskEndpoint?: TaskEndpoint } | undefined)?.taskEndpoint : undefined;
}

/** Polls the status route until the session is registered (optionally with an id other than `not`). */
export async function waitForEndpoint(
  relayUrl: string,
  session: string,
  options: { timeoutMs?: number; not?: string; pollMs?: number } = {},
): Promise<TaskEndpoint> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const found = await eventually(
    async () => {
      const endpoint = await sessionEndpoint(relayUrl, session);
      return endpoint !== undefined && endpoint.id !== options.not ? endpoint : undefined;
    },
    timeoutMs,
    options.pollMs ?? 40,
  );
  if (found === undefined) throw new Error(`session ${session} did not register at ${relayUrl} within ${timeoutMs} ms`);
  return found;
}
