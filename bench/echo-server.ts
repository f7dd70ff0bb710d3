/**
 * The baseline server of the bench: a raw `Bun.serve` loopback JSON echo. It parses each POST body
 * as JSON and answers it re-serialised (what any JSON HTTP service must at least do), and prints
 * one readiness line `{"event":"listening","url":…}`. It exits on SIGTERM.
 *
 * With `--stream-body` it reads each body the way the relay's `readBody` does (a ReadableStream
 * reader loop under a deadline timer, chunks concatenated, strict UTF-8 decoding) instead of
 * `request.text()`: the bench measures what that costs on its own.
 */
const STREAM_BODY = process.argv.includes("--stream-body");
/** Same order of magnitude as the relay's body-read deadline; never reached here. */
const BODY_DEADLINE_MS = 5_000;

async function streamedText(request: Request): Promise<string> {
  const body = request.body;
  if (body === null) return "";
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  const timer = setTimeout(() => reader.cancel().catch(() => undefined), BODY_DEADLINE_MS);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
    }
  } finally {
    clearTimeout(timer);
  }
  return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
}

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    const text = STREAM_BODY ? await streamedText(request) : await request.text();
    const body = JSON.parse(text);
    return new Response(JSON.stringify(body), {
      status: 200,
      headers: { "content-type": "application/json", "cache-control": "no-store" },
    });
  },
});
process.stdout.write(`${JSON.stringify({ event: "listening", url: `http://127.0.0.1:${server.port}` })}\n`);
const stop = () => {
  void server.stop(true).then(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
