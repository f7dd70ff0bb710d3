/**
 * The extension's side of grants (extensions/pi-tasks/grants.ts, budgets.ts): the person's default
 * grant is read strictly; a call is checked against the grant of every task this session works on;
 * a budget runs out at its edge, not before.
 */
import { describe, expect, test } from "bun:test";
import { exhausted } from "../../extensions/pi-tasks/budgets.ts";
import { defaultGrant, GRANT_VARIABLE, grantVerdict } from "../../extensions/pi-tasks/grants.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import type { Grant } from "../../src/protocol/schemas.ts";
import { taskView } from "../helpers/extension-fakes.ts";

function coreWith(tasks: TaskView[]): TaskCore {
  return {
    activeTaskIds: () => tasks.filter((task) => task.status === "active").map((task) => task.taskId),
    findTask: (taskId: string) => tasks.find((task) => task.taskId === taskId),
  } as unknown as TaskCore;
}

const granted = (grant: Grant, role: "worker" | "origin" = "worker"): TaskView => ({ ...taskView({ role }), grant });

describe("the person's default grant", () => {
  test("absent or empty is none; a grant is read; anything else is INVALID_CONFIGURATION naming the variable", () => {
    expect(defaultGrant({})).toBeUndefined();
    expect(defaultGrant({ [GRANT_VARIABLE]: " " })).toBeUndefined();
    expect(defaultGrant({ [GRANT_VARIABLE]: '{"bash":false,"maxTurns":3}' })).toEqual({ bash: false, maxTurns: 3 });
    for (const bad of ["not json", '{"bash":"no"}', '{"maxTurns":0}', '{"unknown":1}']) {
      expect(() => defaultGrant({ [GRANT_VARIABLE]: bad })).toThrow(expect.objectContaining({ code: "INVALID_CONFIGURATION" }));
    }
  });
});

describe("checking a call", () => {
  test("a call outside the grant of a task this session works on is PI_TASK_GRANT_DENIED, naming the task and why", () => {
    const task = granted({ bash: false });
    const verdict = grantVerdict(coreWith([task]), "bash", { command: "ls" }, "/p");
    expect(verdict?.code).toBe("PI_TASK_GRANT_DENIED");
    expect(verdict?.reason).toContain(`Task ${task.taskId}: bash is not granted for this task.`);
    expect(grantVerdict(coreWith([task]), "read", { path: "a" }, "/p")).toBeUndefined();
  });

  test("the origin's own tasks, tasks without a grant and reported tasks restrict nothing", () => {
    const reported = { ...granted({ bash: false }), terminalDelivery: { state: "pending" } } as TaskView;
    expect(
      grantVerdict(coreWith([granted({ bash: false }, "origin"), taskView({ role: "worker" }), reported]), "bash", {}, "/p"),
    ).toBeUndefined();
    expect(grantVerdict(undefined, "bash", {}, "/p")).toBeUndefined();
  });
});

describe("budgets", () => {
  test("each budget runs out at its edge, not a step before", () => {
    const task = { ...granted({ maxTurns: 3, maxCostUsd: 1, maxWallMs: 1_000 }), createdAt: 0 } as TaskView;
    expect(exhausted(task, { turns: 2, costUsd: 0.99 }, 999)).toBeUndefined();
    expect(exhausted(task, { turns: 3, costUsd: 0 }, 0)).toBe("turns: 3 of 3");
    expect(exhausted(task, { turns: 0, costUsd: 1 }, 0)).toBe("cost: $1.0000 of $1");
    expect(exhausted(task, { turns: 0, costUsd: 0 }, 1_000)).toBe("time: 1000 ms of 1000 ms");
  });
});
