import { describe, expect, test } from "bun:test";
import { COORDINATION_TOOLS, createWorkerGate, isWorker, READ_ONLY_TOOLS, type WorkerGate } from "../../extensions/pi-tasks/gate.ts";
import { createTaskTools } from "../../extensions/pi-tasks/tools/index.ts";
import {
  ACCEPTED_DELIVERY,
  assignmentOf,
  BLOCKED_DELIVERY,
  type FakeCore,
  fakeCore,
  PENDING_DELIVERY,
  taskView,
  toolDepsOn,
} from "../helpers/extension-fakes.ts";
import type { TaskView } from "../../src/core/task-core.ts";

const ASSIGNMENT_REQUIRED = "PI_TASK_WORKER_ASSIGNMENT_REQUIRED";
const FORBIDDEN = "PI_TASK_WORKER_COORDINATION_FORBIDDEN";

interface Setup {
  readonly gate: WorkerGate;
  readonly fake: FakeCore;
  /** Event ids Pi recorded in the session. */
  readonly session: Set<string>;
  /** Marks a task's assignment inserted (store evidence) and recorded in the session. */
  incorporate(task: TaskView): void;
}

function setup(tasks: readonly TaskView[] = [], options: { enabled?: boolean; started?: boolean } = {}): Setup {
  const fake = fakeCore(tasks);
  const session = new Set<string>();
  const started = options.started ?? true;
  const gate = createWorkerGate(options.enabled ?? true, {
    core: () => (started ? fake.core : undefined),
    inSession: (eventId) => session.has(eventId),
  });
  return {
    gate,
    fake,
    session,
    incorporate(task) {
      const eventId = assignmentOf(task).eventId;
      fake.inserted.add(eventId);
      session.add(eventId);
    },
  };
}

function code(verdict: { code: string; reason: string } | undefined): string | undefined {
  if (verdict !== undefined) expect(verdict.reason.startsWith(`${verdict.code}:`)).toBe(true);
  return verdict?.code;
}

describe("isWorker", () => {
  test("only the exact value 1 enables the gate", () => {
    expect(isWorker({ PI_TASK_WORKER: "1" })).toBe(true);
    for (const value of [undefined, "", "0", "true", " 1", "1 ", "yes"]) expect(isWorker({ PI_TASK_WORKER: value })).toBe(false);
  });
});

describe("disabled gate (an ordinary Pi)", () => {
  test("never blocks anything, even without a lifetime", () => {
    const { gate } = setup([], { enabled: false, started: false });
    for (const tool of ["bash", "write", "agent_task_send", "agent_task_ack", "agent_task_cancel", "agent_task_done", "agent_task_message"])
      expect(gate.check(tool, {})).toBeUndefined();
    expect(gate.waiting()).toBe(false);
  });
});

describe("before any assignment", () => {
  test("inbox, status and wait are allowed; everything else needs an assignment", () => {
    const { gate } = setup();
    for (const tool of READ_ONLY_TOOLS) expect(gate.check(tool, { taskId: "x" })).toBeUndefined();
    for (const tool of ["bash", "read", "write", "edit", "agent_task_message", "agent_task_done"])
      expect(code(gate.check(tool, { taskId: "x" }))).toBe(ASSIGNMENT_REQUIRED);
    expect(gate.waiting()).toBe(true);
  });

  test("send, workflow, cancel, revise, apply, ack, reassign, spawn, workers and stop are forbidden outright (named, not read from the set)", () => {
    const { gate } = setup();
    const named = [
      "agent_task_send",
      "agent_task_workflow",
      "agent_task_cancel",
      "agent_task_revise",
      "agent_task_apply",
      "agent_task_ack",
      "agent_task_reassign",
      "agent_task_spawn",
      "agent_task_workers",
      "agent_task_stop",
    ];
    for (const tool of named) expect({ tool, code: code(gate.check(tool, { taskId: "x" })) }).toEqual({ tool, code: FORBIDDEN });
    expect([...COORDINATION_TOOLS].sort()).toEqual([...named].sort());
  });

  test("without a running lifetime ordinary tools are blocked, read-only tools still pass", () => {
    const { gate } = setup([], { started: false });
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
    expect(gate.check("agent_task_inbox", {})).toBeUndefined();
    expect(gate.waiting()).toBe(true);
  });
});

