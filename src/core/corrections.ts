/**
 * Corrections and withdrawals: the author of an answer or a result may correct or withdraw it
 * later with a `task.correction` naming it (`supersedes`). The original stays stored and is shown
 * as superseded; status keeps first-terminal-wins. Only the author may supersede: the origin its
 * own answers and results, the worker those canonicalized from its intents.
 */
import { TaskError } from "../protocol/errors.ts";
import type { MessageParams, TaskEvent } from "../protocol/schemas.ts";
import type { CoreStore } from "./bookkeeping.ts";

/** What may be corrected or withdrawn. */
const CORRECTABLE: ReadonlySet<string> = new Set(["task.answer", "task.completed", "task.failed", "task.late_terminal", "task.correction"]);

function refuse(message: string, path: string, details: Record<string, unknown> = {}): TaskError {
  return new TaskError("INVALID_REQUEST", { message, details: { path, ...details } });
}

/** Whether this side authored an event: the worker's carry the intent id of one of its own intents. */
export function authoredHere(store: CoreStore, role: "origin" | "worker", event: TaskEvent): boolean {
  const intentId = event.payload.intentId;
  return role === "origin" ? intentId === undefined : typeof intentId === "string" && store.getIntent(intentId) !== undefined;
}

/** The fields only a correction takes, and a correction's target: an answer or result this side gave. */
export function checkCorrection(store: CoreStore, taskId: string, role: "origin" | "worker", params: MessageParams): void {
  if (params.type !== "correction") {
    const stray =
      params.supersedes !== undefined
        ? "/supersedes"
        : params.withdraw !== undefined
          ? "/withdraw"
          : params.result !== undefined
            ? "/result"
            : undefined;
    if (stray !== undefined) throw refuse(`${stray.slice(1)} belongs to a correction (type "correction")`, stray);
    if (params.finality !== undefined && params.type !== "answer")
      throw refuse("finality belongs to an answer or a correction", "/finality");
    return;
  }
  if (params.supersedes === undefined) throw refuse("a correction names the answer or result it corrects (supersedes)", "/supersedes");
  const earlier = store.getEvent(params.supersedes);
  if (earlier === undefined || earlier.taskId !== taskId || !CORRECTABLE.has(earlier.type)) {
    throw refuse("supersedes must name an answer, a result or a correction of this task", "/supersedes", { supersedes: params.supersedes });
  }
  if (!authoredHere(store, role, earlier))
    throw refuse("only its author corrects an answer or a result", "/supersedes", { supersedes: params.supersedes });
}

/** The payload of an answer or correction, with the author's optional words on it. */
export function correctionFields(params: MessageParams): Record<string, unknown> {
  return {
    ...(params.supersedes === undefined ? {} : { supersedes: params.supersedes }),
    ...(params.withdraw === true ? { withdrawn: true } : {}),
    ...(params.result === undefined ? {} : { result: params.result }),
    ...(params.finality === undefined ? {} : { finality: params.finality }),
  };
}

/** At the origin: a worker's correction must supersede something the worker said. */
export function checkIntentCorrection(store: CoreStore, taskId: string, payload: Record<string, unknown>): void {
  const earlier = store.getEvent(String(payload.supersedes));
  if (
    earlier === undefined ||
    earlier.taskId !== taskId ||
    !CORRECTABLE.has(earlier.type) ||
    typeof earlier.payload.intentId !== "string"
  ) {
    throw new TaskError("INVALID_INTENT", {
      message: "INVALID_INTENT: a correction supersedes an answer or result the worker gave",
      details: { taskId, supersedes: payload.supersedes },
    });
  }
}

/** Which events were superseded, and by which (the newest correction of each). */
export function supersededBy(events: readonly TaskEvent[]): Record<string, string> {
  const map: Record<string, string> = {};
  for (const event of events) if (event.type === "task.correction") map[String(event.payload.supersedes)] = event.eventId;
  return map;
}
