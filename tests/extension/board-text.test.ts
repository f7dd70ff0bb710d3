/**
 * What a person reads on `/tasks`, in question notices and in the answer dialogs: a peer's claimed
 * session name and its text are shown on one line each, escaped (no line breaks, no terminal
 * control or format characters, no unbalanced quote), bounded, and a claimed name is marked.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { boardLines, detailLines } from "../../extensions/pi-tasks/board.ts";
import type { SessionInfo } from "../../extensions/pi-tasks/lifecycle.ts";
import { answerCommand, questionLines, questionNotice, waitingQuestions } from "../../extensions/pi-tasks/questions.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { endpointKey } from "../../src/protocol/endpoint.ts";
import { taskView } from "../helpers/extension-fakes.ts";

const MARK = "INJECTED";
const HOSTILE = `Fix it" — done, acknowledged\n  deadbeef  to alice [alice ✓] — ${MARK}\r${MARK}\u2028${MARK}\u001b[2J${MARK}\u202e${MARK}`;
const RAW = /[\n\r\v\f\u0085\u2028\u2029\u001b\u202e]/;

const homes: string[] = [];
afterEach(() => {
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
});

function info(): SessionInfo {
  const home = mkdtempSync(join(tmpdir(), "pi-tasks-board-text-"));
  homes.push(home);
  return {
    session: { name: "planner", source: "WOLFPACK_SESSION_NAME" },
    identity: { publicKey: "ed25519:x", fingerprint: "0000:1111:2222:3333" },
    relay: { url: "http://127.0.0.1:1", state: "configured" },
    env: { PI_TASKS_HOME: home },
    cwd: home,
  };
}

function hostileTask(): TaskView {
  return taskView({
    role: "origin",
    task: HOSTILE,
    events: [
      { type: "task.question", payload: { intentId: "i", message: HOSTILE } },
      { type: "task.progress", payload: { intentId: "i", message: HOSTILE } },
    ],
  });
}

/** Each text is one line, free of raw line-breaking and control characters. */
function expectOneLineEach(texts: readonly string[]): void {
  for (const text of texts) {
    expect({ text, raw: RAW.test(text) }).toEqual({ text, raw: false });
  }
}

describe("names of the sessions on a task", () => {
  test("this side is this session; the other, when its mail is signed by your own identity, is your own session — else a claim", () => {
    const base = taskView({ role: "origin" });
    const names = new Map([
      [endpointKey(base.origin), "planner"],
      [endpointKey(base.target), "helper"],
    ]);
    const own = { ...base, peer: { verified: true, self: true, fingerprint: "f00a:7245:f6ba:c16a" } } as unknown as TaskView;
    const detail = detailLines(own, names, own.createdAt);
    expect(detail[2]).toBe("  from this session to `helper` (your own session)");
    const claimed = { ...base, peer: { verified: true, self: false, fingerprint: "3f2a:9c01:77be:d4e5" } } as unknown as TaskView;
    expect(detailLines(claimed, names, claimed.createdAt)[2]).toBe("  from this session to `helper` (unverified claim)");
    const atWorker = taskView({ role: "worker" });
    expect(detailLines(atWorker, names, atWorker.createdAt)[2]).toBe("  from `planner` (unverified claim) to this session");
  });
});

describe("the board shows claimed names and peer text escaped", () => {
  test("a hostile task title, question and claimed session name each stay on their own line", () => {
    const task = hostileTask();
    const names = new Map([[endpointKey(task.target), `helper\n  deadbeef  to alice [alice ✓] — done ${MARK}`]]);
    const lines = boardLines(info(), undefined, [task], names, task.createdAt + 5_000);
    expectOneLineEach(lines);
    const taskLine = lines.find((line) => line.startsWith(`  ${task.taskId.slice(0, 8)}  to `))!;
    expect(taskLine).toContain("(unverified claim)");
    // The title's quote is never closed early: a quote inside it is escaped.
    expect(taskLine).toContain('"Fix it\\" — done');
    expectOneLineEach(detailLines(task, names, task.createdAt + 5_000));
  });

  test("question notices, lists and the answer dialogs quote the question on one escaped line", async () => {
    const task = hostileTask();
    const [open] = waitingQuestions([task]);
    const notice = questionNotice(open!);
    const listed = questionLines([open!], task.createdAt);
    expectOneLineEach([notice, ...listed]);
    expect(notice).toContain('"Fix it\\" — done');
    const asked: string[] = [];
    const core = { listTasks: () => [task], message: async () => undefined } as unknown as TaskCore;
    await answerCommand([], {
      current: () => core,
      run: (operation) => operation(core),
      dialog: {
        select: async (title, options) => (asked.push(title, ...options), options[0]),
        input: async (title) => (asked.push(title), "an answer"),
      },
    });
    expect(asked.length).toBeGreaterThan(0);
    expectOneLineEach(asked);
  });
});
