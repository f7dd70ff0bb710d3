/**
 * What a restarted origin takes back from its session branch (extensions/pi-tasks/resume.ts): the
 * tasks it delegated that were still open when the session ended. A task it acknowledged or
 * cancelled stays closed, however often the session is resumed.
 */
import { describe, expect, test } from "bun:test";
import { delegatedTasks } from "../../extensions/pi-tasks/resume.ts";
import { EVENT_MESSAGE } from "../../src/protocol/session-entries.ts";

const record = (taskId: string) => ({ taskId, task: `work ${taskId}`, status: "active" });

/** A tool result entry as Pi keeps it in the branch. */
function toolResult(toolName: string, details: Record<string, unknown>, isError = false) {
  return { type: "message", message: { role: "toolResult", toolName, isError, details } };
}

/** A task event the origin's session showed. */
function shown(taskId: string, type: string, sequence: string) {
  return {
    type: "custom_message",
    customType: EVENT_MESSAGE,
    details: { role: "origin", taskId, event: { eventId: `${taskId}-${sequence}`, taskId, type, sequence }, peerKey: "worker-key" },
  };
}

describe("the tasks a restarted origin takes back", () => {
  test("only the open ones: an acknowledged or cancelled task stays closed; a failed ack or cancel closes nothing", () => {
    const branch = [
      toolResult("agent_task_send", { record: record("open-1") }),
      toolResult("agent_task_send", { record: record("acked-1") }),
      toolResult("agent_task_send", { record: record("cancelled-1") }),
      toolResult("agent_task_send", { record: record("tried-1") }),
      shown("acked-1", "task.completed", "3"),
      toolResult("agent_task_ack", { taskId: "acked-1", eventId: "e1", delivery: "accepted" }),
      toolResult("agent_task_cancel", { taskId: "cancelled-1", status: "cancelled", delivery: "accepted" }),
      toolResult("agent_task_cancel", { error: { code: "RELAY_UNAVAILABLE" } }, true),
      toolResult("agent_task_ack", { taskId: "tried-1" }, true),
      shown("open-1", "task.question", "2"),
    ];
    const taken = delegatedTasks(branch);
    expect(taken.map((task) => task.record.taskId)).toEqual(["open-1", "tried-1"]);
    expect(taken[0]!.events.map((event) => event.type)).toEqual(["task.question"]);
    expect(taken[0]!.workerKey).toBe("worker-key");
  });
});
