/**
 * Task wire payloads as a TaskCore makes them (through the core's own builders), for measuring
 * what signing costs per event: an assignment carrying a task text of a given size, and a small
 * intent (the delivery receipt a worker sends for every assignment it presents). Fresh ids each
 * call, as every real event has.
 */
import { TASK_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint, TaskRecord } from "../../src/protocol/schemas.ts";
import { makeEvent, makeIntent } from "../../src/core/envelopes.ts";
import type { SignablePayload } from "../../src/trust/signing.ts";
import type { EnvelopeKind } from "../../src/protocol/schemas.ts";

/** A task payload (never a hello). */
export type TaskPayload = SignablePayload & { readonly kind: EnvelopeKind };

/** Lifetime of a bench task (it never runs: only its record travels). */
const TASK_LIFETIME_MS = 30 * 60_000;

/** The `assignment` payload of a freshly created task (`task.created`) whose text is `text`. */
export function assignmentPayload(origin: TaskEndpoint, target: TaskEndpoint, text: string, atMs: number): TaskPayload {
  const task: TaskRecord = {
    taskId: crypto.randomUUID(),
    protocolVersion: TASK_PROTOCOL_VERSION,
    origin,
    target,
    task: text,
    createdAt: atMs,
    expiresAt: atMs + TASK_LIFETIME_MS,
    status: "active",
  };
  const event = makeEvent(task, "task.created", "1", atMs, { task: text });
  return { taskId: task.taskId, kind: "assignment", payload: { task, event } };
}

/** The `intent` payload of a delivery receipt (`pi_inserted`, confirmed) for an assignment event. */
export function receiptIntentPayload(taskId: string, eventId: string): TaskPayload {
  const intent = makeIntent(taskId, "task.delivery_receipt", { eventId, stage: "pi_inserted", state: "confirmed" });
  return { taskId, kind: "intent", payload: intent };
}
