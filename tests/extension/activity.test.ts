/**
 * The worker side of activity and reminders, without Pi: what the tracker makes of Pi's events,
 * and when the reminders remind the model or tell the origin (extensions/pi-tasks/activity.ts,
 * reminders.ts). The real-Pi proof is tests/e2e/activity.test.ts.
 */
import { describe, expect, jest, test } from "bun:test";
import { chainUsage, createActivityReporter, createActivityTracker, summarizeCall } from "../../extensions/pi-tasks/activity.ts";
import { usageWords } from "../../extensions/pi-tasks/describe.ts";
import { createReminders, REMINDER_MESSAGE } from "../../extensions/pi-tasks/reminders.ts";
import type { ActivityReport } from "../../src/core/activity.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { flushMicrotasks } from "../../testkit/async.ts";
import { heartbeatIntervalMs, maxActivitySummaryChars, maxDoneReminders, stuckAfterMs } from "../../src/protocol/limits.ts";
import { taskView } from "../helpers/extension-fakes.ts";

describe("the activity tracker", () => {
  test("a tool call reads as running that tool with a one-line summary; its end as running; settling as idle or waiting", () => {
    let now = 1_000;
    const tracker = createActivityTracker(() => now);
    tracker.runStarted();
    expect(tracker.snapshot(now)).toMatchObject({ state: "running", since: 1_000 });
    now = 1_500;
    tracker.toolStarted("bash", { command: "ls\n  -la" });
    expect(tracker.snapshot(now)).toMatchObject({ state: "running", tool: "bash", summary: "ls -la", since: 1_500 });
    tracker.toolEnded();
    expect(tracker.snapshot(now).tool).toBeUndefined();
    tracker.settled(true);
    expect(tracker.snapshot(now).state).toBe("waiting");
    tracker.settled(false);
    expect(tracker.snapshot(now).state).toBe("idle");
  });

  test("usage adds up assistant messages only; the last words are the last assistant text", () => {
    const tracker = createActivityTracker(() => 0);
    tracker.messageEnded({
      role: "assistant",
      content: [{ type: "text", text: "first" }],
      usage: { totalTokens: 100, cost: { total: 0.01 } },
    });
    tracker.messageEnded({ role: "user", content: "ignored", usage: { totalTokens: 999 } });
    tracker.messageEnded({
      role: "assistant",
      content: [{ type: "text", text: "second" }],
      usage: { totalTokens: 50, cost: { total: 0.02 } },
    });
    tracker.turnEnded();
    expect(tracker.snapshot(0).usage).toEqual({ turns: 1, tokens: 150, cost: 0.03 });
    expect(tracker.lastText()).toBe("second");
  });

  test("a task's usage counts from when its assignment entered the session: the person's own turns before it are not the task's", () => {
    const tracker = createActivityTracker(() => 0);
    // An interactive Pi: the person worked with the model first.
    tracker.messageEnded({
      role: "assistant",
      content: [{ type: "text", text: "yours" }],
      usage: { totalTokens: 70_000, cost: { total: 1 } },
    });
    tracker.turnEnded();
    tracker.messageEnded({ role: "custom", customType: "pi-tasks-event", content: "## task assignment", details: { taskId: "t-1" } });
    tracker.messageEnded({
      role: "assistant",
      content: [{ type: "text", text: "on it" }],
      usage: { totalTokens: 500, cost: { total: 0.25 } },
    });
    tracker.turnEnded();
    // A later event of the same task does not restart its count.
    tracker.messageEnded({ role: "custom", customType: "pi-tasks-event", content: "## task answer", details: { taskId: "t-1" } });
    expect(tracker.snapshot(0, "t-1").usage).toEqual({ turns: 1, tokens: 500, cost: 0.25 });
    expect(tracker.snapshot(0).usage).toEqual({ turns: 2, tokens: 70_500, cost: 1.25 });
    // Ended: forgotten.
    tracker.keepOnly([]);
    expect(tracker.snapshot(0, "t-1").usage).toEqual({ turns: 2, tokens: 70_500, cost: 1.25 });
  });

  test("running with nothing new for stuckAfterMs reads stuck, and not a moment before", () => {
    const tracker = createActivityTracker(() => 0);
    tracker.runStarted();
    expect(tracker.snapshot(stuckAfterMs - 1).state).toBe("running");
    expect(tracker.snapshot(stuckAfterMs).state).toBe("stuck");
  });

  test("a summary is bounded at maxActivitySummaryChars; a call without text has none", () => {
    expect(summarizeCall({ command: "x".repeat(maxActivitySummaryChars) })).toHaveLength(maxActivitySummaryChars);
    expect(summarizeCall({ command: "x".repeat(maxActivitySummaryChars + 1) })).toHaveLength(maxActivitySummaryChars);
    expect(summarizeCall({ count: 3 })).toBeUndefined();
  });
});

