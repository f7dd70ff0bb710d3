/**
 * The relay on `Bun.serve` (only ever called under Bun; the global is not touched elsewhere).
 */
import type { Server } from "bun";
import { relayIdleTimeoutSeconds } from "../../protocol/limits.ts";
import { type RelayHandler, replyResponse } from "../handler.ts";
import type { ListeningSocket } from "./listening.ts";

export async function serveOnBun(handler: RelayHandler, host: string, port: number): Promise<ListeningSocket> {
  const server: Server<undefined> = Bun.serve({
    hostname: host,
    port,
    idleTimeout: relayIdleTimeoutSeconds,
    // The relay answers its own typed 413 (from Content-Length, or while streaming), so the HTTP
    // layer must never cut a body first with an untyped one.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    fetch: async (request, bunServer) => replyResponse(await handler.handle(request, bunServer.requestIP(request)?.address)),
  });
  return {
    port: server.port ?? 0,
    stop: () => server.stop(true),
  };
}
