/**
 * The standalone relay: the HTTP handling of handler.ts on a `Bun.serve` socket (docs/wire.md).
 */
import type { Server } from "bun";
import { relayDefaultHost, relayIdleTimeoutSeconds } from "../protocol/limits.ts";
import type { RelayEngine } from "./engine.ts";
import { createRelayHandler, type RelayHandlerOptions } from "./handler.ts";

export interface RelayServerOptions extends RelayHandlerOptions {
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port?: number;
}

export interface RelayServer {
  readonly url: string;
  readonly port: number;
  readonly epoch: string;
  readonly engine: RelayEngine;
  stop(): Promise<void>;
}

export async function startRelayServer(options: RelayServerOptions = {}): Promise<RelayServer> {
  const handler = await createRelayHandler(options);
  const host = options.host ?? relayDefaultHost;
  const server: Server<undefined> = Bun.serve({
    hostname: host,
    port: options.port ?? 0,
    idleTimeout: relayIdleTimeoutSeconds,
    // The relay answers its own typed 413 (from Content-Length, or while streaming), so the HTTP
    // layer must never cut a body first with an untyped one.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    fetch: (request, bunServer) => handler.handle(request, bunServer.requestIP(request)?.address),
  });
  const port = server.port ?? 0;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    get epoch() {
      return handler.epoch;
    },
    engine: handler.engine,
    async stop() {
      await handler.close();
      await server.stop(true);
    },
  };
}
