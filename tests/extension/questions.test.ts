/**
 * Questions for the person (extensions/pi-tasks/questions.ts): announced once each, listed by
 * `/tasks` with their age, and answered with `/tasks answer` — bound to the question, with a
 * dialog for whatever the person left out (a select among a question's choices).
 */
import { describe, expect, test } from "bun:test";
import { commandWords } from "../../extensions/pi-tasks/commands.ts";
import { announceQuestions, answerCommand, questionLines, waitingQuestions } from "../../extensions/pi-tasks/questions.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { taskView } from "../helpers/extension-fakes.ts";
import { failure } from "../../testkit/async.ts";
import { TaskError } from "../../src/protocol/errors.ts";

/** An origin-side task whose worker asked `message` (a question canonicalized from its intent), maybe with choices. */
function asked(message: string, choices: { choices?: string[]; defaultChoice?: string } = {}): TaskView {
  return taskView({ role: "origin", events: [{ type: "task.question", payload: { intentId: crypto.randomUUID(), message, ...choices } }] });
}

function questionOf(task: TaskView) {
  return task.events.find((event) => event.type === "task.question")!;
}

function deps(tasks: TaskView[], dialog?: { select?: string; input?: string }) {
  const sent: unknown[] = [];
  const asks: string[] = [];
  /** The options of each select dialog shown. */
  const offered: string[][] = [];
  const core = { listTasks: () => tasks, message: async (input: unknown) => void sent.push(input) } as unknown as TaskCore;
  return {
    sent,
    asks,
    offered,
    deps: {
      current: () => core,
      run: <T>(operation: (value: TaskCore) => Promise<T>) => operation(core),
      dialog:
        dialog === undefined
          ? undefined
          : {
              select: async (title: string, options: string[]) => {
                asks.push(`select: ${title}`);
                offered.push(options);
                return options.find((option) => option.includes(dialog.select ?? ""));
              },
              input: async (title: string) => {
                asks.push(`input: ${title}`);
                return dialog.input;
              },
            },
    },
  };
}

describe("announcing and listing", () => {
  test("each waiting question is announced once, and /tasks lists it with its age and how to answer", () => {
    const task = asked("Which database?");
    const notices: string[] = [];
    const announced = new Set<string>();
    announceQuestions([task], announced, (message) => notices.push(message));
    announceQuestions([task], announced, (message) => notices.push(message));
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain('"Which database?"');
    expect(notices[0]).toContain(`/tasks answer ${questionOf(task).eventId.slice(0, 8)}`);
    const lines = questionLines(waitingQuestions([task]), questionOf(task).occurredAt + 12_000);
    expect(lines[0]).toBe("questions waiting for you (1):");
    expect(lines[1]).toContain('12s ago: "Which database?"');
    expect(lines.at(-1)).toContain("/tasks answer");
  });
});

describe("/tasks answer", () => {
  test("with an id and text: sends the answer bound to that question", async () => {
    const task = asked("Which database?");
    const { deps: d, sent } = deps([task]);
    const lines = await answerCommand([questionOf(task).eventId.slice(0, 8), "Postgres", "15"], d);
    expect(sent).toEqual([{ taskId: task.taskId, type: "answer", message: "Postgres 15", inReplyTo: questionOf(task).eventId }]);
    expect(lines[0]).toContain("answered question");
  });

  test("/tasks answer 7c1e 'use Postgres' (as the README writes it): the words as a shell reads them, the quotes not sent", async () => {
    const task = asked("Which database?");
    const { deps: d, sent } = deps([task]);
    const id = questionOf(task).eventId.slice(0, 4);
    expect(commandWords(`answer ${id} 'use Postgres'`)).toEqual(["answer", id, "use Postgres"]);
    expect(commandWords(`answer "it's fine" don't`)).toEqual(["answer", "it's fine", "don't"]);
    await answerCommand(commandWords(`${id} 'use Postgres'`), d);
    expect(sent).toEqual([{ taskId: task.taskId, type: "answer", message: "use Postgres", inReplyTo: questionOf(task).eventId }]);
    const unclosed = await failure((async () => commandWords("answer 'use Postgres"))());
    expect(unclosed.code).toBe("CLI_USAGE");
    expect(unclosed.message).toBe("the quote that opens 'use is never closed; nothing was done");
  });

  test("a task's id where the question's belongs is NOT_A_QUESTION, naming the waiting questions; nothing is sent", async () => {
    const task = asked("Which database?");
    const { deps: d, sent } = deps([task]);
    const refused = await failure(answerCommand([task.taskId, "use", "Postgres"], d));
    expect(refused.code).toBe("NOT_A_QUESTION");
    expect(refused.message).toContain(`the questions waiting for you: ${questionOf(task).eventId.slice(0, 8)}`);
    expect(sent).toEqual([]);
  });

  test("the one waiting question needs no id; missing text is asked with an input dialog", async () => {
    const task = asked("Which colour?");
    const { deps: d, sent, asks } = deps([task], { input: "blue" });
    await answerCommand([], d);
    expect(asks).toEqual(['input: pi-tasks: your answer to "Which colour?"']);
    expect(sent).toEqual([{ taskId: task.taskId, type: "answer", message: "blue", inReplyTo: questionOf(task).eventId }]);
  });

  test("several questions: chosen with a select dialog, or named; without a UI the person must name one", async () => {
    const first = asked("First?");
    const second = asked("Second?");
    const picked = deps([first, second], { select: "Second?", input: "two" });
    await answerCommand([], picked.deps);
    expect(picked.sent).toEqual([{ taskId: second.taskId, type: "answer", message: "two", inReplyTo: questionOf(second).eventId }]);
    const headless = deps([first, second]);
    expect((await failure(answerCommand(["text"], headless.deps))).code).toBe("CLI_USAGE");
    expect(headless.sent).toEqual([]);
  });

  test("nothing waiting, a cancelled dialog or an empty answer sends nothing", async () => {
    expect(await answerCommand([], deps([]).deps)).toEqual(["pi-tasks: no question is waiting for you"]);
    const task = asked("?");
    const silent = deps([task], { input: "" });
    expect(await answerCommand([], silent.deps)).toEqual(["pi-tasks: no answer given; nothing was sent"]);
    expect(silent.sent).toEqual([]);
  });
});

