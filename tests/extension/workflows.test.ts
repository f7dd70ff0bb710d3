/**
 * Workflows (extensions/pi-tasks/workflows.ts, issue 39): lanes — chains side by side — and a
 * workflow cancelled as a whole. Each step's task is a stand-in here (its delegation is the
 * extension's `delegate`, proven in tests/e2e/workflow.test.ts): the runner is given one that records
 * what it sent, and the test moves each task's status as a worker would.
 */
import { expect, test } from "bun:test";
import type { ToolDeps } from "../../extensions/pi-tasks/tools/shared.ts";
import { createTaskTools } from "../../extensions/pi-tasks/tools/index.ts";
import { advanceOf, createWorkflowRunner, lanesOf, type RunningStep, type StepState } from "../../extensions/pi-tasks/workflows.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { workflowCheckMs } from "../../src/protocol/limits.ts";
import { eventually } from "../../testkit/async.ts";

/** How long a check of the runner may take to come round on a loaded machine. */
const WAIT_MS = 10_000;
const step = (task: string, lane?: string) => ({ to: "scout", task, ...(lane === undefined ? {} : { lane }) });

test("a lane is for mode lanes only: anywhere else it is INVALID_WORKFLOW, naming the step", () => {
  expect(() => lanesOf({ mode: "all", steps: [step("a"), step("b", "x")] })).toThrow(/step 2 names a lane/);
  try {
    lanesOf({ mode: "chain", steps: [step("a", "x")] });
  } catch (error) {
    expect((error as TaskError).code).toBe("INVALID_WORKFLOW");
  }
  expect(lanesOf({ mode: "lanes", steps: [step("a", "x"), step("b"), step("c", "x")] })).toEqual(["lane x", "step 2", "lane x"]);
  expect(lanesOf({ mode: "chain", steps: [step("a"), step("b")] })).toEqual(["chain", "chain"]);
  expect(lanesOf({ mode: "all", steps: [step("a"), step("b")] })).toEqual(["step 1", "step 2"]);
});

test("each lane advances on its own: the next step when the last completed, none while it runs, its end when it did not complete", () => {
  const steps: RunningStep[] = ["x", "x", "y", "y", "z"].map((lane, index) => ({ step: step(`s${index}`), lane }));
  const at = (states: StepState[]) => advanceOf(steps, (index) => states[index]!);
  expect(at(["unsent", "unsent", "unsent", "unsent", "unsent"])).toEqual({
    send: [{ index: 0 }, { index: 2 }, { index: 4 }],
    ended: false,
  });
  expect(at(["completed", "unsent", "running", "unsent", "completed"])).toEqual({ send: [{ index: 1, previous: 0 }], ended: false });
  // Lane y's first step failed: its second is never sent; lane x still runs.
  expect(at(["completed", "running", "ended", "unsent", "completed"])).toEqual({ send: [], ended: false });
  expect(at(["completed", "completed", "failed", "unsent", "ended"])).toEqual({ send: [], ended: true });
});

/** A runner over stand-in tasks: `sent` records each step's task text; `status` moves a task. */
function harness() {
  const tasks = new Map<string, { status: string }>();
  const sent: string[] = [];
  const cancelled: string[] = [];
  const wakes: string[] = [];
  const core = {
    findTask(taskId: string) {
      const found = tasks.get(taskId);
      if (found === undefined) throw new TaskError("UNKNOWN_TASK");
      return { taskId, status: found.status, events: [] } as unknown as TaskView;
    },
    listTasks: () => [...tasks].map(([taskId, task]) => ({ taskId, ...task }) as unknown as TaskView),
    async cancel(input: { taskId: string }) {
      cancelled.push(input.taskId);
      tasks.get(input.taskId)!.status = "cancelled";
      return { taskId: input.taskId, delivery: "accepted", workerLost: false, warnings: [] };
    },
  } as unknown as TaskCore;
  const deps = {
    current: () => core,
    run: <T>(operation: (core: TaskCore) => Promise<T>) => operation(core),
    ready: async () => undefined,
    wakeModel: (_type: string, content: string) => void wakes.push(content),
  } as unknown as ToolDeps;
  const runner = createWorkflowRunner(deps, (content) => wakes.push(content), {
    delegate: async (_deps, input) => {
      const taskId = `task-${sent.length + 1}`;
      sent.push(input.task);
      tasks.set(taskId, { status: "active" });
      return { created: { taskId } } as Awaited<ReturnType<typeof import("../../extensions/pi-tasks/delegate.ts").delegate>>;
    },
  });
  const status = (taskId: string, next: string) => void (tasks.get(taskId)!.status = next);
  return { runner, deps, sent, cancelled, wakes, status };
}

test("lanes run side by side: each hands its result on within the lane; one wake when every lane ended", async () => {
  const { runner, sent, wakes, status } = harness();
  const workflow = await runner.start({ mode: "lanes", steps: [step("find", "api"), step("fix", "api"), step("docs", "web")] }, undefined);
  expect(workflow.id).toMatch(/^wf-[0-9a-z]{8}$/);
  expect(sent).toEqual(["find", "docs"]);
  status("task-2", "completed"); // the web lane's only step
  status("task-1", "completed");
  await eventually(() => sent.length === 3, WAIT_MS);
  expect(sent).toHaveLength(3);
  expect(sent[2]).toStartWith("fix\n\nThe previous step's result: completed");
  expect(wakes).toEqual([]);
  status("task-3", "failed");
  await eventually(() => wakes.length === 1, WAIT_MS);
  expect(wakes).toHaveLength(1);
  expect(wakes[0]).toContain("2. scout (lane api) — task task-3: failed");
  expect(wakes[0]).toContain("3. scout (lane web) — task task-2: completed");
  expect(runner.list()).toEqual([]);
  runner.stop();
});

test("a workflow cancelled as a whole: its running steps are cancelled, the rest never sent, and no wake follows", async () => {
  const { runner, deps, sent, cancelled, wakes, status } = harness();
  const tools = Object.fromEntries(createTaskTools(deps, runner).map((tool) => [tool.name, tool]));
  const workflow = await runner.start({ mode: "lanes", steps: [step("a", "one"), step("b", "one"), step("c", "two")] }, undefined);
  status("task-2", "completed"); // lane two ended before the cancel: its outcome stays
  // Through the model's tool, by a prefix of the workflow's id (a task id would be resolved as one).
  const result = await tools.agent_task_cancel!.execute("call", { taskId: workflow.id.slice(0, 7) });
  expect(result.isError ?? false).toBe(false);
  expect(result.content[0]!.text).toContain("## workflow cancelled");
  expect(result.content[0]!.text).toContain("- step task cancelled: task-1");
  expect(result.content[0]!.text).toContain("- steps never sent: 1");
  expect(cancelled).toEqual(["task-1"]);
  status("task-1", "completed"); // whatever the worker reports after, the chain does not go on
  await Bun.sleep(3 * workflowCheckMs);
  expect(sent).toEqual(["a", "c"]);
  expect(wakes).toEqual([]);
  // Cancelled: no longer running, so a second cancel names nothing.
  const again = await tools.agent_task_cancel!.execute("call", { taskId: workflow.id });
  expect(again.isError).toBe(true);
  expect(again.content[0]!.text).toContain("UNKNOWN_WORKFLOW");
  runner.stop();
});
