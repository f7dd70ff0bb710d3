/**
 * Small shared pieces of the TaskCore tests (tests/core): error capture without Bun's eager
 * `.rejects`, event filters, relay request filters on the fault proxy, and a deferred.
 */
import type { TaskView } from "../../src/core/task-core.ts";
import { TaskError, toTaskError } from "../../src/protocol/errors.ts";
import type { TaskEvent } from "../../src/protocol/schemas.ts";
import type { FaultProxy, ProxyRequest } from "./fault-proxy.ts";

/** The error a promise rejects with (fails the test when it resolves). */
export async function failure(promise: Promise<unknown>): Promise<TaskError> {
  const outcome = await promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  if (outcome.ok) throw new Error(`expected a failure, got ${JSON.stringify(outcome.value)}`);
  return toTaskError(outcome.error);
}

/** The error a call throws synchronously, or its returned promise rejects with. */
export async function thrown(call: () => unknown): Promise<{ error: TaskError; synchronous: boolean }> {
  let result: unknown;
  try {
    result = call();
  } catch (error) {
    return { error: toTaskError(error), synchronous: true };
  }
  return { error: await failure(Promise.resolve(result)), synchronous: false };
}

export function expectCode(error: unknown, code: string): TaskError {
  if (!(error instanceof TaskError)) throw new Error(`expected TaskError ${code}, got ${String(error)}`);
  if (error.code !== code) throw new Error(`expected ${code}, got ${error.code}: ${error.message} ${JSON.stringify(error.details)}`);
  return error;
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

/** The wire envelopes a caller sent (every attempt, duplicates included). */
export function sentEnvelopes(proxy: FaultProxy, callerSession: string): { envelopeId: string; kind: string; type?: string; inner: any }[] {
  return requestsOf(proxy, callerSession, "send").map((request) => {
    const envelope = (request.body as { envelope: any }).envelope;
    const inner = envelope.payload.payload;
    return { envelopeId: envelope.envelopeId, kind: envelope.payload.kind, type: inner?.type ?? inner?.event?.type, inner };
  });
}

export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Whether a promise has settled by now (after letting pending callbacks run). */
export async function settledYet(promise: Promise<unknown>, waitMs = 20): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await Bun.sleep(waitMs);
  return settled;
}