describe("an assignment authorises work only when incorporated", () => {
  test("a task in RAM whose assignment Pi recorded opens ordinary tools and messages for it", () => {
    const task = taskView();
    const { gate, incorporate } = setup([task]);
    incorporate(task);
    expect(gate.check("bash", { command: "ls" })).toBeUndefined();
    expect(gate.check("agent_task_message", { taskId: task.taskId, type: "question", message: "?" })).toBeUndefined();
    expect(gate.waiting()).toBe(false);
  });

  test("coordination tools stay forbidden with an assignment", () => {
    const task = taskView();
    const { gate, incorporate } = setup([task]);
    incorporate(task);
    for (const tool of COORDINATION_TOOLS) expect(code(gate.check(tool, { taskId: task.taskId }))).toBe(FORBIDDEN);
  });

  test("not recorded in the session (old history or a lost insertion) → blocked", () => {
    const task = taskView();
    const { gate, fake } = setup([task]);
    fake.inserted.add(assignmentOf(task).eventId);
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
  });

  test("in the session but without store insertion evidence → blocked", () => {
    const task = taskView();
    const { gate, session } = setup([task]);
    session.add(assignmentOf(task).eventId);
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
  });

  test("a task this endpoint originated never authorises its tools", () => {
    const task = taskView({ role: "origin" });
    const { gate, incorporate } = setup([task]);
    incorporate(task);
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
    expect(code(gate.check("agent_task_done", { taskId: task.taskId }))).toBe(ASSIGNMENT_REQUIRED);
  });

  test("terminal, pending-terminal or delivery-blocked tasks do not authorise ordinary tools", () => {
    for (const task of [
      taskView({ status: "completed" }),
      taskView({ terminalDelivery: PENDING_DELIVERY }),
      taskView({ terminalDelivery: ACCEPTED_DELIVERY }),
      taskView({ terminalDelivery: BLOCKED_DELIVERY }),
    ]) {
      const { gate, incorporate } = setup([task]);
      incorporate(task);
      expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
      expect(code(gate.check("agent_task_message", { taskId: task.taskId, type: "information", message: "x" }))).toBe(ASSIGNMENT_REQUIRED);
      // …but a done retry for that assigned task stays allowed.
      expect(gate.check("agent_task_done", { taskId: task.taskId, status: "completed", summary: "s" })).toBeUndefined();
    }
  });

  test("agent_task_message must name an eligible assignment of this worker", () => {
    const task = taskView();
    const { gate, incorporate } = setup([task]);
    incorporate(task);
    expect(code(gate.check("agent_task_message", { taskId: "someone-else", type: "question", message: "?" }))).toBe(ASSIGNMENT_REQUIRED);
    expect(code(gate.check("agent_task_message", { type: "question", message: "?" }))).toBe(ASSIGNMENT_REQUIRED);
    expect(code(gate.check("agent_task_message", null))).toBe(ASSIGNMENT_REQUIRED);
  });
});

