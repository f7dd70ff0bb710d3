import { describe, expect, test } from "bun:test";
import { eventTypeRow, isTerminalType, TASK_EVENT_TYPES, validateTaskEvent } from "../../src/protocol/events.ts";
import { TASK_EVENT_TYPE_NAMES } from "../../src/protocol/schemas.ts";
import { taskEvent, taskRecord } from "../helpers/fixtures.ts";
import { thrown } from "../../testkit/async.ts";

describe("TASK_EVENT_TYPES", () => {
  test("has exactly one row per type", () => {
    expect(Object.keys(TASK_EVENT_TYPES).sort()).toEqual([...TASK_EVENT_TYPE_NAMES].sort());
    expect(TASK_EVENT_TYPE_NAMES.length).toBe(24);
    for (const [type, row] of Object.entries(TASK_EVENT_TYPES)) expect(row.type).toBe(type as never);
  });

  test("flags per type", () => {
    const flags = Object.fromEntries(
      Object.entries(TASK_EVENT_TYPES).map(([type, row]) => [
        type,
        [row.modelVisible, row.terminalStatus, row.conversational, row.originLocal, row.receiverIntent, row.wakes],
      ]),
    );
    expect(flags).toEqual({
      "task.created": [true, null, false, false, false, true],
      "task.information": [true, null, true, false, true, true],
      "task.question": [true, null, true, false, true, true],
      "task.answer": [true, null, true, false, true, true],
      "task.completed": [true, "completed", false, false, true, true],
      "task.failed": [true, "failed", false, false, true, true],
      "task.cancelled": [true, "cancelled", false, false, true, true],
      "task.timed_out": [true, "timed_out", false, false, false, true],
      "task.delivery_receipt": [false, null, false, true, true, false],
      "task.parent_acknowledged": [false, null, false, false, false, false],
      "task.late_terminal": [false, null, false, false, false, false],
      "task.reassigned": [true, null, false, false, false, true],
      "task.refused": [true, null, false, true, true, true],
      "task.progress": [true, null, false, true, true, false],
      "task.cancel_outcome": [true, null, false, true, true, false],
      "task.orphaned": [true, null, false, true, false, true],
      "task.correction": [true, null, true, false, true, true],
      "task.audit_requested": [false, null, false, false, false, false],
      "task.audit_view": [false, null, false, true, true, false],
      "task.activity": [false, null, false, true, true, false],
      "task.unreported": [true, null, false, true, true, true],
      "task.revision_requested": [true, null, false, false, false, true],
      "task.grant_requested": [false, null, false, true, true, false],
      "task.grant_decided": [true, null, false, false, false, true],
    });
    expect(isTerminalType("task.timed_out")).toBe(true);
    expect(isTerminalType("task.late_terminal")).toBe(false);
  });

  test("unknown types are a typed UNKNOWN_EVENT error", () => {
    expect(thrown(() => eventTypeRow("task.assigned")).code).toBe("UNKNOWN_EVENT");
    const record = taskRecord();
    const event = { ...taskEvent(record, 2), type: "task.teleported" };
    const error = thrown(() => validateTaskEvent(event));
    expect(error.code).toBe("UNKNOWN_EVENT");
    expect(error.details.type).toBe("task.teleported");
  });

  test("payloads are checked per type, strictly", () => {
    const record = taskRecord();
    expect(validateTaskEvent(taskEvent(record, 1, "task.created")).type).toBe("task.created");
    const answerWithoutQuestion = taskEvent(record, 3, "task.answer", { message: "yes" });
    const error = thrown(() => validateTaskEvent(answerWithoutQuestion, { pathPrefix: "/payload/payload" }));
    expect(error.code).toBe("INVALID_EVENT");
    expect(error.details.path).toBe("/payload/payload/payload/inReplyTo");
    const extra = taskEvent(record, 4, "task.completed", { summary: "done", extra: true });
    expect(thrown(() => validateTaskEvent(extra)).details.path).toBe("/payload/extra");
    const receipt = taskEvent(record, 5, "task.delivery_receipt", { eventId: "e", stage: "wake_accepted", state: "confirmed" });
    expect(validateTaskEvent(receipt).payload).toEqual({ eventId: "e", stage: "wake_accepted", state: "confirmed" });
  });
});
