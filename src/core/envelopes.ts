/**
 * Builders of immutable protocol values: events, intents and relay envelopes. Every id is a random
 * UUID; `createdAt` is fixed at creation and reused byte for byte on every retry.
 */
import { canonicalBytes } from "../protocol/canonical-json.ts";
import { TaskError } from "../protocol/errors.ts";
import { maxRelayPayloadBytes, WIRE_PROTOCOL_VERSION } from "../protocol/limits.ts";
import type {
  EnvelopeKind,
  ReceiverIntentType,
  TaskEndpoint,
  TaskEnvelope,
  TaskEvent,
  TaskEventType,
  TaskIntent,
  TaskRecord,
  TaskWirePayload,
} from "../protocol/schemas.ts";
import type { TaskStore } from "../store/task-store.ts";

export function newId(): string {
  return crypto.randomUUID();
}

/** An ISO timestamp that round-trips exactly through `toISOString`. */
export function isoAt(ms: number): string {
  return new Date(ms).toISOString();
}

/** The next canonical sequence of a task at its origin: events so far + 1. */
export function nextSequence(store: TaskStore, taskId: string): string {
  return String(store.eventCount(taskId) + 1);
}

export function makeEvent(task: TaskRecord, type: TaskEventType, sequence: string, occurredAt: number, payload: Record<string, unknown>): TaskEvent {
  return {
    eventId: newId(),
    taskId: task.taskId,
    type,
    sequence,
    source: task.origin,
    target: task.target,
    occurredAt,
    payload,
  };
}

export function makeIntent(taskId: string, type: ReceiverIntentType, payload: Record<string, unknown>): TaskIntent {
  return { intentId: newId(), taskId, type, payload };
}

export function makeEnvelope(
  source: TaskEndpoint,
  target: TaskEndpoint,
  taskId: string,
  kind: EnvelopeKind,
  inner: TaskWirePayload["payload"],
  createdAtMs: number,
): TaskEnvelope {
  const payload = { taskId, kind, payload: inner } as TaskWirePayload;
  const bytes = canonicalBytes(payload);
  if (bytes > maxRelayPayloadBytes) {
    throw new TaskError("PAYLOAD_TOO_LARGE", { details: { taskId, kind, bytes, maxBytes: maxRelayPayloadBytes } });
  }
  return {
    envelopeId: newId(),
    protocolVersion: WIRE_PROTOCOL_VERSION,
    source: { relay: source.relay, id: source.id },
    target: { relay: target.relay, id: target.id },
    payload,
    createdAt: isoAt(createdAtMs),
  };
}

/** Canonical payload size of an assignment carrying `history` (for the reassignment fit). */
export function assignmentBytes(taskId: string, inner: Record<string, unknown>): number {
  return canonicalBytes({ taskId, kind: "assignment", payload: inner });
}
