/**
 * The responses the fault proxy makes up: JSON bodies, a reply cut mid-body, a reply padded to a
 * size, streamed in chunks, or whose second half comes late.
 */
import { KiB } from "../../src/protocol/limits.ts";
import { RELAY_PROFILE } from "../../src/protocol/names.ts";

export const JSON_HEADERS = { "content-type": "application/json", "cache-control": "no-store" } as const;
const OVERSIZE_CHUNK_BYTES = 16 * KiB;

export function jsonResponse(status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): Response {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return new Response(text, { status, headers: { ...JSON_HEADERS, ...headers } });
}

/** A response that sends its headers and a few bytes, then resets the connection. */
export function droppedResponse(status: number, partial: string): Response {
  let sent = false;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(new TextEncoder().encode(partial));
        return;
      }
      // Erroring with `undefined` makes Bun close the socket without logging an error.
      controller.error(undefined);
    },
  });
  return new Response(stream, { status, headers: JSON_HEADERS });
}

/** The reply text padded with a `padding` member to exactly `bytes` UTF-8 bytes (ASCII padding). */
export function padReply(text: string, bytes: number): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = { ok: true, profile: RELAY_PROFILE, original: text };
  }
  const base = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : { value: parsed };
  const frame = JSON.stringify({ ...base, padding: "" });
  const padding = "x".repeat(Math.max(0, bytes - new TextEncoder().encode(frame).byteLength));
  return JSON.stringify({ ...base, padding });
}

export function chunkedResponse(status: number, text: string): Response {
  const bytes = new TextEncoder().encode(text);
  let offset = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.byteLength) {
        controller.close();
        return;
      }
      controller.enqueue(bytes.slice(offset, offset + OVERSIZE_CHUNK_BYTES));
      offset += OVERSIZE_CHUNK_BYTES;
    },
  });
  return new Response(stream, { status, headers: JSON_HEADERS });
}

/** Sends the reply's headers and first half at once, the rest after `ms`. */
export function slowBodyResponse(status: number, text: string, ms: number): Response {
  const bytes = new TextEncoder().encode(text);
  const half = Math.max(1, Math.floor(bytes.byteLength / 2));
  let step = 0;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      step += 1;
      if (step === 1) return controller.enqueue(bytes.slice(0, half));
      if (step === 2) {
        await Bun.sleep(ms);
        try {
          controller.enqueue(bytes.slice(half));
        } catch {
          // The client went away meanwhile.
        }
        return;
      }
      try {
        controller.close();
      } catch {
        // Already cancelled by the client.
      }
    },
  });
  return new Response(stream, { status, headers: JSON_HEADERS });
}
