/**
 * The standalone relay: the HTTP handling of handler.ts on a socket of the runtime that runs it —
 * `Bun.serve` under Bun (socket/bun.ts), `node:http` under Node (socket/node.ts). Both answer the
 * same bytes; docs/wire.md describes them and docs/architecture.md says why there are two.
 */
import { DEFAULT_RELAY_HOST } from "../protocol/names.ts";
import type { RelayEngine } from "./engine.ts";
import { createRelayHandler, type RelayHandlerOptions } from "./handler.ts";
import { serveOnBun } from "./socket/bun.ts";
import { serveOnNode } from "./socket/node.ts";

export interface RelayServerOptions extends RelayHandlerOptions {
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port?: number;
  /** The socket to serve on; default the running runtime's own (`bun` under Bun, else `node`). */
  readonly socket?: RelaySocketKind;
}

export type RelaySocketKind = "bun" | "node";

export interface RelayServer {
  readonly url: string;
  readonly port: number;
  readonly epoch: string;
  readonly engine: RelayEngine;
  /** Which socket serves it. */
  readonly socket: RelaySocketKind;
  stop(): Promise<void>;
}

/** The socket a relay started in this process uses by default. */
export function runtimeSocket(): RelaySocketKind {
  return process.versions.bun === undefined ? "node" : "bun";
}

export async function startRelayServer(options: RelayServerOptions = {}): Promise<RelayServer> {
  const handler = await createRelayHandler(options);
  const host = options.host ?? DEFAULT_RELAY_HOST;
  const socket = options.socket ?? runtimeSocket();
  let listening: { port: number; stop(): Promise<void> };
  try {
    listening = await (socket === "bun" ? serveOnBun : serveOnNode)(handler, host, options.port ?? 0);
  } catch (error) {
    await handler.close();
    throw error;
  }
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${listening.port}`,
    port: listening.port,
    socket,
    get epoch() {
      return handler.epoch;
    },
    engine: handler.engine,
    async stop() {
      await handler.close();
      await listening.stop();
    },
  };
}