describe("agent_task_done (history #16)", () => {
  test("preflighting done closes its task before sibling calls of the same batch are checked", () => {
    const task = taskView();
    const { gate, incorporate } = setup([task]);
    incorporate(task);
    expect(gate.check("agent_task_done", { taskId: task.taskId, status: "completed", summary: "s" })).toBeUndefined();
    // Same batch (the task is still active in RAM): siblings are already blocked.
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
    expect(code(gate.check("agent_task_message", { taskId: task.taskId, type: "information", message: "late" }))).toBe(ASSIGNMENT_REQUIRED);
    // A retry of done stays allowed.
    expect(gate.check("agent_task_done", { taskId: task.taskId, status: "completed", summary: "s" })).toBeUndefined();
    expect(gate.waiting()).toBe(true);
  });

  test("a done that ended in an error (refused: it submitted nothing) leaves the worker able to fix its result or ask", () => {
    const task = taskView();
    const { gate, incorporate } = setup([task]);
    incorporate(task);
    expect(gate.check("agent_task_done", { taskId: task.taskId, status: "completed", summary: "s" }, "call-1")).toBeUndefined();
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
    // Another call ending (even in an error) releases nothing.
    gate.ended("call-0", true);
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
    // The done itself was refused (e.g. INVALID_RESULT_PATH): its mark goes.
    gate.ended("call-1", true);
    expect(gate.check("bash", {})).toBeUndefined();
    expect(gate.check("agent_task_message", { taskId: task.taskId, type: "question", message: "which path?" })).toBeUndefined();
    // A done that succeeded keeps its task closed.
    expect(gate.check("agent_task_done", { taskId: task.taskId, status: "completed", summary: "s" }, "call-2")).toBeUndefined();
    gate.ended("call-2", false);
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
  });

  test("another independently active assignment still authorises work", () => {
    const first = taskView();
    const second = taskView();
    const { gate, incorporate } = setup([first, second]);
    incorporate(first);
    incorporate(second);
    expect(gate.check("agent_task_done", { taskId: first.taskId })).toBeUndefined();
    expect(gate.check("bash", {})).toBeUndefined();
    expect(code(gate.check("agent_task_message", { taskId: first.taskId, type: "information", message: "x" }))).toBe(ASSIGNMENT_REQUIRED);
    expect(gate.check("agent_task_message", { taskId: second.taskId, type: "information", message: "x" })).toBeUndefined();
    expect(gate.check("agent_task_done", { taskId: second.taskId })).toBeUndefined();
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
  });

  test("done for a task that is not this worker's assignment is blocked and closes nothing", () => {
    const task = taskView();
    const { gate, incorporate } = setup([task]);
    incorporate(task);
    expect(code(gate.check("agent_task_done", { taskId: "not-mine" }))).toBe(ASSIGNMENT_REQUIRED);
    expect(code(gate.check("agent_task_done", {}))).toBe(ASSIGNMENT_REQUIRED);
    expect(gate.check("bash", {})).toBeUndefined();
  });

  test("closing marks belong to their lifetime: a replacement core starts with none", () => {
    const task = taskView();
    const first = fakeCore([task]);
    const second = fakeCore([task]);
    let current = first;
    const eventId = assignmentOf(task).eventId;
    for (const fake of [first, second]) fake.inserted.add(eventId);
    const gate = createWorkerGate(true, { core: () => current.core, inSession: () => true });
    gate.check("agent_task_done", { taskId: task.taskId });
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
    current = second;
    expect(gate.check("bash", {})).toBeUndefined();
  });

  test("reset() (start, shutdown, relay loss) forgets closing marks", () => {
    const task = taskView();
    const { gate, incorporate } = setup([task]);
    incorporate(task);
    gate.check("agent_task_done", { taskId: task.taskId });
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
    gate.reset();
    expect(gate.check("bash", {})).toBeUndefined();
  });
});

describe("fail closed", () => {
  test("an exception while checking blocks with PI_TASK_WORKER_ASSIGNMENT_REQUIRED", () => {
    const task = taskView();
    const { gate, incorporate, fake } = setup([task]);
    incorporate(task);
    fake.breakReads();
    expect(code(gate.check("bash", {}))).toBe(ASSIGNMENT_REQUIRED);
    expect(code(gate.check("agent_task_done", { taskId: task.taskId }))).toBe(ASSIGNMENT_REQUIRED);
    // The read-only and forbidden sets are decided without touching state.
    expect(gate.check("agent_task_status", { taskId: task.taskId })).toBeUndefined();
    expect(code(gate.check("agent_task_ack", { taskId: task.taskId }))).toBe(FORBIDDEN);
  });

  test("the block reason names the code first (what the model reads)", () => {
    const { gate } = setup();
    const verdict = gate.check("bash", {})!;
    expect(verdict.reason.startsWith(`${ASSIGNMENT_REQUIRED}: `)).toBe(true);
  });

  test("every call a refusal advises succeeds when made literally by a waiting worker (no taskId needed)", async () => {
    const { gate, fake } = setup();
    // What a waiting worker is told when it tries to work (ordinary tools).
    const reasons = ["bash", "write", "read", "edit"].map((tool) => gate.check(tool, {})!.reason);
    const tools = createTaskTools({ ...toolDepsOn(fake.core), run: () => Promise.reject(new Error("no relay work expected")) });
    for (const reason of reasons) {
      const advised = [...reason.matchAll(/agent_task_\w+/g)].map((match) => match[0]);
      for (const name of advised) {
        // The literal call a model would make: the tool name with no arguments.
        expect({ name, blocked: gate.check(name, {}) }).toEqual({ name, blocked: undefined });
        const result = await tools.find((tool) => tool.name === name)!.execute("call", {}, undefined);
        expect({ name, isError: result.isError === true }).toEqual({ name, isError: false });
      }
    }
    expect(reasons.some((reason) => reason.includes("agent_task_inbox"))).toBe(true);
    expect(reasons.some((reason) => reason.includes("agent_task_wait"))).toBe(false);
  });
});
