import { afterEach, describe, expect, jest, test } from "bun:test";
import { createTaskTools, errorResult, type TaskToolDefinition, type ToolResult } from "../../extensions/pi-tasks/tools/index.ts";
import { createTaskCore, type TaskCore } from "../../src/core/task-core.ts";
import type { VolatileTaskSession } from "../../src/relay-client/session.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { maxTaskTextChars, minTaskTimeoutMs, waitBackoffInitialMs, maxWaitBackoffMs, minWaitTimeoutMs } from "../../src/protocol/limits.ts";
import { TOOL_PARAMETERS } from "../../src/protocol/schemas.ts";
import {
  ACCEPTED_DELIVERY,
  assignmentOf,
  BLOCKED_DELIVERY,
  type FakeCore,
  fakeCore,
  PENDING_DELIVERY,
  taskView,
} from "../helpers/extension-fakes.ts";
import { flushMicrotasks } from "../../testkit/async.ts";
import { WORKER } from "../helpers/fixtures.ts";

interface Harness {
  readonly tools: Record<string, TaskToolDefinition>;
  readonly fake: FakeCore;
  /** Operations handed to `run` (relay work), by the core method they called. */
  readonly runs: string[];
  refreshes: number;
  /** What the next `run` operation's core method returns or throws. */
  outcome: { value?: unknown; error?: unknown };
}

function harness(fake: FakeCore = fakeCore()): Harness {
  const state: Harness = { tools: {}, fake, runs: [], refreshes: 0, outcome: {} };
  const recording = new Proxy(fake.core, {
    get(target, property, receiver) {
      if (typeof property === "string" && ["createTask", "message", "done", "cancel", "acknowledge"].includes(property)) {
        return async () => {
          state.runs.push(property);
          if (state.outcome.error !== undefined) throw state.outcome.error;
          return state.outcome.value;
        };
      }
      return Reflect.get(target, property, receiver);
    },
  }) as TaskCore;
  const tools = createTaskTools({
    run: (operation) => operation(recording),
    current: () => fake.core,
    ready: async () => undefined,
    info: () => undefined,
    requestRefresh: () => {
      state.refreshes += 1;
    },
    rememberPeer: () => undefined,
    spentOn: () => undefined,
    wakeModel: () => undefined,
  });
  for (const tool of tools) state.tools[tool.name] = tool;
  return state;
}

function text(result: ToolResult): string {
  return result.content.map((part) => part.text).join("\n");
}

function expectError(result: ToolResult, code: string, retryable?: boolean): Record<string, unknown> {
  expect(result.isError).toBe(true);
  const error = (result.details as { error: { code: string; retryable: boolean; message: string; details: Record<string, unknown> } })
    .error;
  expect(error.code).toBe(code);
  expect(typeof error.message).toBe("string");
  if (retryable !== undefined) expect(error.retryable).toBe(retryable);
  expect(text(result)).toContain(`- code: ${code}`);
  expect(text(result)).toContain(`- retryable: ${error.retryable}`);
  return error.details;
}

const TO = WORKER;

afterEach(() => jest.useRealTimers());

describe("the tool surface", () => {
  test("twelve agent_task_* tools with strict parameter schemas", () => {
    const { tools } = harness();
    expect(Object.keys(tools).sort()).toEqual(Object.keys(TOOL_PARAMETERS).sort());
    for (const tool of Object.values(tools)) {
      expect(tool.parameters).toBe(TOOL_PARAMETERS[tool.name]);
      expect((tool.parameters as { additionalProperties?: unknown }).additionalProperties).toBe(false);
      expect(tool.promptSnippet.startsWith(`${tool.name}:`)).toBe(true);
      for (const guideline of tool.promptGuidelines) expect(guideline).toContain(tool.name);
    }
  });
});

