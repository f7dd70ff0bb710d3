/** The task view's derived facts: the worker's terminal delivery follows its reservation, outbox and quarantine. */
import { describe, expect, test } from "bun:test";
import { type CoreBook, OPERATION } from "../../src/core/bookkeeping.ts";
import { terminalDelivery } from "../../src/core/views.ts";
import { canonicalJson } from "../../src/protocol/canonical-json.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { canonicalEnvelope, taskEvent, taskRecord } from "../helpers/fixtures.ts";

function storeWithIntent() {
  const store = createTaskStore<CoreBook>();
  const record = taskRecord();
  store.putTask(record, "worker");
  const envelope = canonicalEnvelope({ ...taskEvent(record, 2), target: record.origin });
  const view = () => terminalDelivery(store, store.getTask(record.taskId)!);
  const submit = () =>
    store.transaction(() => {
      store.putOutbox({
        envelopeId: envelope.envelopeId,
        taskId: record.taskId,
        target: record.origin,
        kind: "intent",
        purpose: "terminal",
        envelopeText: canonicalJson(envelope),
      });
      store.reserveOperation(record.taskId, OPERATION.terminalIntent, () => ({
        logicalId: "intent-1",
        logicalType: "task.completed",
        envelopeIds: [envelope.envelopeId],
        createdAt: 1,
      }));
    });
  return { store, record, envelope, view, submit };
}

describe("terminalDelivery", () => {
  test("not_submitted → pending → delivery_blocked with the relay's refusal", () => {
    const { store, record, envelope, view, submit } = storeWithIntent();
    expect(view()).toEqual({ state: "not_submitted" });
    submit();
    const base = { intentId: "intent-1", intentType: "task.completed", envelopeId: envelope.envelopeId, origin: record.origin };
    expect(view()).toEqual({ state: "pending", ...base });
    store.quarantineOutbox(envelope.envelopeId, { errorCode: "TARGET_NOT_REGISTERED", details: { operation: "send" }, quarantinedAt: 42 });
    expect(view()).toEqual({
      state: "delivery_blocked",
      ...base,
      blockedAt: 42,
      error: { code: "TARGET_NOT_REGISTERED", retryable: false, details: { operation: "send" } },
    });
  });

  test("pending → accepted once the relay accepted the intent", () => {
    const { store, envelope, view, submit } = storeWithIntent();
    submit();
    store.markOutboxAccepted(envelope.envelopeId, { acceptanceId: "a", acceptedAt: 2, duplicate: false });
    expect(view().state).toBe("accepted");
  });
});
