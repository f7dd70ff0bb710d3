/**
 * Why a task waits, derived from its events: questions one side asked that the other has not
 * answered. A question's author is known from its canonical payload: a question canonicalized from
 * the worker's intent carries `intentId`; one the origin asked does not.
 */
import type { TaskEvent } from "../protocol/schemas.ts";
import type { TaskSnapshot } from "../store/task-store.ts";

function askedByWorker(event: TaskEvent): boolean {
  return typeof (event.payload as { intentId?: unknown }).intentId === "string";
}

function unanswered(task: TaskSnapshot): TaskEvent[] {
  const answered = new Set<string>();
  for (const event of task.events) {
    const inReplyTo = (event.payload as { inReplyTo?: unknown }).inReplyTo;
    if (event.type === "task.answer" && typeof inReplyTo === "string") answered.add(inReplyTo);
  }
  return task.events.filter((event) => event.type === "task.question" && !answered.has(event.eventId));
}

/** Questions waiting for this side's answer (only while the task is active). */
export function openQuestions(task: TaskSnapshot): TaskEvent[] {
  if (task.status !== "active") return [];
  return unanswered(task).filter((event) => askedByWorker(event) === (task.role === "origin"));
}

/** Questions this side asked that the other side has not answered yet (only while active). */
export function awaitedAnswers(task: TaskSnapshot): TaskEvent[] {
  if (task.status !== "active") return [];
  return unanswered(task).filter((event) => askedByWorker(event) === (task.role === "worker"));
}
