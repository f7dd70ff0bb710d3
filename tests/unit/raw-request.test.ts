/**
 * The conformance tool's held request (src/conformance/wire-client.ts `openRawRequest`) reads every
 * valid HTTP/1.1 framing of a reply (issue 38: Wolfpack's replies are chunked, and the body-deadline
 * check could not decode them): `Content-Length`, chunked, and a body that ends with the connection.
 */
import { afterEach, expect, test } from "bun:test";
import { createServer } from "node:http";
import { type AddressInfo, createServer as createNetServer, type Socket } from "node:net";
import { openRawRequest } from "../../src/conformance/wire-client.ts";

const servers: { close(): unknown }[] = [];

/** A plain TCP server that answers the first bytes of a request as `answer` says. */
async function rawServer(answer: (socket: Socket) => void): Promise<string> {
  const server = createNetServer((socket) => socket.once("data", () => answer(socket)));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

const ANSWER = { ok: false, profile: "volatile-v1", error: { code: "INVALID_REQUEST", message: "body too slow" } };
const TEXT = JSON.stringify(ANSWER);

/** A server answering a half-sent request at once with a 408, framed as `frame` says, then closing. */
async function serving(frame: "length" | "chunked" | "close"): Promise<string> {
  if (frame === "close")
    // HTTP/1.0-style: no length, no chunks; the body ends when the connection does.
    return rawServer((socket) =>
      socket.end(`HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${TEXT}`),
    );
  const server = createServer((request, response) => {
    request.resume();
    if (frame === "length")
      response.writeHead(408, { "content-type": "application/json", "content-length": Buffer.byteLength(TEXT), connection: "close" });
    else response.writeHead(408, { "content-type": "application/json", connection: "close" });
    if (frame === "chunked") {
      // Two chunks: the reader must join them.
      response.write(TEXT.slice(0, 10));
      setTimeout(() => response.end(TEXT.slice(10)), 20);
    } else response.end(TEXT);
    response.on("finish", () => request.socket.destroy());
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

for (const frame of ["length", "chunked", "close"] as const) {
  test(`a reply framed by ${frame === "length" ? "Content-Length" : frame === "chunked" ? "chunked transfer coding" : "the connection closing"} is read whole`, async () => {
    const url = await serving(frame);
    const held = openRawRequest(url, { contentLength: 4_096, body: "{" });
    await held.sent;
    const reply = await held.reply;
    expect(reply?.status).toBe(408);
    expect(reply?.headers.get("connection")).toBe("close");
    expect(reply?.body).toEqual(ANSWER);
    expect(held.closed()).toBe(true);
  });
}

test("a connection closed without an answer is no reply", async () => {
  const held = openRawRequest(await rawServer((socket) => socket.destroy()), { contentLength: 4_096, body: "{" });
  await held.sent.catch(() => undefined);
  expect(await held.reply).toBeUndefined();
});