/** A core holding these tasks; reportUnreported and reportActivity calls are recorded. */
function fakeCore(tasks: TaskView[]) {
  const told: { taskId: string; message: string; reminders: number }[] = [];
  const reported: { taskId: string; report: ActivityReport }[] = [];
  const core = {
    activeTaskIds: () => tasks.filter((task) => task.status === "active").map((task) => task.taskId),
    findTask: (taskId: string) => tasks.find((task) => task.taskId === taskId),
    listTasks: () => tasks,
    reportUnreported: async (taskId: string, report: { message: string; reminders: number }) => {
      told.push({ taskId, ...report });
      return {} as never;
    },
    reportActivity: async (taskId: string, report: ActivityReport) => {
      reported.push({ taskId, report });
      return true as const;
    },
  } as unknown as TaskCore;
  return { core, told, reported };
}

function reminders(tasks: TaskView[]) {
  const { core, told } = fakeCore(tasks);
  const sent: { customType: string; content: string }[] = [];
  const module = createReminders({ core: () => core, sendMessage: (message) => sent.push(message), lastText: () => "the last words" });
  return { module, sent, told };
}

describe("reminders", () => {
  test("a task its model worked on and did not report: reminded once, then the origin is told with the last words", async () => {
    const task = taskView({ role: "worker" });
    const { module, sent, told } = reminders([task]);
    module.runStarted();
    module.settled();
    expect(sent.map((message) => message.customType)).toEqual([REMINDER_MESSAGE]);
    expect(sent[0]!.content).toContain(`agent_task_done`);
    expect(sent[0]!.content).toContain(task.taskId);
    module.runStarted();
    module.settled();
    expect(sent).toHaveLength(maxDoneReminders);
    expect(told).toEqual([{ taskId: task.taskId, message: "the last words", reminders: maxDoneReminders }]);
    // Once told, never again.
    module.runStarted();
    module.settled();
    expect(told).toHaveLength(1);
  });

  test("an assignment that arrived during another run waits for a run of its own", () => {
    const task = taskView({ role: "worker" });
    const { module, sent } = reminders([task]);
    module.settled();
    expect(sent).toEqual([]);
  });

  test("waiting is not forgetting: an open question of its own, a question just asked, a task delegated onward", () => {
    const asked = taskView({ role: "worker", events: [{ type: "task.question", payload: { message: "?", intentId: "i-1" } }] });
    const { module, sent } = reminders([asked]);
    module.runStarted();
    module.settled();
    expect(sent).toEqual([]);

    const plain = taskView({ role: "worker" });
    const second = reminders([plain]);
    second.module.runStarted();
    second.module.asked(plain.taskId);
    second.module.settled();
    expect(second.sent).toEqual([]);

    const parent = taskView({ role: "worker" });
    const child = {
      ...taskView({ role: "origin" }),
      taskId: "child",
      lineage: { rootTaskId: parent.taskId, parentTaskId: parent.taskId, depth: 2 },
    };
    const third = reminders([parent, child as TaskView]);
    third.module.runStarted();
    third.module.settled();
    expect(third.sent).toEqual([]);
  });

  test("a reported task (its result submitted) and the origin's own tasks are never reminded", () => {
    const done = taskView({
      role: "worker",
      terminalDelivery: { state: "pending", intentId: "i", intentType: "task.completed", envelopeId: "e", origin: { relay: "r", id: "o" } },
    });
    const mine = taskView({ role: "origin" });
    const { module, sent, told } = reminders([done, mine]);
    module.runStarted();
    module.settled();
    expect(sent).toEqual([]);
    expect(told).toEqual([]);
  });
});

