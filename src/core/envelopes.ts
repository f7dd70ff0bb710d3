/**
 * Builders of immutable protocol values: events, intents and relay envelopes. Every id is a random
 * UUID; `createdAt` is fixed at creation. An envelope is encoded once, as canonical JSON: that text
 * is stored and sent byte for byte on every attempt (no re-serialization per retry).
 */
import { CanonicalText, canonicalJson, utf8Bytes } from "../protocol/canonical-json.ts";
import { TaskError } from "../protocol/errors.ts";
import { maxRelayPayloadBytes, signatureReserveBytes, WIRE_PROTOCOL_VERSION } from "../protocol/limits.ts";
import type { EncodedEnvelope } from "../protocol/wire.ts";
import type { Identity } from "../trust/keys.ts";
import { signPayload } from "../trust/signing.ts";
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

/** A worker's intent; `generation` is the generation of the assignment it answers (absent: 1). */
export function makeIntent(taskId: string, type: ReceiverIntentType, payload: Record<string, unknown>, generation?: number): TaskIntent {
  return { intentId: newId(), taskId, type, payload, ...(generation === undefined ? {} : { generation }) };
}


/** Who signs what a core sends: its identity, and the name it claims (unsigned). */
export interface EnvelopeSigner {
  readonly identity: Identity;
  readonly claimedName?: string;
}

/**
 * Canonical text of a task envelope's payload `{taskId, kind, payload, signature?}`, size-checked
 * against the 48 KiB payload bound. The inner payload is serialized once: its text is both signed
 * (through its digest) and spliced into the result.
 */
export function encodePayload(taskId: string, kind: EnvelopeKind, inner: TaskWirePayload["payload"], signing?: { signer: EnvelopeSigner; from: TaskEndpoint; to: TaskEndpoint; atMs: number }): string {
  const innerText = canonicalJson(inner);
  const signature =
    signing === undefined
      ? undefined
      : signPayload(
          { taskId, kind, payload: inner },
          { identity: signing.signer.identity, from: signing.from, to: signing.to, atMs: signing.atMs, ...(signing.signer.claimedName === undefined ? {} : { name: signing.signer.claimedName }) },
          innerText,
        );
  const text = canonicalJson({ taskId, kind, payload: new CanonicalText(innerText), ...(signature === undefined ? {} : { signature }) });
  const bytes = utf8Bytes(text);
  if (bytes > maxRelayPayloadBytes) throw new TaskError("PAYLOAD_TOO_LARGE", { details: { taskId, kind, bytes, maxBytes: maxRelayPayloadBytes } });
  return text;
}

/**
 * Encodes an envelope once: its payload (signed by `signer`, at `createdAtMs`) is serialized once
 * and spliced in. Without a signer the envelope is unsigned (only tests forge such mail).
 */
export function encodeEnvelope(source: TaskEndpoint, target: TaskEndpoint, taskId: string, kind: EnvelopeKind, inner: TaskWirePayload["payload"], createdAtMs: number, signer?: EnvelopeSigner, envelopeId: string = newId()): EncodedEnvelope {
  const signing = signer === undefined ? undefined : { signer, from: source, to: target, atMs: createdAtMs };
  const payload = new CanonicalText(encodePayload(taskId, kind, inner, signing));
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

/** Canonical payload size of an assignment carrying `history`, plus room for its signature (for the reassignment fit). */
export function assignmentBytes(taskId: string, inner: Record<string, unknown>): number {
  return utf8Bytes(canonicalJson({ taskId, kind: "assignment", payload: inner })) + signatureReserveBytes;
}
