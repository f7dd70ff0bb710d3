/**
 * The relay on `Bun.serve` (only ever called under Bun; the global is not touched elsewhere). Each
 * answer says how long the socket stays open when idle (`Keep-Alive: timeout=…`, as Node's server
 * says on its own): without it a Node client (undici) closes an idle socket after its own 4 s, and
 * an idle Pi's every request — a watch, a pass — opened a new connection.
 */
import type { Server } from "bun";
import { relayIdleTimeoutSeconds } from "../../protocol/limits.ts";
import { type RelayHandler, replyResponse } from "../handler.ts";
import type { ListeningSocket } from "./listening.ts";

const KEEP_ALIVE = `timeout=${relayIdleTimeoutSeconds}`;

export async function serveOnBun(handler: RelayHandler, host: string, port: number): Promise<ListeningSocket> {
  const server: Server<undefined> = Bun.serve({
    hostname: host,
    port,
    idleTimeout: relayIdleTimeoutSeconds,
    // The relay answers its own typed 413 (from Content-Length, or while streaming), so the HTTP
    // layer must never cut a body first with an untyped one.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    fetch: async (request, bunServer) => {
      const response = replyResponse(await handler.handle(request, bunServer.requestIP(request)?.address));
      response.headers.set("keep-alive", KEEP_ALIVE);
      return response;
    },
  });
  return {
    port: server.port ?? 0,
    stop: () => server.stop(true),
  };
}
