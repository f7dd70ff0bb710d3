/**
 * Grant requests for the person (extensions/pi-tasks/grant-requests.ts): announced once each,
 * listed by `/tasks` with what they add and their reason, and decided with `/tasks grant` — by
 * words, or in a dialog for whatever the person left out; a wrong word is a usage error that
 * decides nothing.
 */
import { describe, expect, test } from "bun:test";
import {
  ALLOW_CHOICE,
  announceGrantRequests,
  DENY_CHOICE,
  grantCommand,
  grantRequestLines,
  waitingGrantRequests,
} from "../../extensions/pi-tasks/grant-requests.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { failure } from "../../testkit/async.ts";
import { taskView } from "../helpers/extension-fakes.ts";

/** An origin-side task (grant: write src, no bash) whose worker asked for bash and docs/. */
function asking(reason = "the docs build needs a command"): TaskView {
  const task = taskView({
    role: "origin",
    events: [
      { type: "task.grant_requested", payload: { intentId: crypto.randomUUID(), request: { bash: true, write: ["docs"] }, reason } },
    ],
  });
  return { ...task, grant: { bash: false, write: ["src"] } };
}

const requestOf = (task: TaskView) => task.events.find((event) => event.type === "task.grant_requested")!;

function deps(tasks: TaskView[], pick?: string) {
  const decided: unknown[] = [];
  const offered: string[][] = [];
  const core = {
    listTasks: () => tasks,
    decideGrant: async (decision: { approved: boolean }) => {
      decided.push(decision);
      return decision.approved ? { grant: { bash: true, write: ["src", "docs"] } } : {};
    },
  } as unknown as TaskCore;
  const dialog =
    pick === undefined
      ? undefined
      : {
          select: async (_title: string, options: string[]) => {
            offered.push(options);
            return options.find((option) => option === pick || option.startsWith(pick));
          },
          input: async () => undefined,
        };
  return {
    decided,
    offered,
    deps: { current: () => core, run: <T>(operation: (value: TaskCore) => Promise<T>) => operation(core), dialog },
  };
}

describe("announcing and listing", () => {
  test("each waiting request is announced once, with what it adds, its reason and how to decide; /tasks lists it", () => {
    const task = asking();
    const notices: string[] = [];
    const announced = new Set<string>();
    announceGrantRequests([task], announced, (message) => notices.push(message));
    announceGrantRequests([task], announced, (message) => notices.push(message));
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain("asks for more: bash, write docs");
    expect(notices[0]).toContain('"the docs build needs a command"');
    expect(notices[0]).toContain(`/tasks grant ${requestOf(task).eventId.slice(0, 8)}`);
    const lines = grantRequestLines(waitingGrantRequests([task]), requestOf(task).occurredAt + 5_000);
    expect(lines[0]).toBe("grant requests waiting for your decision (1):");
    expect(lines[1]).toContain("5s ago: bash, write docs");
    expect(lines.at(-1)).toContain("/tasks grant");
  });

  test("a decided request, or one on a worker's task, waits for nobody", () => {
    const task = asking();
    const decided = {
      ...task,
      events: [
        ...task.events,
        {
          ...requestOf(task),
          eventId: "e-decided",
          type: "task.grant_decided" as const,
          payload: { request: requestOf(task).eventId, approved: false },
        },
      ],
    };
    expect(waitingGrantRequests([decided])).toEqual([]);
    expect(waitingGrantRequests([{ ...task, role: "worker" }])).toEqual([]);
  });
});

describe("/tasks grant", () => {
  test("with an id and allow: decides that request, approved, with the note", async () => {
    const task = asking();
    const { deps: d, decided } = deps([task]);
    const lines = await grantCommand([requestOf(task).eventId.slice(0, 8), "allow", "just", "this", "once"], d);
    expect(decided).toEqual([{ taskId: task.taskId, request: requestOf(task).eventId, approved: true, note: "just this once" }]);
    expect(lines[0]).toContain("allowed the request");
    expect(lines[0]).toContain('"docs"');
  });

  test("the one waiting request needs no id; without a word a dialog offers allow and deny", async () => {
    const task = asking();
    const { deps: d, decided, offered } = deps([task], DENY_CHOICE);
    const lines = await grantCommand([], d);
    expect(offered).toEqual([[ALLOW_CHOICE, DENY_CHOICE]]);
    expect(decided).toEqual([{ taskId: task.taskId, request: requestOf(task).eventId, approved: false }]);
    expect(lines[0]).toContain("denied the request");
  });

  test("a dismissed dialog decides nothing; a wrong word or no word without a dialog is CLI_USAGE and decides nothing", async () => {
    const task = asking();
    const dismissed = deps([task], "nothing offered matches this");
    expect(await grantCommand([], dismissed.deps)).toEqual(["pi-tasks: no decision chosen; nothing was decided"]);
    const plain = deps([task]);
    expect((await failure(grantCommand(["maybe"], plain.deps))).code).toBe("CLI_USAGE");
    expect((await failure(grantCommand([], plain.deps))).message).toContain("say allow or deny");
    expect((await failure(grantCommand(["zzzzzzzz", "allow"], plain.deps))).message).toContain("no waiting grant request");
    expect([...dismissed.decided, ...plain.decided]).toEqual([]);
  });

  test("nothing waiting: says so", async () => {
    expect(await grantCommand(["allow"], deps([]).deps)).toEqual(["pi-tasks: no grant request is waiting for you"]);
  });
});