describe("errors are isError results with code, retryable and details", () => {
  test("invalid input is refused before any relay request: once, by the core for relay work, by the tool for local reads", async () => {
    // A real core whose relay session must never be used.
    const untouchable = new Proxy(
      {},
      {
        get: () => () => {
          throw new Error("the relay session was used");
        },
      },
    ) as VolatileTaskSession;
    const core = createTaskCore({ store: createTaskStore(), session: untouchable });
    const h = harness();
    const tools = createTaskTools({
      run: (operation) => operation(core),
      current: () => core,
      ready: async () => undefined,
      info: () => undefined,
      requestRefresh: () => {
        h.refreshes += 1;
      },
      rememberPeer: () => undefined,
      spentOn: () => undefined,
      wakeModel: () => undefined,
    });
    const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
    const cases: [string, unknown][] = [
      ["agent_task_send", { to: TO, task: "x", extra: 1 }],
      ["agent_task_send", { to: TO, task: "x".repeat(maxTaskTextChars + 1) }],
      ["agent_task_send", { to: TO, task: "x", timeoutMs: minTaskTimeoutMs - 1 }],
      ["agent_task_send", { to: TO, task: "x", timeoutMs: minTaskTimeoutMs + 0.5 }],
      ["agent_task_message", { taskId: "t", type: "shout", message: "x" }],
      ["agent_task_done", { taskId: "t", status: "finished", summary: "s" }],
      ["agent_task_ack", {}],
      ["agent_task_cancel", { taskId: "" }],
      ["agent_task_status", { taskId: 7 }],
      ["agent_task_inbox", { all: true }],
      ["agent_task_wait", { taskId: "t", timeoutMs: minWaitTimeoutMs - 1 }],
      ["agent_task_spawn", { name: "has space" }],
      ["agent_task_spawn", { name: "w", model: "no-slash" }],
      ["agent_task_workers", { all: true }],
      ["agent_task_stop", {}],
    ];
    for (const [name, params] of cases) {
      const details = expectError(await byName[name]!.execute("call", params, undefined), "INVALID_REQUEST", false);
      expect({ name, path: typeof details.path }).toEqual({ name, path: "string" });
    }
    expect(h.refreshes).toBe(0);
    await core.close();
  });

  test("a core failure keeps its code, retryability and details (a send failure names the created task)", async () => {
    const h = harness();
    h.outcome = { error: new TaskError("RELAY_CAPACITY", { details: { taskId: "t-1", operation: "send" } }) };
    const details = expectError(await h.tools.agent_task_send!.execute("call", { to: TO, task: "x" }, undefined), "RELAY_CAPACITY", true);
    expect(details).toMatchObject({ taskId: "t-1", operation: "send" });
    expect(h.runs).toEqual(["createTask"]);
    // A failed operation requests no refresh of its own (the core does when it wrote something).
    expect(h.refreshes).toBe(0);
  });

  test("an unknown task is a non-retryable UNKNOWN_TASK naming the task", async () => {
    const h = harness();
    for (const name of ["agent_task_status", "agent_task_wait"]) {
      const details = expectError(await h.tools[name]!.execute("call", { taskId: "ghost" }, undefined), "UNKNOWN_TASK", false);
      expect(details).toEqual({ taskId: "ghost" });
    }
  });

  test("a foreign exception becomes a TASK_ERROR result, never a throw", async () => {
    const fake = fakeCore([taskView()]);
    fake.breakReads(new Error("store exploded"));
    const h = harness(fake);
    const result = await h.tools.agent_task_inbox!.execute("call", {}, undefined);
    const details = expectError(result, "TASK_ERROR", false);
    expect(details).toEqual({ cause: "store exploded" });
    expect(errorResult("plain string").isError).toBe(true);
  });
});

