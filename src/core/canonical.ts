/**
 * Canonical events at the origin: the origin alone authors them, numbers them (events so far + 1)
 * and lets a terminal type set the task's status (first terminal wins is the caller's rule).
 */
import { eventTypeRow } from "../protocol/events.ts";
import type { TaskEvent, TaskEventType, TaskRecord } from "../protocol/schemas.ts";
import type { CoreStore } from "./bookkeeping.ts";
import { makeEvent } from "./envelopes.ts";

/** The next canonical sequence of a task at its origin: events so far + 1. */
export function nextSequence(store: CoreStore, taskId: string): string {
  return String(store.eventCount(taskId) + 1);
}

/** Appends an origin-authored canonical event; a terminal type sets the task's status. */
export function appendCanonical(
  store: CoreStore,
  task: TaskRecord,
  type: TaskEventType,
  payload: Record<string, unknown>,
  occurredAt: number,
): TaskEvent {
  const event = makeEvent(task, type, nextSequence(store, task.taskId), occurredAt, payload);
  store.appendEvent(event);
  const terminal = eventTypeRow(type).terminalStatus;
  if (terminal !== null) store.setStatus(task.taskId, terminal);
  return event;
}
