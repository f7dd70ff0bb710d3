/**
 * Delivery evidence of a task's assignment, as this endpoint knows it. None of it proves model
 * execution: `modelExecution` is always `not_evidenced`.
 */
import { latestAssignment } from "../protocol/events.ts";
import type { DeliveryReceiptPayload } from "../protocol/schemas.ts";
import type { TaskSnapshot, TaskStore } from "../store/task-store.ts";
import { hasEvidence } from "./presentation.ts";

export interface DeliveryEvidence {
  /** The assignment envelope at the relay (origin view). */
  readonly relayAcceptance: "accepted" | "pending" | "blocked" | "not_applicable";
  readonly receiverReceipt: "not_confirmed" | "confirmed";
  readonly piInsertion: "not_confirmed" | "blocked" | "confirmed";
  readonly wakeAcceptance: "not_confirmed" | "pending" | "confirmed";
  readonly modelExecution: "not_evidenced";
}

const INSERTED_STAGES = new Set(["pi_inserted", "wake_requested", "wake_accepted"]);

export function deliveryEvidence(store: TaskStore, task: TaskSnapshot): DeliveryEvidence {
  const assignment = latestAssignment(task.events);
  if (assignment === undefined) {
    return { relayAcceptance: "not_applicable", receiverReceipt: "not_confirmed", piInsertion: "not_confirmed", wakeAcceptance: "not_confirmed", modelExecution: "not_evidenced" };
  }
  if (task.role === "target") {
    return {
      relayAcceptance: "not_applicable",
      receiverReceipt: "confirmed",
      piInsertion: hasEvidence(store, assignment.eventId, "inserted") ? "confirmed" : "not_confirmed",
      wakeAcceptance: hasEvidence(store, assignment.eventId, "woken") ? "confirmed" : "not_confirmed",
      modelExecution: "not_evidenced",
    };
  }
  const receipts = task.events
    .filter((event) => event.type === "task.delivery_receipt")
    .map((event) => event.payload as unknown as DeliveryReceiptPayload)
    .filter((receipt) => receipt.eventId === assignment.eventId);
  const confirmed = receipts.filter((receipt) => receipt.state === "confirmed").map((receipt) => receipt.stage);
  const inserted = confirmed.some((stage) => INSERTED_STAGES.has(stage));
  const blocked = receipts.some((receipt) => receipt.stage === "pi_insertion" && receipt.state === "blocked");
  const operation = store.getOperation(task.taskId, `assignment:${assignment.eventId}`);
  const envelopeId = operation?.envelopeIds[0];
  const relayAcceptance =
    envelopeId === undefined
      ? "not_applicable"
      : store.getQuarantine(envelopeId) !== undefined
        ? "blocked"
        : store.getOutbox(envelopeId)?.state === "accepted"
          ? "accepted"
          : "pending";
  return {
    relayAcceptance,
    receiverReceipt: confirmed.length > 0 ? "confirmed" : "not_confirmed",
    piInsertion: inserted ? "confirmed" : blocked ? "blocked" : "not_confirmed",
    wakeAcceptance: confirmed.includes("wake_accepted") ? "confirmed" : confirmed.includes("wake_requested") ? "pending" : "not_confirmed",
    modelExecution: "not_evidenced",
  };
}
