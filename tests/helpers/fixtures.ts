/** Small builders of valid protocol values for tests. */
import { defaultTaskTimeoutMs } from "../../src/protocol/limits.ts";
import { RELAY_ID, TASK_PROTOCOL_VERSION, WIRE_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint, TaskEnvelope, TaskEvent, TaskEventType, TaskRecord } from "../../src/protocol/schemas.ts";

let counter = 0;
/** A deterministic UUID-shaped id (version 4, variant 8). */
export function testId(prefix = 0): string {
  counter += 1;
  const hex = (prefix * 1_000_000 + counter).toString(16).padStart(12, "0").slice(-12);
  return `00000000-0000-4000-8000-${hex}`;
}

export function endpoint(id = testId()): TaskEndpoint {
  return { relay: RELAY_ID, id };
}

export const ORIGIN = endpoint("11111111-1111-4111-8111-111111111111");
export const WORKER = endpoint("22222222-2222-4222-8222-222222222222");
export const OTHER = endpoint("33333333-3333-4333-8333-333333333333");

export function taskRecord(overrides: Partial<TaskRecord> = {}): TaskRecord {
  const createdAt = overrides.createdAt ?? 1_000;
  return {
    taskId: testId(1),
    protocolVersion: TASK_PROTOCOL_VERSION,
    origin: ORIGIN,
    target: WORKER,
    task: "implement the narrow change and run focused tests",
    createdAt,
    expiresAt: createdAt + defaultTaskTimeoutMs,
    status: "active",
    ...overrides,
  };
}

export function taskEvent(
  task: TaskRecord,
  sequence: number,
  type: TaskEventType = "task.information",
  payload?: Record<string, unknown>,
): TaskEvent {
  return {
    eventId: testId(2),
    taskId: task.taskId,
    type,
    sequence: String(sequence),
    source: task.origin,
    target: task.target,
    occurredAt: task.createdAt + sequence,
    payload: payload ?? (type === "task.created" ? { task: task.task } : { message: `message ${sequence}` }),
  };
}

export function canonicalEnvelope(event: TaskEvent, createdAt = "2026-11-30T12:00:00.000Z"): TaskEnvelope {
  return {
    envelopeId: testId(3),
    protocolVersion: WIRE_PROTOCOL_VERSION,
    source: event.source,
    target: event.target,
    payload: { taskId: event.taskId, kind: "canonical_event", payload: event },
    createdAt,
  };
}
