/**
 * The ledger of a fault row: every createTask, message and done the workload offers, and what
 * became of it — the task, event and envelope ids it got, whether it was refused (failed
 * definitively, nothing created) and, once set, how the sender's model was told its fate.
 * Accounting (`accounting.ts`) reads it after the drain.
 */
import { coreInternals } from "../../../src/core/task-core.ts";
import { toTaskError } from "../../../src/protocol/errors.ts";
import type { TaskEndpoint } from "../../../src/protocol/schemas.ts";
import { clearEnvelope } from "../../../testkit/sealed.ts";
import type { Rig } from "./rig.ts";

type ItemKind = "task" | "message" | "done";

export interface Item {
  readonly kind: ItemKind;
  taskId?: string;
  eventId?: string;
  envelopeId?: string;
  refused: boolean;
  /** Set once the sender's model was told the item's fate (relay loss, timeout). */
  reported?: string;
}

export interface Ledger {
  readonly items: Item[];
  offerTask(rig: Rig, to: TaskEndpoint, text: string, extra?: Record<string, unknown>): Promise<Item>;
  offerMessage(rig: Rig, taskId: string, text: string): Promise<Item>;
  offerDone(rig: Rig, taskId: string): Promise<Item>;
}

export function createLedger(): Ledger {
  const items: Item[] = [];
  return {
    items,
    async offerTask(rig, to, text, extra = {}) {
      const item: Item = { kind: "task", refused: false };
      items.push(item);
      try {
        const created = await rig.origin.core().createTask({ to, task: text, ...extra });
        item.taskId = created.taskId;
        item.envelopeId = created.envelopeId;
      } catch (raw) {
        const error = toTaskError(raw);
        // With a task id the task exists (its envelope waits for a retry); without one nothing
        // was created and the caller was told.
        if (typeof error.details.taskId === "string") {
          item.taskId = error.details.taskId;
          item.envelopeId = error.details.envelopeId as string | undefined;
        } else item.refused = true;
      }
      if (item.taskId !== undefined)
        item.eventId = rig.origin
          .core()
          .findTask(item.taskId)
          ?.events.find((event) => event.type === "task.created")?.eventId;
      return item;
    },
    async offerMessage(rig, taskId, text) {
      const item: Item = { kind: "message", taskId, refused: false };
      items.push(item);
      try {
        const sent = await rig.origin.core().message({ taskId, type: "information", message: text });
        item.eventId = sent.eventId;
        item.envelopeId = sent.envelopeId;
      } catch (raw) {
        const error = toTaskError(raw);
        const envelopeId = error.details.envelopeId as string | undefined;
        if (envelopeId === undefined) item.refused = true;
        else {
          item.envelopeId = envelopeId;
          const stored = coreInternals(rig.origin.core()).store.getEnvelope(envelopeId);
          const envelope = stored === undefined ? undefined : clearEnvelope(stored);
          item.eventId = (envelope?.payload.payload as { eventId?: string } | undefined)?.eventId;
        }
      }
      return item;
    },
    async offerDone(rig, taskId) {
      const item: Item = { kind: "done", taskId, refused: false };
      items.push(item);
      try {
        await rig.worker.core().done({ taskId, status: "completed", summary: `done ${taskId.slice(0, 8)}` });
      } catch (raw) {
        const error = toTaskError(raw);
        // A retryable failure keeps the intent (and its envelope) for the passes.
        if (!error.retryable) item.refused = true;
      }
      item.envelopeId = coreInternals(rig.worker.core()).store.getOperation(taskId, "terminal_intent")?.envelopeIds[0];
      return item;
    },
  };
}
