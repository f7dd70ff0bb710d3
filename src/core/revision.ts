/**
 * Revisions (docs/protocol.md, "Revisions"): the origin sends a completed result back to the same
 * worker with a reason, instead of delegating from scratch. The task is active again — one more
 * round, at most `maxRevisionRounds` — with its whole history (each result and each reason stays in
 * the log), its expiry moved on by the task's original duration, and a terminal intent of its own
 * for the new round (`terminalIntentOf`). Only a completed task that the origin has not
 * acknowledged can be revised; the worker's Pi keeps its context (same session, same task id).
 *
 * At the worker, the `task.revision_requested` event makes the task active again for this round
 * (intake.ts), and its model is shown the reason with a wake.
 */
import { TaskError } from "../protocol/errors.ts";
import { maxRevisionRounds } from "../protocol/limits.ts";
import type { TaskEndpoint, TaskEvent, TaskRecord } from "../protocol/schemas.ts";
import { appendCanonical } from "./canonical.ts";
import type { CoreContext } from "./context.ts";
import { fanOut } from "./outbox.ts";
import type { MessageResult } from "./results.ts";
import { requireAccepted, requireOrigin, shipOwn } from "./ship.ts";

export interface RevisionResult extends MessageResult {
  /** The round this revision starts (1 for the first). */
  readonly round: number;
}

function refuse(taskId: string, problem: string): TaskError {
  return new TaskError("REVISION_REFUSED", { details: { taskId, problem } });
}

/** The completed event a revision sends back, checked: completed, not acknowledged, rounds left. */
function revisable(context: CoreContext, task: TaskRecord): TaskEvent {
  const events = context.store.getEvents(task.taskId);
  if (task.status !== "completed") throw refuse(task.taskId, `the task is ${task.status}, not completed`);
  if (events.some((event) => event.type === "task.parent_acknowledged")) throw refuse(task.taskId, "the result was acknowledged");
  if ((task.revision ?? 0) >= maxRevisionRounds) throw refuse(task.taskId, `it was revised ${maxRevisionRounds} times already`);
  return [...events].reverse().find((event) => event.type === "task.completed")!;
}

/** The origin sends a completed result back to its worker for another round. */
export async function requestRevision(
  context: CoreContext,
  self: TaskEndpoint,
  taskId: string,
  reason: string,
  signal: AbortSignal | undefined,
): Promise<RevisionResult> {
  const { store } = context;
  const { event, envelopeId, round } = store.transaction(() => {
    const task = requireOrigin(context, taskId, self);
    const result = revisable(context, task);
    const now = context.clock();
    const round = (task.revision ?? 0) + 1;
    const expiresAt = now + (task.expiresAt - task.createdAt);
    store.setStatus(taskId, "active");
    store.updateTask(taskId, { revision: round, expiresAt });
    const revised = store.getStoredTask(taskId)!.record;
    const event = appendCanonical(store, revised, "task.revision_requested", { result: result.eventId, reason, round, expiresAt }, now);
    return { event, envelopeId: fanOut(context, undefined, revised, event, false), round };
  });
  requireAccepted(await shipOwn(context, signal, envelopeId), taskId);
  return { taskId, eventId: event.eventId, envelopeId, authority: "origin", round };
}

/** At the worker: a revision makes the completed task active again for its round (inside intake's transaction). */
export function reopenForRevision(context: CoreContext, event: TaskEvent): void {
  const { store } = context;
  const stored = store.getStoredTask(event.taskId)!;
  const round = Number(event.payload.round);
  if ((stored.record.revision ?? 0) >= round) return;
  store.setStatus(event.taskId, "active");
  store.updateTask(event.taskId, { revision: round, expiresAt: Number(event.payload.expiresAt) });
}