describe("/tasks answer to a question with choices", () => {
  // Guards extensions/pi-tasks/questions.ts askAnswer: a question with choices is answered with a select among them.
  test("the person picks one of the choices in a select dialog, the suggested one first; never free text", async () => {
    const task = asked("Which colour?", { choices: ["red", "forest green", "blue"], defaultChoice: "blue" });
    const { deps: d, sent, asks, offered } = deps([task], { select: "forest", input: "purple" });
    await answerCommand([], d);
    expect(asks).toEqual(['select: pi-tasks: your answer to "Which colour?"']);
    expect(offered).toEqual([["blue", "red", "forest green"]]);
    expect(sent).toEqual([{ taskId: task.taskId, type: "answer", message: "forest green", inReplyTo: questionOf(task).eventId }]);
  });

  // Guards extensions/pi-tasks/questions.ts askAnswer: shown escaped, answered exactly as the asker wrote the choice.
  test("a choice is shown escaped (the asker wrote it) and answered exactly as written", async () => {
    const written = "yes\nrm -rf /";
    const task = asked("Go on?", { choices: [written, "no"] });
    const { deps: d, sent, offered } = deps([task], { select: "rm -rf" });
    await answerCommand([], d);
    expect(offered[0]![0]).not.toBe(written);
    expect(offered[0]![0]).not.toContain("\n");
    expect(sent).toEqual([{ taskId: task.taskId, type: "answer", message: written, inReplyTo: questionOf(task).eventId }]);
  });
});

describe("/tasks answer while the relay does not take it", () => {
  /** A core whose message fails with `error`; the answer's envelope is accepted after `acceptedAfter` passes (never: Infinity). */
  const failing = (error: TaskError, acceptedAfter = Number.POSITIVE_INFINITY) => {
    const task = asked("Which database?");
    const made = deps([task]);
    let passes = 0;
    const core = {
      listTasks: () => [task],
      message: async () => Promise.reject(error),
      refresh: async () => {
        passes += 1;
      },
      envelopeDelivery: () => (passes >= acceptedAfter ? "accepted" : "pending"),
      waitingMail: () => [{ envelopeId: "e", purpose: "answer", cause: error.details.cause, reason: "r" }],
    } as unknown as TaskCore;
    return { task, deps: { ...made.deps, current: () => core, run: <T>(operation: (value: TaskCore) => Promise<T>) => operation(core) } };
  };
  const deferred = (cause: string) =>
    new TaskError("TASK_DELIVERY_DEFERRED", { details: { taskId: "t", envelopeId: "e", delivery: "pending", cause, reason: "r" } });

  test("waiting for the worker to prove its key (after a relay restart): a short wait, and it is answered", async () => {
    const { task, deps: d } = failing(deferred("proof"), 2);
    const [line] = await answerCommand([questionOf(task).eventId.slice(0, 8), "Postgres"], d);
    expect(line).toBe(`pi-tasks: answered question ${questionOf(task).eventId.slice(0, 8)} on task ${task.taskId.slice(0, 8)}`);
  });

  test("recorded and waiting for a cause that takes longer: it says what it waits for — the relay's capacity, not a fault of the relay's reach", async () => {
    const { task, deps: d } = failing(deferred("capacity"));
    const [line] = await answerCommand([questionOf(task).eventId.slice(0, 8), "Postgres"], d);
    expect(line).toStartWith(`pi-tasks: your answer to question ${questionOf(task).eventId.slice(0, 8)}`);
    expect(line).toContain("is recorded and waits: the relay is at capacity; retried after a short cooldown");
    expect(line).not.toContain("did not take it");
  });

  test("the same relay outage before anything was recorded: not sent, nothing recorded — never 'queued', never 'unknown'", async () => {
    const { task, deps: d } = failing(new TaskError("RELAY_UNAVAILABLE"));
    const [line] = await answerCommand([questionOf(task).eventId.slice(0, 8), "Postgres"], d);
    expect(line).toContain("was not sent and nothing was recorded (RELAY_UNAVAILABLE");
    expect(line).not.toContain("queued");
  });

  test("refused by the relay (blocked): it will not be sent", async () => {
    const { task, deps: d } = failing(new TaskError("PAYLOAD_TOO_LARGE", { details: { envelopeId: "e", delivery: "blocked" } }));
    const [line] = await answerCommand([questionOf(task).eventId.slice(0, 8), "Postgres"], d);
    expect(line).toContain("was refused by the relay (PAYLOAD_TOO_LARGE");
  });
});
