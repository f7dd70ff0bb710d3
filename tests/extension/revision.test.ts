/**
 * A revised task in the extension, without Pi: its worker's model is reminded again for the new
 * round (extensions/pi-tasks/reminders.ts counts reminders and reports per round), and the origin's
 * `agent_task_apply` applies the latest round's result (extensions/pi-tasks/tools/apply.ts). The
 * core side of a revision is tests/core/revision.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createReminders, REMINDER_MESSAGE } from "../../extensions/pi-tasks/reminders.ts";
import type { ToolResult } from "../../extensions/pi-tasks/tools/index.ts";
import type { TaskView } from "../../src/core/task-core.ts";
import type { TaskEventType } from "../../src/protocol/schemas.ts";
import { maxDoneReminders } from "../../src/protocol/limits.ts";
import { ACCEPTED_DELIVERY, fakeCore, taskView, toolsOn } from "../helpers/extension-fakes.ts";
import { useCleanups } from "../helpers/cleanups.ts";

const cleanups = useCleanups();

/** Reminders over a fake core holding `task`; what they send the model and tell the origin is recorded. */
function remindersOver(task: TaskView) {
  const fake = fakeCore([task]);
  const told: { taskId: string; reminders: number }[] = [];
  Object.assign(fake.core, {
    reportUnreported: async (taskId: string, report: { reminders: number }) => {
      told.push({ taskId, reminders: report.reminders });
      return {};
    },
  });
  const sent: { customType: string; content: string }[] = [];
  const module = createReminders({ core: () => fake.core, sendMessage: (message) => sent.push(message), lastText: () => "the last words" });
  const reminders = () => sent.filter((message) => message.customType === REMINDER_MESSAGE).length;
  return { fake, module, told, reminders };
}

/** The worker's view after it reported its round (the result accepted by the relay). */
const reported = (task: TaskView): TaskView => ({ ...task, status: "completed", terminalDelivery: ACCEPTED_DELIVERY });
/** The worker's view after the origin sent the result back: active again, for round `round`. */
const revised = (task: TaskView, round: number): TaskView => ({
  ...task,
  status: "active",
  revision: round,
  terminalDelivery: { state: "not_submitted" },
});

describe("reminders count per round: a revised task is reminded again", () => {
  // Guards extensions/pi-tasks/reminders.ts roundKey: the reminder count is keyed by task and revision.
  test("a task reminded in its first round, reported, then revised is reminded again for the new round (not reported to the origin as silent)", () => {
    const task = taskView({ role: "worker" });
    const { fake, module, told, reminders } = remindersOver(task);
    module.runStarted();
    module.settled();
    expect(reminders()).toBe(maxDoneReminders);
    fake.commit(reported(task));
    fake.commit(revised(task, 1));
    // The revision arrived while no run was going: it waits for a run of its own, like an assignment.
    module.settled();
    expect(reminders()).toBe(maxDoneReminders);
    module.runStarted();
    module.settled();
    expect(reminders()).toBe(2 * maxDoneReminders);
    expect(told).toEqual([]);
  });

  // Guards extensions/pi-tasks/reminders.ts roundKey: "told the origin" is per round too.
  test("a task whose origin was told it stopped without reporting is, once revised, reminded again and reported again for that round", () => {
    const task = taskView({ role: "worker" });
    const { fake, module, told, reminders } = remindersOver(task);
    for (let run = 0; run <= maxDoneReminders; run += 1) {
      module.runStarted();
      module.settled();
    }
    expect(told).toEqual([{ taskId: task.taskId, reminders: maxDoneReminders }]);
    fake.commit(reported(task));
    fake.commit(revised(task, 1));
    module.runStarted();
    module.settled();
    expect(reminders()).toBe(2 * maxDoneReminders);
    expect(told).toHaveLength(1);
    for (let run = 0; run < maxDoneReminders; run += 1) {
      module.runStarted();
      module.settled();
    }
    expect(told).toEqual([
      { taskId: task.taskId, reminders: maxDoneReminders },
      { taskId: task.taskId, reminders: maxDoneReminders },
    ]);
    // Once told in this round, never again in it.
    module.runStarted();
    module.settled();
    expect(told).toHaveLength(2);
  });
});

/** Result content carrying one file, `report.txt`, with `text` (as src/workspace/result-content.ts carries files). */
function carrying(text: string): Record<string, unknown> {
  const sha256 = createHash("sha256").update(text).digest("hex");
  return { summary: text, result: { content: { files: [{ path: "report.txt", encoding: "utf8", data: text, sha256 }] } } };
}

/** The origin's view of a task completed in `rounds` rounds (each sent back once, but the last). */
function roundsOf(rounds: readonly Record<string, unknown>[], role: TaskView["role"] = "origin"): TaskView {
  const events: { type: TaskEventType; payload?: Record<string, unknown> }[] = [];
  for (const [index, completed] of rounds.entries()) {
    if (index > 0) events.push({ type: "task.revision_requested", payload: { reason: `round ${index}`, round: index } });
    events.push({ type: "task.completed", payload: completed });
  }
  return { ...taskView({ role, status: "completed", events }), revision: rounds.length - 1 };
}

function checkout(): string {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-apply-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function apply(task: TaskView, cwd: string): Promise<ToolResult> {
  const tools = toolsOn(fakeCore([task]).core);
  return tools.agent_task_apply!.execute("call", { taskId: task.taskId } as never, undefined, undefined, { cwd } as never);
}

const errorOf = (result: ToolResult) => (result.details as { error?: { code: string; details: Record<string, unknown> } }).error;

describe("agent_task_apply after a revision", () => {
  // Guards extensions/pi-tasks/tools/apply.ts resultContent: the latest task.completed, not the first or an earlier one.
  test("applies the latest round's result, not the first round's or the one before", async () => {
    const cwd = checkout();
    const task = roundsOf([carrying("round 0"), carrying("round 1"), carrying("round 2")]);
    const result = await apply(task, cwd);
    expect(errorOf(result)).toBeUndefined();
    expect(result.details).toMatchObject({ taskId: task.taskId, paths: ["report.txt"] });
    expect(readFileSync(join(cwd, "report.txt"), "utf8")).toBe("round 2");
  });

  // Guards extensions/pi-tasks/tools/apply.ts resultContent: no fallback to an earlier round's content.
  test("a latest round without content is NO_RESULT_CONTENT: an earlier round's files are never applied instead", async () => {
    const cwd = checkout();
    const task = roundsOf([carrying("round 0"), { summary: "explained, nothing changed" }]);
    const error = errorOf(await apply(task, cwd));
    expect(error?.code).toBe("NO_RESULT_CONTENT");
    expect(error?.details).toMatchObject({ taskId: task.taskId, status: "completed" });
    expect(existsSync(join(cwd, "report.txt"))).toBe(false);
  });

  // Guards extensions/pi-tasks/tools/apply.ts resultContent: only the task's origin applies its result.
  test("the worker's side of the same task applies nothing: NOT_PARTICIPANT", async () => {
    const cwd = checkout();
    const task = roundsOf([carrying("round 0"), carrying("round 1")], "worker");
    expect(errorOf(await apply(task, cwd))?.code).toBe("NOT_PARTICIPANT");
    expect(existsSync(join(cwd, "report.txt"))).toBe(false);
  });
});
