/**
 * Short ids (extensions/pi-tasks/short-ids.ts): every `agent_task_*` tool that names a task takes
 * the 8-character id the board shows (any unique prefix of at least `minIdPrefixChars`), resolved
 * once before the tool runs, acts on the full id and names it in its result; a prefix naming several
 * tasks is `TASK_ID_AMBIGUOUS` with the candidates, one naming none the unknown-task error. The
 * worker gate and the `/tasks` commands resolve the same way.
 */
import { describe, expect, test } from "bun:test";
import { createWorkerGate } from "../../extensions/pi-tasks/gate.ts";
import { distinctShortIds, findTask, matchId, resolveTaskId } from "../../extensions/pi-tasks/short-ids.ts";
import { auditCommand } from "../../extensions/pi-tasks/audit.ts";
import { reassignCommand } from "../../extensions/pi-tasks/reassign.ts";
import type { ToolResult } from "../../extensions/pi-tasks/tools/index.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { minIdPrefixChars, shortIdChars } from "../../src/protocol/limits.ts";
import { failure } from "../../testkit/async.ts";
import { assignmentOf, fakeCore, taskView, toolsOn } from "../helpers/extension-fakes.ts";
import { settleVirtually, virtualPair } from "../helpers/virtual-pair.ts";

const A = "3f2a91c0-1111-4111-8111-111111111111";
const B = "3f2a91c7-2222-4222-8222-222222222222";
const C = "7c1e0000-3333-4333-8333-333333333333";

function withId(task: TaskView, taskId: string): TaskView {
  return { ...task, taskId, events: task.events.map((event) => ({ ...event, taskId })) };
}

const text = (result: ToolResult) => result.content.map((part) => part.text).join("\n");
const codeOf = (result: ToolResult) => (result.details as { error?: { code: string } }).error?.code;

describe("matching a typed id", () => {
  const ids = [A, B, C];
  const match = (wanted: string) => matchId(ids, (id) => id, wanted);

  test("a full id, and a unique prefix of at least minIdPrefixChars, name one task", () => {
    expect(minIdPrefixChars).toBeLessThanOrEqual(shortIdChars);
    expect(match(A)).toEqual({ kind: "one", item: A });
    expect(match(A.slice(0, shortIdChars))).toEqual({ kind: "one", item: A });
    expect(match(C.slice(0, minIdPrefixChars))).toEqual({ kind: "one", item: C });
  });

  test("a shorter string names nothing but its exact id; a prefix of several names them all; an unknown one none", () => {
    expect(match(C.slice(0, minIdPrefixChars - 1))).toEqual({ kind: "none" });
    expect(match("3f2a91")).toEqual({ kind: "many", items: [A, B] });
    expect(match("ffffffff")).toEqual({ kind: "none" });
  });

  test("candidates are named by ids long enough to tell them apart", () => {
    expect(distinctShortIds([A, B])).toEqual(["3f2a91c0", "3f2a91c7"]);
    expect(distinctShortIds(["3f2a91c0a-x", "3f2a91c0b-y"])).toEqual(["3f2a91c0a", "3f2a91c0b"]);
  });

  test("resolveTaskId: the full id for a unique prefix; what it was given otherwise; TASK_ID_AMBIGUOUS for several", () => {
    expect(resolveTaskId(ids, "7c1e0000")).toBe(C);
    expect(resolveTaskId(ids, "no-such-task")).toBe("no-such-task");
    let thrown: unknown;
    try {
      resolveTaskId(ids, "3f2a91");
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: "TASK_ID_AMBIGUOUS", details: { taskId: "3f2a91", candidates: ["3f2a91c0", "3f2a91c7"] } });
    expect((thrown as Error).message).toContain("3f2a91c0, 3f2a91c7");
  });
});

