/**
 * Builders of immutable protocol values: events, intents and relay envelopes. Every id is a random
 * UUID; `createdAt` is fixed at creation. An envelope is encoded once, as canonical JSON: that text
 * is stored and sent byte for byte on every attempt (no re-serialization per retry).
 */
import { CanonicalText, canonicalJson, utf8Bytes } from "../protocol/canonical-json.ts";
import { TaskError } from "../protocol/errors.ts";
import { maxRelayPayloadBytes, WIRE_PROTOCOL_VERSION } from "../protocol/limits.ts";
import type { EncodedEnvelope } from "../protocol/wire.ts";
import type { EnvelopeKind, ReceiverIntentType, TaskEndpoint, TaskEvent, TaskEventType, TaskIntent, TaskRecord, TaskWirePayload } from "../protocol/schemas.ts";

export function newId(): string {
  return crypto.randomUUID();
}

/** An ISO timestamp that round-trips exactly through `toISOString`. */
export function isoAt(ms: number): string {
  return new Date(ms).toISOString();
}

export function makeEvent(task: TaskRecord, type: TaskEventType, sequence: string, occurredAt: number, payload: Record<string, unknown>): TaskEvent {
  return { eventId: newId(), taskId: task.taskId, type, sequence, source: task.origin, target: task.target, occurredAt, payload };
}

export function makeIntent(taskId: string, type: ReceiverIntentType, payload: Record<string, unknown>): TaskIntent {
  return { intentId: newId(), taskId, type, payload };
}


/** Canonical payload text of a task envelope, size-checked against the 48 KiB payload bound. */
export function encodePayload(taskId: string, kind: EnvelopeKind, inner: TaskWirePayload["payload"]): string {
  const text = canonicalJson({ taskId, kind, payload: inner });
  const bytes = utf8Bytes(text);
  if (bytes > maxRelayPayloadBytes) throw new TaskError("PAYLOAD_TOO_LARGE", { details: { taskId, kind, bytes, maxBytes: maxRelayPayloadBytes } });
  return text;
}

/** Encodes an envelope once (the payload is serialized once and spliced in). */
export function encodeEnvelope(source: TaskEndpoint, target: TaskEndpoint, taskId: string, kind: EnvelopeKind, inner: TaskWirePayload["payload"], createdAtMs: number): EncodedEnvelope {
  const envelopeId = newId();
  const payload = new CanonicalText(encodePayload(taskId, kind, inner));
  const text = canonicalJson({
    envelopeId,
    protocolVersion: WIRE_PROTOCOL_VERSION,
    source: { relay: source.relay, id: source.id },
    target: { relay: target.relay, id: target.id },
    payload,
    createdAt: isoAt(createdAtMs),
  });
  return { envelopeId, text };
}

/** Canonical payload size of an assignment carrying `history` (for the reassignment fit). */
export function assignmentBytes(taskId: string, inner: Record<string, unknown>): number {
  return utf8Bytes(canonicalJson({ taskId, kind: "assignment", payload: inner }));
}
