/**
 * Sends of one tick in one request (`send-batch-v1`). A `send` made while the relay advertises the
 * feature waits for the end of the current tick (a microtask, no timer); the sends gathered by then
 * that share its abort signal leave together, in the order they were made, in requests of at most
 * `maxSendBatchItems` envelopes and `maxRequestBodyBytes` less `sendBatchHeadroomBytes`. Each send
 * settles with its own envelope's outcome: its acceptance, the refusal a single send would throw, or
 * `TASK_DELIVERY_DEFERRED` when it was skipped; a failure of the whole request fails each of them.
 * A lone send (or a relay without the feature) goes as a single send, exactly as before.
 *
 * Nothing here changes what is sent or when a caller may send: the core's per-target FIFO still
 * holds a younger envelope back until the older one is accepted, so one tick's sends go to
 * different targets, or were already allowed to leave together.
 */
import { utf8Bytes } from "../protocol/canonical-json.ts";
import { deferral } from "../protocol/errors.ts";
import { maxRequestBodyBytes, sendBatchHeadroomBytes, maxSendBatchItems } from "../protocol/limits.ts";
import type { EncodedEnvelope } from "../protocol/wire.ts";
import type { SendAcceptance, SentOutcome } from "./session-types.ts";

export interface SendCoalescerOptions {
  /** Whether sends may be gathered now (the relay advertised `send-batch-v1`). */
  enabled(): boolean;
  single(envelope: EncodedEnvelope, signal: AbortSignal | undefined): Promise<SendAcceptance>;
  batch(envelopes: readonly EncodedEnvelope[], signal: AbortSignal | undefined): Promise<readonly SentOutcome[]>;
}

export interface SendCoalescer {
  send(envelope: EncodedEnvelope, signal: AbortSignal | undefined): Promise<SendAcceptance>;
}

interface Waiter {
  readonly envelope: EncodedEnvelope;
  resolve(acceptance: SendAcceptance): void;
  reject(error: unknown): void;
}

/** The waiters in requests: at most `maxSendBatchItems` each, and within the body budget. */
export function batchesOf<T extends { readonly bytes: number }>(waiters: readonly T[]): T[][] {
  const budget = maxRequestBodyBytes - sendBatchHeadroomBytes;
  const batches: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const waiter of waiters) {
    if (current.length > 0 && (current.length === maxSendBatchItems || bytes + waiter.bytes + 1 > budget)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(waiter);
    bytes += waiter.bytes + 1;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

function settle(waiter: Waiter, outcome: SentOutcome): void {
  if (outcome.outcome === "accepted") waiter.resolve(outcome.acceptance);
  else if (outcome.outcome === "refused") waiter.reject(outcome.error);
  else
    waiter.reject(
      deferral("order", "an envelope before it to the same target was not accepted", { operation: "send", envelopeId: outcome.envelopeId }),
    );
}

async function sendGroup(options: SendCoalescerOptions, group: readonly Waiter[], signal: AbortSignal | undefined): Promise<void> {
  if (group.length === 1) {
    const waiter = group[0]!;
    await options.single(waiter.envelope, signal).then(waiter.resolve, waiter.reject);
    return;
  }
  try {
    const outcomes = await options.batch(
      group.map((waiter) => waiter.envelope),
      signal,
    );
    group.forEach((waiter, index) => settle(waiter, outcomes[index]!));
  } catch (error) {
    for (const waiter of group) waiter.reject(error);
  }
}

export function createSendCoalescer(options: SendCoalescerOptions): SendCoalescer {
  const gathering = new Map<AbortSignal | undefined, Waiter[]>();

  function flush(signal: AbortSignal | undefined): void {
    const waiters = gathering.get(signal) ?? [];
    gathering.delete(signal);
    if (waiters.length === 1) {
      void sendGroup(options, waiters, signal);
      return;
    }
    const sized = waiters.map((waiter) => ({ waiter, bytes: utf8Bytes(waiter.envelope.text) }));
    for (const group of batchesOf(sized))
      void sendGroup(
        options,
        group.map((item) => item.waiter),
        signal,
      );
  }

  return {
    send(envelope, signal) {
      if (!options.enabled()) return options.single(envelope, signal);
      return new Promise<SendAcceptance>((resolve, reject) => {
        const waiters = gathering.get(signal);
        const waiter = { envelope, resolve, reject };
        if (waiters !== undefined) {
          waiters.push(waiter);
          return;
        }
        gathering.set(signal, [waiter]);
        queueMicrotask(() => flush(signal));
      });
    },
  };
}