/** Tools over a fake core whose relay operations record the input they got. */
function toolsOver(tasks: readonly TaskView[]) {
  const fake = fakeCore(tasks);
  const got: { method: string; input: unknown }[] = [];
  const record =
    (method: string) =>
    async (input: unknown, second?: unknown): Promise<unknown> => {
      got.push({ method, input: method === "reassignTask" || method === "acknowledge" ? { taskId: input, second } : input });
      const taskId = typeof input === "string" ? input : (input as { taskId: string }).taskId;
      const endpoint = { relay: "r", id: "e" };
      const terminalDelivery = { state: "accepted" };
      return {
        taskId,
        terminalDelivery,
        requestedStatus: "failed",
        observedCanonicalStatus: "failed",
        eventId: "e",
        envelopeId: "v",
        delivery: "accepted",
        workerLost: false,
        warnings: [],
        round: 1,
        previousTarget: endpoint,
        target: endpoint,
        historyTruncated: false,
      };
    };
  const recording = new Proxy(fake.core, {
    get(target, property, receiver) {
      if (typeof property === "string" && ["message", "done", "cancel", "requestRevision", "reassignTask"].includes(property))
        return record(property);
      if (property === "acknowledge") return async (input: { taskId: string }) => record("acknowledge")(input.taskId);
      return Reflect.get(target, property, receiver);
    },
  }) as TaskCore;
  return { tools: toolsOn(recording), got };
}

describe("the tools take the short ids the board shows", () => {
  const origin = [
    withId(taskView({ role: "origin" }), A),
    withId(taskView({ role: "origin" }), B),
    withId(taskView({ role: "origin", status: "completed" }), C),
  ];

  test("each tool that names a task acts on the full id of the unique task a short id names", async () => {
    const { tools, got } = toolsOver(origin);
    const short = A.slice(0, shortIdChars);
    const calls: [string, Record<string, unknown>][] = [
      ["agent_task_cancel", { taskId: short }],
      ["agent_task_ack", { taskId: short }],
      ["agent_task_message", { taskId: short, type: "information", message: "hi" }],
      ["agent_task_revise", { taskId: short, reason: "again" }],
      ["agent_task_reassign", { taskId: short }],
      ["agent_task_done", { taskId: short, status: "failed", summary: "no" }],
    ];
    for (const [name, params] of calls) {
      const result = await tools[name]!.execute("call", params as never);
      expect({ name, isError: result.isError ?? false }).toEqual({ name, isError: false });
      expect(text(result)).toContain(A);
    }
    expect(got.map((call) => (call.input as { taskId: string }).taskId)).toEqual([A, A, A, A, A, A]);
  });

  test("status and wait (taskId and taskIds) read the full ids; their text names them", async () => {
    const { tools } = toolsOver(origin);
    const status = await tools.agent_task_status!.execute("call", { taskId: A.slice(0, shortIdChars) } as never);
    expect(text(status)).toContain(`## task ${A}`);
    const waited = await tools.agent_task_wait!.execute("call", { taskId: C.slice(0, shortIdChars), timeoutMs: 1_000 } as never);
    expect(text(waited)).toContain(C);
    const many = await tools.agent_task_wait!.execute("call", {
      taskIds: [A.slice(0, shortIdChars), C.slice(0, 4)],
      timeoutMs: 1_000,
    } as never);
    expect(many.details).toMatchObject({ finished: [C], open: [A] });
    expect(text(many)).toContain(`still open: ${A} (active)`);
  });

  test("a prefix naming several tasks is TASK_ID_AMBIGUOUS with the candidates; nothing runs", async () => {
    const { tools, got } = toolsOver(origin);
    for (const name of ["agent_task_cancel", "agent_task_ack", "agent_task_status", "agent_task_apply"]) {
      const result = await tools[name]!.execute("call", { taskId: "3f2a91" } as never);
      expect({ name, code: codeOf(result) }).toEqual({ name, code: "TASK_ID_AMBIGUOUS" });
      expect(text(result)).toContain("3f2a91c0, 3f2a91c7");
    }
    const wait = await tools.agent_task_wait!.execute("call", { taskIds: ["3f2a91", C], timeoutMs: 1_000 } as never);
    expect(codeOf(wait)).toBe("TASK_ID_AMBIGUOUS");
    expect(got).toEqual([]);
  });

  test("a prefix naming no task is the unknown-task error", async () => {
    const { tools } = toolsOver(origin);
    expect(codeOf(await tools.agent_task_status!.execute("call", { taskId: "ffffffff" } as never))).toBe("UNKNOWN_TASK");
    expect(codeOf(await tools.agent_task_apply!.execute("call", { taskId: "ffffffff" } as never))).toBe("UNKNOWN_TASK");
  });
});