describe("the activity reporter's heartbeat", () => {
  test("with nothing new, the same report (the same since) still goes to the origin every heartbeatIntervalMs", async () => {
    // Guards extensions/pi-tasks/activity.ts createActivityReporter(): the heartbeat re-arms and
    // reports whether or not anything changed (the origin's liveness needs it: src/core/liveness.ts).
    jest.useFakeTimers();
    const task = taskView({ role: "worker" });
    const { core, reported } = fakeCore([task]);
    let now = 1_000;
    const tracker = createActivityTracker(() => now);
    // Idle since 1 000 ms, and nothing happens afterwards.
    tracker.settled(false);
    const reporter = createActivityReporter({ tracker, core: () => core, now: () => now });
    reporter.start();
    try {
      const beats = 4;
      for (let beat = 0; beat < beats; beat += 1) {
        now += heartbeatIntervalMs;
        jest.advanceTimersByTime(heartbeatIntervalMs);
        await flushMicrotasks();
      }
      expect(reported.map((entry) => entry.taskId)).toEqual(Array.from({ length: beats }, () => task.taskId));
      expect(reported.map((entry) => entry.report.since)).toEqual(Array.from({ length: beats }, () => 1_000));
    } finally {
      reporter.stop();
      jest.useRealTimers();
    }
  });
});

describe("the chain's total", () => {
  // Issue 37: the origin's person sees the chain's total — A→B→C, B's report to A carries B's own
  // usage and, summed with it, what the workers of the sub-tasks B delegated last reported.
  test("a worker's report carries its own usage and the chain below its task; the origin's words show both", async () => {
    jest.useFakeTimers();
    const task = taskView({ role: "worker" });
    const sub = (usage: ActivityReport["usage"]): TaskView =>
      ({
        ...taskView({ role: "origin" }),
        lineage: { rootTaskId: task.taskId, parentTaskId: task.taskId },
        activity: { state: "idle", since: 1, heardAt: 1, usage },
      }) as unknown as TaskView;
    const unrelated = { ...sub({ turns: 100, tokens: 100 }), lineage: undefined } as unknown as TaskView;
    const tasks = [
      task,
      sub({ turns: 3, tokens: 300, cost: 0.5 }),
      sub({ turns: 1, tokens: 10, chain: { turns: 5, tokens: 50, workers: 2 } }),
      unrelated,
    ];
    const { core, reported } = fakeCore(tasks);
    let now = 1_000;
    const tracker = createActivityTracker(() => now);
    tracker.messageEnded({ role: "assistant", content: "working", usage: { totalTokens: 40, cost: { total: 0.25 } } });
    tracker.turnEnded();
    const reporter = createActivityReporter({ tracker, core: () => core, now: () => now });
    reporter.start();
    try {
      now += heartbeatIntervalMs;
      jest.advanceTimersByTime(heartbeatIntervalMs);
      await flushMicrotasks();
    } finally {
      reporter.stop();
      jest.useRealTimers();
    }
    const usage = reported.find((entry) => entry.taskId === task.taskId)!.report.usage;
    expect(usage).toEqual({ turns: 1, tokens: 40, cost: 0.25, chain: { turns: 9, tokens: 390, cost: 0.75, workers: 4 } });
    expect(chainUsage(tasks, task.taskId, { turns: 1, tokens: 40 })?.workers).toBe(4);
    expect(chainUsage([task], task.taskId, { turns: 1, tokens: 40 })).toBeUndefined();
    expect(usageWords({ state: "idle", since: 1, heardAt: 1, usage })).toBe(
      "1 turn · 40 tokens · $0.25 · chain of 4 workers: 9 turns · 390 tokens · $0.75",
    );
  });
});
