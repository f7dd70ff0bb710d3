/**
 * The notice of a quit with work open (extensions/pi-tasks/quit-notice.ts): what stays open, one
 * line each up to `maxQuitNoticeTasks` (the rest counted), and what becomes of it — nothing when
 * nothing is open. The TUI proof is tests/e2e/tui-quit.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { openAtQuit, quitNotice } from "../../extensions/pi-tasks/quit-notice.ts";
import { maxQuitNoticeTasks } from "../../src/protocol/limits.ts";
import { taskView } from "../helpers/extension-fakes.ts";

/** A fake task view with the id `0000000N-…` (index N). */
const numbered = (index: number, options: Parameters<typeof taskView>[0]) => ({
  ...taskView(options),
  taskId: `${String(index).padStart(8, "0")}-0000-4000-8000-000000000000`,
});

describe("the quit notice", () => {
  test("nothing open, nothing said: finished and acknowledged tasks, a worker's finished side", () => {
    const acked = taskView({
      role: "origin",
      status: "completed",
      events: [
        { type: "task.completed", payload: { summary: "ok" } },
        { type: "task.parent_acknowledged", payload: {} },
      ],
    });
    const tasks = [acked, taskView({ role: "worker", status: "completed" }), taskView({ role: "origin", status: "cancelled" })];
    expect(openAtQuit(tasks)).toEqual([]);
    expect(quitNotice("s", openAtQuit(tasks), 0, false)).toBeUndefined();
  });

  test("open work of both roles and a result to acknowledge: counted in the head, each on a line, and what becomes of them", () => {
    const delegated = numbered(1, { role: "origin", status: "active" });
    const result = numbered(2, { role: "origin", status: "completed", events: [{ type: "task.completed", payload: { summary: "ok" } }] });
    const working = numbered(3, { role: "worker", status: "active" });
    const text = quitNotice("planner", openAtQuit([delegated, result, working]), 2, false)!;
    const lines = text.trimEnd().split("\n");
    expect(lines[0]).toBe("pi-tasks: planner quit with 3 tasks open (1 result not acknowledged):");
    expect(lines.slice(1, 4).map((line) => line.slice(0, 12))).toEqual(["  00000001  ", "  00000002  ", "  00000003  "]);
    expect(lines[2]).toContain("done — verify and acknowledge");
    expect(lines.slice(4)).toEqual([
      "2 workers this Pi started (not kept) stopped with it.",
      "Tasks you delegated live only in this Pi: resume this session with PI_TASKS_RESUME=1 set (PI_TASKS_RESUME=1 pi --continue here) to take back those whose workers still hold them.",
      "Tasks this session worked on: their origins see it gone and may reassign them.",
    ]);
    expect(quitNotice("planner", [delegated], 0, true)).toContain("resume this session (pi --continue here) to take back");
  });

  test(`at most ${maxQuitNoticeTasks} tasks are listed; the rest are counted`, () => {
    const open = (count: number) => Array.from({ length: count }, (_, index) => numbered(index, { status: "active" }));
    const listed = (text: string) => text.split("\n").filter((line) => /^ {2}[0-9]{8} {2}/.test(line)).length;
    const exactly = quitNotice("s", open(maxQuitNoticeTasks), 0, false)!;
    expect(listed(exactly)).toBe(maxQuitNoticeTasks);
    expect(exactly).not.toContain("more");
    const over = quitNotice("s", open(maxQuitNoticeTasks + 1), 0, false)!;
    expect(listed(over)).toBe(maxQuitNoticeTasks);
    expect(over).toContain("  … and 1 more\n");
  });
});