describe("a real core: the model's short id cancels and acknowledges the task it names", () => {
  test("agent_task_cancel and agent_task_ack with the board's 8 characters act on the task and answer its full id", async () => {
    const pair = await virtualPair();
    const created = await settleVirtually(pair.timers, pair.origin.createTask({ to: pair.worker.endpoint()!, task: "short ids" }));
    const tools = toolsOn(pair.origin, { wrap: (operation) => settleVirtually(pair.timers, operation) });
    const short = created.taskId.slice(0, shortIdChars);
    const cancelled = await tools.agent_task_cancel!.execute("call", { taskId: short } as never);
    expect(cancelled.isError ?? false).toBe(false);
    expect(text(cancelled)).toContain(`- taskId: ${created.taskId}`);
    expect(pair.origin.getTask(created.taskId).status).toBe("cancelled");
    const acked = await tools.agent_task_ack!.execute("call", { taskId: short } as never);
    expect(text(acked)).toContain(`- taskId: ${created.taskId}`);
    expect(pair.origin.getTask(created.taskId).events.some((event) => event.type === "task.parent_acknowledged")).toBe(true);
  });
});

describe("the worker gate resolves short ids as the tools do", () => {
  test("agent_task_message and agent_task_done naming the assignment by its short id are allowed", () => {
    const assigned = withId(taskView({ role: "worker" }), A);
    const fake = fakeCore([assigned]);
    const session = new Set<string>();
    const eventId = assignmentOf(assigned).eventId;
    fake.inserted.add(eventId);
    session.add(eventId);
    const gate = createWorkerGate(true, { core: () => fake.core, inSession: (id) => session.has(id) });
    const short = A.slice(0, shortIdChars);
    expect(gate.check("agent_task_message", { taskId: short, type: "question", message: "?" })).toBeUndefined();
    expect(gate.check("agent_task_done", { taskId: short, status: "completed", summary: "ok" })).toBeUndefined();
    expect(gate.check("agent_task_message", { taskId: "ffffffff", type: "question", message: "?" })?.code).toBe(
      "PI_TASK_WORKER_ASSIGNMENT_REQUIRED",
    );
  });
});

describe("the /tasks commands share the same resolution", () => {
  const tasks = [withId(taskView({ role: "origin" }), A), withId(taskView({ role: "origin" }), B)];

  test("findTask: a unique prefix finds the task; an ambiguous one names the candidates; an unknown one says no task", () => {
    expect(findTask(tasks, "3f2a91c7").taskId).toBe(B);
    expect(() => findTask(tasks, "3f2a91")).toThrow("3f2a91c0, 3f2a91c7");
    expect(() => findTask(tasks, "ffffffff")).toThrow("no task ffffffff");
  });

  test("/tasks reassign and /tasks audit refuse an ambiguous prefix with TASK_ID_AMBIGUOUS before doing anything", async () => {
    const fake = fakeCore(tasks);
    const unused = () => {
      throw new Error("nothing may run");
    };
    const reassigned = await failure(reassignCommand(["3f2a91"], { current: () => fake.core, run: unused, info: () => undefined }));
    expect(reassigned.code).toBe("TASK_ID_AMBIGUOUS");
    const audited = await failure(auditCommand(["3f2a91"], { current: () => fake.core, requestRefresh: unused, appendEntry: unused }));
    expect(audited.code).toBe("TASK_ID_AMBIGUOUS");
  });
});