describe("successful operations", () => {
  test("send reports relay acceptance only (not execution) and names the task; the core, not the tool, requests the refresh", async () => {
    const h = harness();
    h.outcome = { value: { taskId: "t-9", envelopeId: "e-9", target: TO, delivery: "accepted" } };
    const result = await h.tools.agent_task_send!.execute("call", { to: TO, task: "do it" }, undefined);
    expect(result.isError).toBeUndefined();
    expect(text(result)).toContain("- taskId: t-9");
    expect(text(result)).toContain("relay acceptance only");
    expect(result.details).toEqual({ taskId: "t-9", envelopeId: "e-9", target: TO, delivery: "accepted" });
    expect(h.refreshes).toBe(0);
  });

  test("done ends the turn once delivery is accepted, not while it is pending", async () => {
    const h = harness();
    const base = { taskId: "t-1", requestedStatus: "completed", observedCanonicalStatus: "active", authority: "receiver" };
    h.outcome = { value: { ...base, terminalDelivery: ACCEPTED_DELIVERY } };
    const accepted = await h.tools.agent_task_done!.execute("call", { taskId: "t-1", status: "completed", summary: "s" }, undefined);
    expect(accepted.terminate).toBe(true);
    expect(text(accepted)).toContain("terminalDelivery: accepted");
    // The worker reads in words that the origin decides (not a canonical status it cannot change).
    expect(text(accepted)).not.toContain("canonical status");
    expect(text(accepted)).toContain("- outcome: your report reached the relay; the origin decides the outcome");
    h.outcome = { value: { ...base, terminalDelivery: PENDING_DELIVERY } };
    const pending = await h.tools.agent_task_done!.execute("call", { taskId: "t-1", status: "completed", summary: "s" }, undefined);
    expect(pending.terminate).toBeUndefined();
    expect(pending.isError).toBeUndefined();
    expect(text(pending)).toContain("- outcome: your report is queued and sent when the relay answers; the origin decides the outcome");
    expect(h.refreshes).toBe(0);
  });

  test("done whose delivery is blocked is an error with the relay's code and the blocked delivery", async () => {
    const h = harness();
    h.outcome = {
      value: {
        taskId: "t-1",
        requestedStatus: "completed",
        observedCanonicalStatus: "active",
        authority: "receiver",
        terminalDelivery: BLOCKED_DELIVERY,
      },
    };
    const result = await h.tools.agent_task_done!.execute("call", { taskId: "t-1", status: "completed", summary: "s" }, undefined);
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("- code: TARGET_NOT_REGISTERED");
    expect(result.details).toMatchObject({ taskId: "t-1", terminalDelivery: { state: "delivery_blocked" } });
    expect(result.terminate).toBeUndefined();
  });

  test("status of an assigned task repeats the assignment text; inbox lists every task read-only", async () => {
    const assigned = taskView({ task: "the original instructions" });
    const sent = taskView({ role: "origin" });
    const h = harness(fakeCore([assigned, sent]));
    const status = await h.tools.agent_task_status!.execute("call", { taskId: assigned.taskId }, undefined);
    expect(text(status)).toContain("the original instructions");
    expect(text(status)).toContain(assignmentOf(assigned).eventId);
    const inbox = await h.tools.agent_task_inbox!.execute("call", {}, undefined);
    expect((inbox.details.tasks as { taskId: string }[]).map((task) => task.taskId)).toEqual([assigned.taskId, sent.taskId]);
    expect(text(inbox)).toContain(assigned.taskId);
    expect(text(inbox)).toContain(sent.taskId);
    expect(h.runs).toEqual([]);
    expect(h.refreshes).toBe(0);
    expect(text(await harness().tools.agent_task_inbox!.execute("call", {}, undefined))).toContain("(no tasks)");
  });
});

