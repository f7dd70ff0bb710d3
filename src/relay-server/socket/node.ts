/**
 * The relay on `node:http`: each request becomes a `RelayRequest` (headers read in place, the body
 * read in one piece when its length is declared, as a web stream only when it is not), each
 * `RelayReply` is written as it is. The client's going away aborts the request's signal, which ends
 * a held `watch`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { msPerSecond, relayIdleTimeoutSeconds } from "../../protocol/limits.ts";
import type { RelayHandler, RelayReply, RelayRequest } from "../handler.ts";
import type { ListeningSocket } from "./listening.ts";

function header(message: IncomingMessage, name: string): string | null {
  const value = message.headers[name.toLowerCase()];
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(", ") : value;
}

/**
 * A request's body (its length is declared and within the relay's limit), collected from the
 * stream's own events. `node:stream/consumers` would go through a Blob and an async iterator per
 * request: on the relay's hot path that cost more than the rest of the adapter.
 */
function bodyOf(message: IncomingMessage): Promise<ArrayBuffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    message.on("data", (chunk: Buffer) => chunks.push(chunk));
    message.once("error", reject);
    message.once("end", () => {
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      resolve(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer);
    });
  });
}

function relayRequest(message: IncomingMessage, response: ServerResponse, origin: string): RelayRequest {
  let stream: ReadableStream<Uint8Array> | null | undefined;
  let aborter: AbortController | undefined;
  return {
    url: `${origin}${message.url ?? "/"}`,
    method: message.method ?? "GET",
    headers: { get: (name) => header(message, name) },
    get body() {
      if (stream === undefined)
        stream = message.method === "GET" || message.method === "HEAD" ? null : (Readable.toWeb(message) as ReadableStream<Uint8Array>);
      return stream;
    },
    arrayBuffer: () => bodyOf(message),
    get signal() {
      if (aborter === undefined) {
        const controller = new AbortController();
        response.once("close", () => {
          if (!response.writableFinished) controller.abort();
        });
        aborter = controller;
      }
      return aborter.signal;
    },
  };
}

/** Writes a reply with its length declared (as Bun.serve does), never chunked. */
function write(response: ServerResponse, reply: RelayReply): void {
  if (reply.body === null) {
    // No body (204): no Content-Length either (RFC 9110 §8.6).
    response.writeHead(reply.status, reply.headers);
    response.end();
    return;
  }
  // The body as text: Node then writes the head and the body in one write, not a writev of two.
  response.writeHead(reply.status, { ...reply.headers, "content-length": String(Buffer.byteLength(reply.body)) });
  response.end(reply.body);
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

export async function serveOnNode(handler: RelayHandler, host: string, port: number): Promise<ListeningSocket> {
  let origin = "";
  const server = createServer((message, response) => {
    handler.handle(relayRequest(message, response, origin), message.socket.remoteAddress).then(
      (reply) => write(response, reply),
      // The handler answers every failure itself; this only guards the socket.
      () => response.destroy(),
    );
  });
  // Bun.serve's idle timeout, in Node's terms: a socket idle this long is closed; a request's
  // headers and body have the same bound (the handler's own body deadline is shorter).
  server.keepAliveTimeout = relayIdleTimeoutSeconds * msPerSecond;
  server.headersTimeout = relayIdleTimeoutSeconds * msPerSecond;
  server.requestTimeout = 0;
  server.timeout = relayIdleTimeoutSeconds * msPerSecond;
  const bound = await listen(server, host, port);
  origin = `http://${host.includes(":") ? `[${host}]` : host}:${bound}`;
  return {
    port: bound,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
