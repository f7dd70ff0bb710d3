/**
 * Reading an HTTP body under a byte cap and a deadline, shared by the relay (request bodies) and
 * the relay client (reply bodies). A declared `content-length` over the cap is refused before
 * reading; a declared length within it is read natively in one piece; an undeclared (chunked)
 * body is counted chunk by chunk and cut as soon as it passes the cap.
 */

/** How a caller names the two ways a capped read fails. */
export interface CappedReadErrors {
  /** The body is larger than the cap (`bytes` declared, or read so far). */
  tooLarge(bytes: number): unknown;
  /** The deadline (the signal) ended the read. */
  aborted(signal: AbortSignal): unknown;
}

interface Message {
  readonly headers: { get(name: string): string | null };
  readonly body: ReadableStream<Uint8Array> | null;
  arrayBuffer(): Promise<ArrayBuffer>;
}

export async function readCappedBody(
  message: Message,
  maxBytes: number,
  signal: AbortSignal,
  errors: CappedReadErrors,
): Promise<Uint8Array> {
  const declared = message.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) {
    await message.body?.cancel().catch(() => undefined);
    throw errors.tooLarge(Number(declared));
  }
  if (message.body === null) return new Uint8Array(0);
  if (declared === null) return readStream(message.body, maxBytes, signal, errors);
  const reading = message.arrayBuffer();
  // A read abandoned at the deadline may still fail later; that failure is already answered.
  reading.catch(() => undefined);
  let onAbort: () => void = () => undefined;
  const expired = new Promise<never>((_, reject) => {
    onAbort = () => reject(errors.aborted(signal));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return new Uint8Array(await Promise.race([reading, expired]));
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

async function readStream(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  signal: AbortSignal,
  errors: CappedReadErrors,
): Promise<Uint8Array> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  const cancel = () => reader.cancel().catch(() => undefined);
  signal.addEventListener("abort", cancel, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (signal.aborted) throw errors.aborted(signal);
      if (done) return Buffer.concat(chunks);
      total += value.byteLength;
      if (total > maxBytes) {
        await cancel();
        throw errors.tooLarge(total);
      }
      chunks.push(value);
    }
  } catch (error) {
    throw signal.aborted ? errors.aborted(signal) : error;
  } finally {
    signal.removeEventListener("abort", cancel);
  }
}
