/**
 * Small shared pieces of the TaskCore tests (tests/core): typed error codes, event and receipt
 * filters, relay request filters on the fault proxy, and trust configurations. (Deferreds and error
 * capture: testkit/async.ts.)
 */
import type { TaskView } from "../../src/core/task-core.ts";
import type { TrustOptions } from "../../src/core/trust.ts";
import type { Identity } from "../../src/trust/keys.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import type { TaskEvent } from "../../src/protocol/schemas.ts";
import { requestEnvelopes } from "../../src/protocol/wire.ts";
import type { FaultProxy, ProxyRequest } from "../../testkit/fault-proxy.ts";
import { clearPayload, isHello } from "../../testkit/sealed.ts";

export function expectCode(error: unknown, code: string): TaskError {
  if (!(error instanceof TaskError)) throw new Error(`expected TaskError ${code}, got ${String(error)}`);
  if (error.code !== code) throw new Error(`expected ${code}, got ${error.code}: ${error.message} ${JSON.stringify(error.details)}`);
  return error;
}

/** A trust configuration: `identity`, trusting the given peers by name (peers.json as the core reads it). */
export function trustOf(identity: Identity, peers: Record<string, Identity> = {}, extra: Partial<TrustOptions> = {}): TrustOptions {
  return { identity, peerName: (key) => Object.entries(peers).find(([, peer]) => peer.publicKey === key)?.[0], ...extra };
}

export function eventsOf(view: { readonly events: readonly TaskEvent[] }, type: string): TaskEvent[] {
  return view.events.filter((event) => event.type === type);
}

/** Delivery-receipt stages recorded at the origin for one event, in sequence order. */
export function receiptStages(view: TaskView, eventId: string): string[] {
  return eventsOf(view, "task.delivery_receipt")
    .map((event) => event.payload as { eventId: string; stage: string; state: string })
    .filter((payload) => payload.eventId === eventId)
    .map((payload) => `${payload.stage}:${payload.state}`);
}

/** Relay requests of one caller session (by operation), in arrival order. */
export function requestsOf(proxy: FaultProxy, callerSession: string, operation?: string): ProxyRequest[] {
  return proxy.requests().filter((request) => {
    const body = request.body as { callerSession?: unknown } | undefined;
    return body?.callerSession === callerSession && (operation === undefined || request.operation === operation);
  });
}

/**
 * The task mail a caller sent (every attempt, duplicates included; hellos left out), opened as its
 * parties read it: sends (batched too) and the receipts its acknowledgements carried.
 */
export function sentEnvelopes(proxy: FaultProxy, callerSession: string): { envelopeId: string; kind: string; type?: string; inner: any }[] {
  return requestsOf(proxy, callerSession)
    .filter((request) => request.operation === "send" || request.operation === "acknowledge")
    .flatMap((request) => requestEnvelopes(request.body) as any[])
    .filter((envelope) => !isHello(envelope))
    .map((envelope) => {
      const inner = clearPayload(envelope.payload)?.payload as any;
      return { envelopeId: envelope.envelopeId, kind: envelope.payload.kind, type: inner?.type ?? inner?.event?.type, inner };
    });
}
