/**
 * The extension's side of grants (extensions/pi-tasks/grants.ts, grant-budgets.ts): the person's default
 * grant is read strictly; a call is checked against the grant of every task this session works on;
 * a budget runs out at its edge, not before.
 */
import { describe, expect, jest, test } from "bun:test";
import { createGrantBudgets, exhausted } from "../../extensions/pi-tasks/grant-budgets.ts";
import { defaultGrant, GRANT_VARIABLE, grantVerdict } from "../../extensions/pi-tasks/grants.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { activePollIntervalMs } from "../../src/protocol/limits.ts";
import type { Grant } from "../../src/protocol/schemas.ts";
import { fakeCore, taskView } from "../helpers/extension-fakes.ts";

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

  // extensions/pi-tasks/grants.ts grantVerdict → src/protocol/grant.ts toolVerdict: `tools: []` is "no tool", not "no restriction".
  test("a task granted no tools allows none of its model's tools (pi-tasks' own stay); no tool list or one naming read differ", () => {
    const none = granted({ tools: [] });
    for (const tool of ["read", "bash", "write", "ls"])
      expect({ tool, code: grantVerdict(coreWith([none]), tool, { path: "a" }, "/p")?.code }).toEqual({
        tool,
        code: "PI_TASK_GRANT_DENIED",
      });
    expect(grantVerdict(coreWith([none]), "read", { path: "a" }, "/p")?.reason).toContain(
      `Task ${none.taskId}: read is not among the tools granted for this task (none).`,
    );
    expect(grantVerdict(coreWith([none]), "agent_task_done", { taskId: none.taskId }, "/p")).toBeUndefined();
    expect(grantVerdict(coreWith([granted({ maxTurns: 5 })]), "bash", { command: "ls" }, "/p")).toBeUndefined();
    const onlyRead = granted({ tools: ["read"] });
    expect(grantVerdict(coreWith([onlyRead]), "read", { path: "a" }, "/p")).toBeUndefined();
    expect(grantVerdict(coreWith([onlyRead]), "bash", { command: "ls" }, "/p")?.code).toBe("PI_TASK_GRANT_DENIED");
    // The person's default grant may say so too: it is read as an empty list, not as none.
    expect(defaultGrant({ [GRANT_VARIABLE]: '{"tools":[]}' })).toEqual({ tools: [] });
  });

  // extensions/pi-tasks/grants.ts grantVerdict: every open task is checked on every call — an ungranted task is skipped,
  // never taken as "nothing to enforce" for the session (no early return, nothing cached from an earlier call).
  test("a granted task that arrives after an ungranted one in the same session is still enforced", () => {
    const fake = fakeCore();
    const ungranted = taskView({ role: "worker" });
    fake.commit(ungranted);
    // The ungranted task runs: its calls pass, more than once.
    expect(grantVerdict(fake.core, "bash", { command: "ls" }, "/p")).toBeUndefined();
    expect(grantVerdict(fake.core, "bash", { command: "ls" }, "/p")).toBeUndefined();
    // A granted task becomes active while the ungranted one is still open (and listed first).
    const restricted = granted({ tools: ["read"] });
    fake.commit(restricted);
    const verdict = grantVerdict(fake.core, "bash", { command: "ls" }, "/p");
    expect(verdict?.code).toBe("PI_TASK_GRANT_DENIED");
    expect(verdict?.reason).toContain(`Task ${restricted.taskId}: bash is not among the tools granted`);
    expect(grantVerdict(fake.core, "read", { path: "a" }, "/p")).toBeUndefined();
    // And once the ungranted task is over, the granted one is still enforced alone.
    fake.commit({ ...ungranted, status: "completed" });
    expect(grantVerdict(fake.core, "bash", { command: "ls" }, "/p")?.code).toBe("PI_TASK_GRANT_DENIED");
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

interface Ended {
  readonly taskId: string;
  readonly status: string;
  readonly summary: string;
  readonly error: { code: string; message: string; retryable: boolean };
}

/**
 * GrantBudgets (extensions/pi-tasks/grant-budgets.ts createGrantBudgets) over a fake core with these tasks: `ended` records each
 * `core.done` (a done still in flight: the task stays open in the fake), `now` is the clock the budgets read.
 */
function budgetsOver(tasks: TaskView[]) {
  const fake = fakeCore(tasks);
  const ended: Ended[] = [];
  const core = {
    ...fake.core,
    done: async (input: Ended) => {
      ended.push(input);
      return { taskId: input.taskId };
    },
  } as unknown as TaskCore;
  const clock = { now: 0 };
  const budgets = createGrantBudgets({ core: () => core, now: () => clock.now });
  return { budgets, ended, clock, fake };
}

const assistant = (cost: unknown) => ({ role: "assistant", usage: { cost: { total: cost } } });
const budgetedTask = (grant: Grant): TaskView => ({ ...granted(grant), createdAt: 0 });

describe("budgets at the worker (createGrantBudgets)", () => {
  // grant-budgets.ts messageEnded: `usedBy(task.taskId).costUsd += cost` — every message's cost adds up.
  test("a cost budget adds every message's cost: messages that only exceed it together end the task", () => {
    const task = budgetedTask({ maxCostUsd: 1 });
    const { budgets, ended } = budgetsOver([task]);
    budgets.messageEnded(assistant(0.4));
    budgets.messageEnded(assistant(0.4));
    budgets.turnEnded();
    expect(ended).toEqual([]);
    budgets.messageEnded(assistant(0.3));
    budgets.turnEnded();
    expect(ended.map((end) => end.error.message)).toEqual(["The budget granted for this task ran out (cost: $1.1000 of $1)."]);
  });

  // grant-budgets.ts messageEnded: several messages of one turn add up before the turn's check.
  test("two messages of one turn that together reach the cost budget end the task at that turn's end", () => {
    const task = budgetedTask({ maxCostUsd: 1 });
    const { budgets, ended } = budgetsOver([task]);
    budgets.messageEnded(assistant(0.6));
    budgets.messageEnded(assistant(0.5));
    budgets.turnEnded();
    expect(ended.map((end) => end.taskId)).toEqual([task.taskId]);
  });

  // grant-budgets.ts turnEnded: `turns += 1` per turn end, checked at each turn end; the edge is maxTurns itself.
  test("a turn budget counts every turn end and ends the task at its last turn, reported failed with BUDGET_EXHAUSTED once", () => {
    const task = budgetedTask({ maxTurns: 3 });
    const { budgets, ended } = budgetsOver([task]);
    budgets.turnEnded();
    budgets.turnEnded();
    expect(ended).toEqual([]);
    budgets.turnEnded();
    const message = "The budget granted for this task ran out (turns: 3 of 3).";
    expect(ended).toEqual([
      { taskId: task.taskId, status: "failed", summary: message, error: { code: "BUDGET_EXHAUSTED", message, retryable: false } },
    ]);
    // The done is still in flight (the task is open): more turns do not report it again.
    budgets.turnEnded();
    budgets.turnEnded();
    expect(ended.length).toBe(1);
  });

  // grant-budgets.ts messageEnded: only an assistant message's numeric, positive cost counts.
  test("costs that are not an assistant's positive number count nothing", () => {
    const task = budgetedTask({ maxCostUsd: 1 });
    const { budgets, ended } = budgetsOver([task]);
    budgets.messageEnded({ role: "toolResult", usage: { cost: { total: 5 } } });
    budgets.messageEnded({ role: "user", usage: { cost: { total: 5 } } });
    budgets.messageEnded(assistant("5"));
    budgets.messageEnded(assistant(-5));
    budgets.messageEnded(assistant(Number.NaN));
    budgets.messageEnded(null);
    budgets.turnEnded();
    expect(ended).toEqual([]);
    // …and they took nothing off what real costs add up to.
    budgets.messageEnded(assistant(0.6));
    budgets.messageEnded(assistant(0.4));
    budgets.turnEnded();
    expect(ended.map((end) => end.error.message)).toEqual(["The budget granted for this task ran out (cost: $1.0000 of $1)."]);
  });

  // grant-budgets.ts budgeted / check: every granted open task is counted and checked; an ungranted one is skipped, not a stop.
  test("with several tasks open, each granted one is counted and ended on its own; an ungranted one is not budgeted", () => {
    const ungranted = taskView({ role: "worker" });
    const roomy = budgetedTask({ maxTurns: 10, maxCostUsd: 10 });
    const tight = budgetedTask({ maxTurns: 2, maxCostUsd: 1 });
    const alsoTight = budgetedTask({ maxCostUsd: 1 });
    const { budgets, ended } = budgetsOver([ungranted, roomy, tight, alsoTight]);
    budgets.messageEnded(assistant(0.6));
    budgets.turnEnded();
    expect(ended).toEqual([]);
    budgets.messageEnded(assistant(0.6));
    budgets.turnEnded();
    expect(ended.map((end) => end.taskId).sort()).toEqual([tight.taskId, alsoTight.taskId].sort());
    expect(ended.find((end) => end.taskId === tight.taskId)?.error.message).toContain("turns: 2 of 2");
    expect(ended.find((end) => end.taskId === alsoTight.taskId)?.error.message).toContain("cost: $1.2000 of $1");
  });

  // grant-budgets.ts usedBy: a task's count starts when it is open; an ungranted task before it changes nothing.
  test("a granted task that arrives after turns of an ungranted one counts only its own turns", () => {
    const { budgets, ended, fake } = budgetsOver([taskView({ role: "worker" })]);
    for (let turn = 0; turn < 5; turn += 1) budgets.turnEnded();
    budgets.messageEnded(assistant(5));
    const task = budgetedTask({ maxTurns: 2, maxCostUsd: 1 });
    fake.commit(task);
    budgets.turnEnded();
    expect(ended).toEqual([]);
    budgets.turnEnded();
    expect(ended.map((end) => end.error.message)).toEqual(["The budget granted for this task ran out (turns: 2 of 2)."]);
  });

  // grant-budgets.ts turnEnded / messageEnded / check: no lifetime, nothing to count — and nothing thrown into Pi's handlers.
  test("without a running lifetime nothing is counted and nothing throws", () => {
    const budgets = createGrantBudgets({ core: () => undefined, now: () => 0 });
    expect(() => {
      budgets.messageEnded(assistant(1));
      budgets.turnEnded();
    }).not.toThrow();
  });

  // grant-budgets.ts start: the timer checks the wall budget though no turn ends (a model stuck in a long tool call); stop ends it.
  test("the wall-time budget ends the task from the timer, without any turn ending; after stop() nothing is checked", () => {
    jest.useFakeTimers();
    try {
      const task = budgetedTask({ maxWallMs: 5_000 });
      const { budgets, ended, clock } = budgetsOver([task]);
      budgets.start();
      clock.now = 4_999;
      jest.advanceTimersByTime(activePollIntervalMs);
      expect(ended).toEqual([]);
      clock.now = 5_000;
      jest.advanceTimersByTime(activePollIntervalMs);
      expect(ended.map((end) => end.error.message)).toEqual(["The budget granted for this task ran out (time: 5000 ms of 5000 ms)."]);
      budgets.stop();

      const later = budgetedTask({ maxWallMs: 5_000 });
      const stopped = budgetsOver([later]);
      stopped.budgets.start();
      stopped.budgets.stop();
      stopped.clock.now = 10_000;
      jest.advanceTimersByTime(activePollIntervalMs * 3);
      expect(stopped.ended).toEqual([]);
    } finally {
      jest.useRealTimers();
    }
  });
});

// Issue 37: the grant check resolves a path as Pi's own tools do (src/workspace/tool-paths.ts) — a
// lexical `resolve` let `@/abs`, `file://` and `~` forms and a symbolic link inside a scope past it.
describe("a path in every form Pi's tools accept", () => {
  const { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } = require("node:fs") as typeof import("node:fs");
  const { join } = require("node:path") as typeof import("node:path");
  const { tmpdir, homedir } = require("node:os") as typeof import("node:os");
  const root = mkdtempSync(join(tmpdir(), "pi-tasks-grant-paths-"));
  const project = join(root, "project");
  const outside = join(root, "outside");
  mkdirSync(join(project, "src"), { recursive: true });
  mkdirSync(outside, { recursive: true });
  writeFileSync(join(outside, "secret.txt"), "secret");
  // A link inside the write scope that points out of the project.
  symlinkSync(outside, join(project, "src", "out"));
  const task = granted({ read: ["."], write: ["src"] });
  const verdict = (tool: string, path: string) => grantVerdict(coreWith([task]), tool, { path }, project)?.code;

  test("outside the scopes through @, file://, ~ or a symbolic link is denied, for reading and writing", () => {
    const escapes = [`@${join(outside, "secret.txt")}`, `file://${join(outside, "secret.txt")}`, "src/out/secret.txt", "@src/out/new.txt"];
    for (const path of escapes) {
      expect({ path, read: verdict("read", path), write: verdict("write", path) }).toEqual({
        path,
        read: "PI_TASK_GRANT_DENIED",
        write: "PI_TASK_GRANT_DENIED",
      });
    }
    // `~` is the home directory, whatever the project: outside both scopes unless the project is the home.
    if (!project.startsWith(homedir())) expect(verdict("read", "~/.ssh/id_ed25519")).toBe("PI_TASK_GRANT_DENIED");
    expect(verdict("write", `@${join(project, "docs", "x.md")}`)).toBe("PI_TASK_GRANT_DENIED");
  });

  test("inside the scopes, written in any of those forms, is allowed", () => {
    for (const path of ["src/a.ts", "@src/a.ts", `@${join(project, "src", "a.ts")}`, `file://${join(project, "src", "new", "b.ts")}`])
      expect({ path, write: verdict("write", path) }).toEqual({ path, write: undefined });
    expect(verdict("read", "@docs/readme.md")).toBeUndefined();
  });
});

// Issue 37: protocol tools skipped the grant — a coordinator allowed no writes still wrote files with agent_task_apply.
describe("applying a result under a grant", () => {
  const { existsSync, mkdtempSync } = require("node:fs") as typeof import("node:fs");
  const { join } = require("node:path") as typeof import("node:path");
  const { tmpdir } = require("node:os") as typeof import("node:os");
  const { applyResult } = require("../../extensions/pi-tasks/tools/apply.ts") as typeof import("../../extensions/pi-tasks/tools/apply.ts");

  function carrying(path: string): TaskView {
    const data = "written\n";
    const sha256 = new Bun.CryptoHasher("sha256").update(data).digest("hex");
    const content = { files: [{ path, encoding: "utf8", data, sha256 }] };
    return taskView({
      role: "origin",
      status: "completed",
      events: [{ type: "task.completed", payload: { summary: "s", result: { content } } }],
    });
  }
  const coreOf = (tasks: TaskView[]) =>
    ({ ...coreWith(tasks), getTask: (taskId: string) => tasks.find((task) => task.taskId === taskId)! }) as TaskCore;

  test("a session working under a grant applies only inside its write scopes: outside is PI_TASK_GRANT_DENIED and nothing is written", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "pi-tasks-apply-grant-"));
    const outside = carrying("docs/notes.md");
    const coordinator = granted({ write: ["src"] });
    let code: string | undefined;
    try {
      applyResult(coreOf([outside, coordinator]), outside.taskId, cwd);
    } catch (error) {
      code = (error as { code?: string }).code;
    }
    expect(code).toBe("PI_TASK_GRANT_DENIED");
    expect(existsSync(join(cwd, "docs", "notes.md"))).toBe(false);
    const inside = carrying("src/a.ts");
    expect(applyResult(coreOf([inside, coordinator]), inside.taskId, cwd).paths).toEqual(["src/a.ts"]);
    expect(existsSync(join(cwd, "src", "a.ts"))).toBe(true);
  });
});