describe("agent_task_wait", () => {
  test("times out as an error TASK_WAIT_TIMEOUT (not a success), with the task's last status", async () => {
    jest.useFakeTimers();
    const task = taskView({ role: "origin" });
    const h = harness(fakeCore([task]));
    let result: ToolResult | undefined;
    void h.tools.agent_task_wait!.execute("call", { taskId: task.taskId, timeoutMs: minWaitTimeoutMs }, undefined).then((value) => {
      result = value;
    });
    for (let elapsed = 0; elapsed < minWaitTimeoutMs + maxWaitBackoffMs && result === undefined; elapsed += 50) {
      jest.advanceTimersByTime(50);
      await flushMicrotasks();
    }
    expect(result).toBeDefined();
    const details = expectError(result!, "TASK_WAIT_TIMEOUT", true);
    expect(details).toEqual({ taskId: task.taskId, status: "active", timeoutMs: minWaitTimeoutMs });
  });

  test("re-checks local state as soon as the store commits a change, without relay requests of its own", async () => {
    jest.useFakeTimers();
    const task = taskView({ role: "origin" });
    const fake = fakeCore([task]);
    const h = harness(fake);
    let result: ToolResult | undefined;
    void h.tools.agent_task_wait!.execute("call", { taskId: task.taskId, timeoutMs: minWaitTimeoutMs * 10 }, undefined).then((value) => {
      result = value;
    });
    await flushMicrotasks();
    expect(fake.listeners()).toBe(1);
    fake.commit({ ...task, status: "completed" });
    await flushMicrotasks();
    // No timer had to fire: the commit itself woke the wait.
    expect(result).toBeDefined();
    expect(result!.isError).toBeUndefined();
    expect(result!.details).toMatchObject({ timedOut: false, task: { status: "completed" } });
    expect(text(result!)).toContain("## task completed");
    expect(h.runs).toEqual([]);
    expect(h.refreshes).toBe(1);
    expect(fake.listeners()).toBe(0);
  });

  test("backs off 250 ms doubling to 2 s between re-checks", async () => {
    jest.useFakeTimers();
    const task = taskView({ role: "origin" });
    const fake = fakeCore([task]);
    const h = harness(fake);
    let done = false;
    const controller = new AbortController();
    void h.tools.agent_task_wait!.execute("call", { taskId: task.taskId, timeoutMs: minWaitTimeoutMs * 30 }, controller.signal).then(() => {
      done = true;
    });
    for (let elapsed = 0; elapsed < 12_000; elapsed += 25) {
      jest.advanceTimersByTime(25);
      await flushMicrotasks();
    }
    const gaps = fake.reads.slice(1).map((at, index) => at - fake.reads[index]!);
    const expected: number[] = [];
    for (
      let delay = waitBackoffInitialMs;
      expected.reduce((sum, gap) => sum + gap, 0) + delay <= 12_000;
      delay = Math.min(delay * 2, maxWaitBackoffMs)
    )
      expected.push(delay);
    expect(gaps).toEqual(expected);
    expect(expected.slice(0, 4)).toEqual([waitBackoffInitialMs, waitBackoffInitialMs * 2, waitBackoffInitialMs * 4, maxWaitBackoffMs]);
    expect(h.runs).toEqual([]);
    expect(h.refreshes).toBe(1);
    expect(done).toBe(false);
    controller.abort();
    await flushMicrotasks();
    expect(done).toBe(true);
    expect(fake.listeners()).toBe(0);
  });

  test("an aborted wait ends as a retryable ABORTED error, not at its timeout", async () => {
    const task = taskView({ role: "origin" });
    const h = harness(fakeCore([task]));
    const controller = new AbortController();
    // Its timeout is far longer than the test may run: only the abort can end it.
    const pending = h.tools.agent_task_wait!.execute("call", { taskId: task.taskId, timeoutMs: minWaitTimeoutMs * 60 }, controller.signal);
    setTimeout(() => controller.abort(), 20);
    expectError(await pending, "ABORTED", true);
  });

  test("taskIds: returns when any finishes, naming which finished and which are still open", async () => {
    const first = taskView({ role: "origin" });
    const second = taskView({ role: "origin" });
    const third = taskView({ role: "origin", status: "completed" });
    const h = harness(fakeCore([first, second, third]));
    const result = await h.tools.agent_task_wait!.execute("call", { taskIds: [first.taskId, second.taskId, third.taskId] }, undefined);
    expect(result.isError).toBeUndefined();
    expect(result.details).toMatchObject({ finished: [third.taskId], open: [first.taskId, second.taskId], timedOut: false });
    expect(text(result)).toContain("## 1 of 3 tasks finished");
    expect(text(result)).toContain(`still open: ${first.taskId} (active), ${second.taskId} (active)`);
  });

  test("taskId and taskIds together, or neither, is INVALID_REQUEST", async () => {
    const task = taskView({ role: "origin" });
    const h = harness(fakeCore([task]));
    expectError(
      await h.tools.agent_task_wait!.execute("call", { taskId: task.taskId, taskIds: [task.taskId] }, undefined),
      "INVALID_REQUEST",
      false,
    );
    expectError(await h.tools.agent_task_wait!.execute("call", {}, undefined), "INVALID_REQUEST", false);
  });

  test("a task already terminal returns at once", async () => {
    const task = taskView({ role: "origin", status: "failed" });
    const h = harness(fakeCore([task]));
    const result = await h.tools.agent_task_wait!.execute("call", { taskId: task.taskId }, undefined);
    expect(result.isError).toBeUndefined();
    expect(result.details).toMatchObject({ timedOut: false, task: { status: "failed" } });
  });
});
