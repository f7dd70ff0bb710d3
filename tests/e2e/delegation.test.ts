/**
 * End to end: real Pi CLI processes (rpc mode) with the extension loaded, the real relay through
 * its CLI, and scripted models (`brain` functions in this process). The scenarios run concurrently
 * against one relay; each named test asserts one property of a scenario's recorded outcome.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { minWaitTimeoutMs } from "../../src/protocol/limits.ts";
import { RELAY_ID } from "../../src/protocol/names.ts";
import {
  stopEach,
  bannerWorkerBrain,
  archiveRecords,
  called,
  callCount,
  eventMessages,
  expectEachEventOnce,
  field,
  indexOf,
  isCustom,
  lastSeen,
  allSeen,
  toolCalls,
  wakeMessages,
  WAKE_MESSAGE,
  EVENT_MESSAGE,
  expectCleanStops,
  scenario,
  usePiFixture,
  sendThenAckBrain,
} from "../helpers/pi-kit.ts";
import { deferred } from "../../testkit/async.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import type { PiProcess, ScriptTurn } from "../helpers/pi-process.ts";

// The scenarios start in beforeAll and run concurrently; a test waits for its scenario's real processes.
setDefaultTimeout(60_000);

const fx = usePiFixture();

const pi = fx.pi;

/** Settle time after a scenario's last step: longer than one active poll, so late duplicates show. */
const SETTLE_MS = 1_500;

interface Finished {
  readonly entries: Record<string, Record<string, unknown>[]>;
  readonly codes: Record<string, number>;
  readonly killed: Record<string, boolean>;
}

/** Snapshots each process's session entries, then stops them all. */
async function finish(processes: Record<string, PiProcess>): Promise<Finished> {
  await Bun.sleep(SETTLE_MS);
  const entries: Record<string, Record<string, unknown>[]> = {};
  for (const [name, process] of Object.entries(processes)) entries[name] = await process.entries();
  return { entries, ...(await stopEach(processes)) };
}

function taskIdsSeen(turn: ScriptTurn, marker: string): string[] {
  return [
    ...new Set(
      allSeen(turn, marker)
        .map((text) => field(text, "taskId")!)
        .filter(Boolean),
    ),
  ];
}

function sentTaskIds(turn: ScriptTurn): string[] {
  return allSeen(turn, "## task sent").map((text) => field(text, "taskId")!);
}

/** Keeps a scenario's rejection from being unhandled until a test awaits it. */
// -----------------------------------------------------------------------------------------------
// Scenarios
// -----------------------------------------------------------------------------------------------

/** Origin delegates; the worker writes a file with the real `write` tool and completes. */
async function happyPath() {
  const worker = pi({
    session: "happy-worker",
    worker: true,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId === undefined) return { text: "nothing assigned" };
      if (!called(turn, "write"))
        return { tools: [{ name: "write", arguments: { path: "hello.txt", content: "hello from the worker\n" } }] };
      if (!called(turn, "agent_task_done")) {
        return {
          tools: [
            {
              name: "agent_task_done",
              arguments: { taskId, status: "completed", summary: "wrote hello.txt", result: { changedFiles: ["hello.txt"] } },
            },
          ],
        };
      }
      return { text: "finished" };
    },
  });
  const to = await waitForEndpoint(fx.relay.url, "happy-worker");
  const origin = pi({
    session: "happy-origin",
    brain: sendThenAckBrain(to, "Write hello.txt containing a greeting."),
  });
  origin.prompt("Delegate writing hello.txt to the worker.");
  await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack", 20_000);
  await worker.waitFor((record) => record.type === "entry_appended" && JSON.stringify(record).includes("task.parent_acknowledged"));
  const file = join(worker.cwd, "hello.txt");
  const written = existsSync(file) ? readFileSync(file, "utf8") : undefined;
  const done = await finish({ origin, worker });
  return { origin, worker, written, to, ...done };
}

/** The worker asks, the origin answers (inReplyTo from the rendered text), the worker completes. */
async function questionAnswer() {
  const worker = pi({
    session: "qa-worker",
    worker: true,
    brain: bannerWorkerBrain(),
  });
  const to = await waitForEndpoint(fx.relay.url, "qa-worker");
  const origin = pi({
    session: "qa-origin",
    brain: (turn) => {
      if (!called(turn, "agent_task_send"))
        return { tools: [{ name: "agent_task_send", arguments: { to, task: "Paint the banner; ask me for the colour." } }] };
      const question = lastSeen(turn, "## task question");
      if (question !== undefined && !called(turn, "agent_task_message", '"answer"')) {
        const taskId = field(question, "taskId")!;
        const inReplyTo = field(question, "eventId")!;
        return {
          tools: [
            // Refused: an answer must name a question of this task (no state change).
            { name: "agent_task_message", arguments: { taskId, type: "answer", inReplyTo: "not-a-question", message: "red" } },
            { name: "agent_task_message", arguments: { taskId, type: "answer", inReplyTo, message: "blue" } },
            { name: "agent_task_message", arguments: { taskId, type: "information", message: "FYI: the banner is 2 m wide." } },
            { name: "agent_task_message", arguments: { taskId, type: "information", message: "FYI: use matte paint." } },
          ],
        };
      }
      const completed = lastSeen(turn, "## task completed");
      if (completed !== undefined && !called(turn, "agent_task_ack"))
        return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
      return { text: "ok" };
    },
  });
  origin.prompt("Delegate the banner.");
  await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack", 20_000);
  await worker.waitFor((record) => record.type === "entry_appended" && JSON.stringify(record).includes("task.parent_acknowledged"));
  const done = await finish({ origin, worker });
  return { origin, worker, ...done };
}

/** The origin cancels once the worker has started; the worker is woken and stops. */
async function cancellation() {
  const workerStarted = deferred();
  const worker = pi({
    session: "cancel-worker",
    worker: true,
    brain: (turn) => {
      if (lastSeen(turn, "Keep working on the cancelled task") !== undefined) {
        if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command: "touch after-cancel.txt" } }] };
        return { text: "blocked, as expected" };
      }
      if (lastSeen(turn, "## task cancelled") !== undefined) return { text: "stopping" };
      if (lastSeen(turn, "## task assignment") !== undefined) {
        workerStarted.resolve();
        return { text: "working on it" };
      }
      return { text: "nothing assigned" };
    },
  });
  const to = await waitForEndpoint(fx.relay.url, "cancel-worker");
  const origin = pi({
    session: "cancel-origin",
    brain: async (turn) => {
      if (!called(turn, "agent_task_send")) return { tools: [{ name: "agent_task_send", arguments: { to, task: "A long job." } }] };
      const taskId = sentTaskIds(turn)[0]!;
      if (!called(turn, "agent_task_cancel")) {
        await workerStarted.promise;
        return { tools: [{ name: "agent_task_cancel", arguments: { taskId } }] };
      }
      if (!called(turn, "agent_task_status")) return { tools: [{ name: "agent_task_status", arguments: { taskId } }] };
      return { text: "cancelled" };
    },
  });
  origin.prompt("Delegate, then cancel.");
  await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_status", 20_000);
  const cancelledAt = await worker.waitFor(
    (record) => isCustom(record, EVENT_MESSAGE) && JSON.stringify(record).includes('"type":"task.cancelled"'),
  );
  await worker.waitFor((record) => record.type === "agent_settled", 15_000, worker.records.indexOf(cancelledAt));
  const afterCancel = worker.records.length;
  worker.prompt("Keep working on the cancelled task.");
  await worker.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "bash", 15_000, afterCancel);
  const afterCancelFile = existsSync(join(worker.cwd, "after-cancel.txt"));
  const done = await finish({ origin, worker });
  return { origin, worker, afterCancel, afterCancelFile, ...done };
}

/** Two tasks to one worker; the worker also probes the gate with an assignment in hand. */
async function twoTasks() {
  const worker = pi({
    session: "two-worker",
    worker: true,
    brain: (turn) => {
      const ids = taskIdsSeen(turn, "## task assignment");
      if (ids.length < 2) return { text: `waiting (${ids.length} assigned)` };
      const [a, b] = ids as [string, string];
      if (!called(turn, "agent_task_send")) {
        return {
          tools: [
            { name: "agent_task_send", arguments: { to: { relay: RELAY_ID, id: "someone-else" }, task: "sub-delegate" } },
            { name: "agent_task_cancel", arguments: { taskId: a } },
            { name: "agent_task_ack", arguments: { taskId: a } },
            { name: "bash", arguments: { command: "touch allowed.txt" } },
          ],
        };
      }
      if (!called(turn, "agent_task_done", a)) {
        return {
          tools: [
            { name: "agent_task_done", arguments: { taskId: a, status: "completed", summary: "first done" } },
            { name: "bash", arguments: { command: "touch sibling-a.txt" } },
          ],
        };
      }
      if (!called(turn, "agent_task_done", b)) {
        return {
          tools: [
            { name: "agent_task_done", arguments: { taskId: b, status: "completed", summary: "second done" } },
            { name: "bash", arguments: { command: "touch sibling-b.txt" } },
          ],
        };
      }
      if (!called(turn, "bash", "later.txt")) {
        return {
          tools: [
            { name: "bash", arguments: { command: "touch later.txt" } },
            { name: "agent_task_done", arguments: { taskId: b, status: "completed", summary: "second done" } },
          ],
        };
      }
      return { text: "all done" };
    },
  });
  const to = await waitForEndpoint(fx.relay.url, "two-worker");
  const origin = pi({
    session: "two-origin",
    brain: (turn) => {
      if (!called(turn, "agent_task_send")) {
        return {
          tools: [
            { name: "agent_task_send", arguments: { to, task: "Task one." } },
            { name: "agent_task_send", arguments: { to, task: "Task two." } },
          ],
        };
      }
      const completed = taskIdsSeen(turn, "## task completed");
      if (completed.length < 2) return { text: `waiting (${completed.length} completed)` };
      const [a, b] = completed as [string, string];
      if (!called(turn, "agent_task_inbox")) return { tools: [{ name: "agent_task_inbox", arguments: {} }] };
      if (!called(turn, "agent_task_status")) {
        return {
          tools: [
            { name: "agent_task_status", arguments: { taskId: a } },
            { name: "agent_task_status", arguments: { taskId: b } },
          ],
        };
      }
      if (!called(turn, "agent_task_ack", a)) return { tools: [{ name: "agent_task_ack", arguments: { taskId: a } }] };
      if (callCount(turn, "agent_task_status", b) < 2) return { tools: [{ name: "agent_task_status", arguments: { taskId: b } }] };
      if (!called(turn, "agent_task_ack", b)) return { tools: [{ name: "agent_task_ack", arguments: { taskId: b } }] };
      return { text: "both acknowledged" };
    },
  });
  origin.prompt("Delegate two tasks.");
  await origin.waitFor(
    (record) =>
      record.type === "tool_execution_end" && record.toolName === "agent_task_ack" && toolCalls(origin, "agent_task_ack").length >= 2,
    25_000,
  );
  await worker.waitFor(() => archiveRecords(worker).filter((record) => record.type === "task.parent_acknowledged").length >= 2);
  const files = Object.fromEntries(
    ["allowed.txt", "sibling-a.txt", "sibling-b.txt", "later.txt"].map((name) => [name, existsSync(join(worker.cwd, name))]),
  );
  const done = await finish({ origin, worker });
  return { origin, worker, files, ...done };
}

/** A target busy in a long bash call gets the assignment once, after its turn. */
async function busyTarget() {
  const proxy = fx.proxy();
  // Not a gated worker: an ordinary Pi may run bash without an assignment and still be a target.
  const target = pi({
    session: "busy-target",
    relayUrl: proxy.url,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId !== undefined) {
        if (!called(turn, "agent_task_done"))
          return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "done after the long job" } }] };
        return { text: "finished" };
      }
      // A long call: it ends when the test drops a release file (at most 10 s).
      if (!called(turn, "bash"))
        return {
          tools: [
            { name: "bash", arguments: { command: "for i in $(seq 1 100); do [ -f release ] && break; sleep 0.1; done; echo slept" } },
          ],
        };
      return { text: "long job finished" };
    },
  });
  const to = await waitForEndpoint(fx.relay.url, "busy-target");
  const origin = pi({
    session: "busy-origin",
    brain: (turn) => {
      if (!called(turn, "agent_task_send")) return { tools: [{ name: "agent_task_send", arguments: { to, task: "Quick task." } }] };
      const completed = lastSeen(turn, "## task completed");
      if (completed !== undefined && !called(turn, "agent_task_ack"))
        return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
      return { text: "ok" };
    },
  });
  // Both are up before the long call starts, so most of it overlaps the delivered assignment.
  await waitForEndpoint(fx.relay.url, "busy-origin");
  target.prompt("Run the long job.");
  await target.waitFor((record) => record.type === "tool_execution_start" && record.toolName === "bash");
  origin.prompt("Delegate a quick task.");
  const sent = await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_send");
  const sentAt = origin.times[origin.records.indexOf(sent)]!;
  // Keep the target busy until background passes have fetched mail a few times.
  const receivesAfterSend = () =>
    proxy.requests().filter((request) => request.operation === "receive" && request.receivedAt > sentAt).length;
  await proxy.waitFor(() => receivesAfterSend() >= 3, 8_000).catch(() => undefined);
  writeFileSync(join(target.cwd, "release"), "");
  const bashEnd = await target.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "bash", 15_000);
  const bashEndAt = target.times[target.records.indexOf(bashEnd)]!;
  // Background passes that fetched mail while the target was busy with the assignment waiting.
  const receivesDuringBusy = proxy
    .requests()
    .filter((request) => request.operation === "receive" && request.receivedAt > sentAt && request.receivedAt < bashEndAt).length;
  await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack", 20_000);
  const done = await finish({ origin, target });
  return { origin, target, receivesDuringBusy, ...done };
}

/** history #23: the origin acks (after agent_task_wait) before the completion is presented. */
async function ackBeforePresentation() {
  const worker = pi({
    session: "early-ack-worker",
    worker: true,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId === undefined) return { text: "nothing assigned" };
      if (!called(turn, "agent_task_message"))
        return { tools: [{ name: "agent_task_message", arguments: { taskId, type: "information", message: "progress: half way" } }] };
      if (!called(turn, "agent_task_done"))
        return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "all the way" } }] };
      return { text: "finished" };
    },
  });
  const to = await waitForEndpoint(fx.relay.url, "early-ack-worker");
  const origin = pi({
    session: "early-ack-origin",
    brain: (turn) => {
      if (!called(turn, "agent_task_send"))
        return { tools: [{ name: "agent_task_send", arguments: { to, task: "Report progress, then finish." } }] };
      const taskId = sentTaskIds(turn)[0]!;
      if (!called(turn, "agent_task_wait")) return { tools: [{ name: "agent_task_wait", arguments: { taskId, timeoutMs: 20_000 } }] };
      if (!called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
      return { text: "handled" };
    },
  });
  origin.prompt("Delegate and block until it is done.");
  const ack = await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack", 25_000);
  const ackIndex = origin.records.indexOf(ack);
  await origin.waitFor((record) => isCustom(record, WAKE_MESSAGE), 10_000, ackIndex);
  await origin.waitFor((record) => record.type === "agent_settled", 10_000, ackIndex + 1);
  const done = await finish({ origin, worker });
  return { origin, worker, ackIndex, ...done };
}

/** A gated worker before any assignment, and an ordinary Pi, both trying every kind of tool. */
async function gateBeforeAssignment() {
  const probe = (turn: ScriptTurn) => {
    if (called(turn, "bash")) return { text: "probed" };
    return {
      tools: [
        { name: "bash", arguments: { command: "touch blocked.txt" } },
        { name: "write", arguments: { path: "written.txt", content: "x" } },
        { name: "agent_task_inbox", arguments: {} },
        { name: "agent_task_status", arguments: { taskId: "no-such-task" } },
        { name: "agent_task_wait", arguments: { taskId: "no-such-task", timeoutMs: minWaitTimeoutMs } },
        { name: "agent_task_message", arguments: { taskId: "no-such-task", type: "information", message: "hi" } },
        { name: "agent_task_done", arguments: { taskId: "no-such-task", status: "completed", summary: "nothing" } },
        { name: "agent_task_ack", arguments: { taskId: "no-such-task" } },
        { name: "agent_task_cancel", arguments: { taskId: "no-such-task" } },
      ],
    };
  };
  const worker = pi({ session: "gate-worker", worker: true, brain: probe });
  const ordinary = pi({ session: "gate-ordinary", brain: probe });
  await waitForEndpoint(fx.relay.url, "gate-worker");
  await waitForEndpoint(fx.relay.url, "gate-ordinary");
  worker.prompt("Try your tools.");
  ordinary.prompt("Try your tools.");
  await Promise.all([worker, ordinary].map((process) => process.waitFor((record) => record.type === "agent_settled", 15_000)));
  const files = {
    worker: { bash: existsSync(join(worker.cwd, "blocked.txt")), write: existsSync(join(worker.cwd, "written.txt")) },
    ordinary: { bash: existsSync(join(ordinary.cwd, "blocked.txt")), write: existsSync(join(ordinary.cwd, "written.txt")) },
  };
  const done = await finish({ worker, ordinary });
  return { worker, ordinary, files, ...done };
}

let happy: ReturnType<typeof happyPath>;
let qa: ReturnType<typeof questionAnswer>;
let cancel: ReturnType<typeof cancellation>;
let two: ReturnType<typeof twoTasks>;
let busy: ReturnType<typeof busyTarget>;
let earlyAck: ReturnType<typeof ackBeforePresentation>;
let gate: ReturnType<typeof gateBeforeAssignment>;

beforeAll(async () => {
  happy = scenario(happyPath);
  qa = scenario(questionAnswer);
  cancel = scenario(cancellation);
  two = scenario(twoTasks);
  busy = scenario(busyTarget);
  earlyAck = scenario(ackBeforePresentation);
  gate = scenario(gateBeforeAssignment);
});

function prompts(process: PiProcess): number {
  return process.records.filter((record) => record.type === "response" && record.command === "prompt").length;
}

function eventOf(process: PiProcess, type: string) {
  return eventMessages(process).filter((message) => message.type === type);
}

// -----------------------------------------------------------------------------------------------
// Tests
// -----------------------------------------------------------------------------------------------

describe("origin ↔ worker", () => {
  test("the worker is woken with no prompt, writes a file with the real write tool and completes with result.changedFiles", async () => {
    const { worker, origin, written } = await happy;
    expect(prompts(worker)).toBe(0);
    // Everything the worker's model ever saw as user input came from pi-tasks.
    const userTexts = worker.turns.flatMap((turn) =>
      turn.messages.filter((message) => message.role === "user").map((message) => message.text),
    );
    expect(userTexts.every((text) => text.startsWith("## task assignment") || text.startsWith("pi-tasks:"))).toBe(true);
    const write = toolCalls(worker, "write");
    expect(write.map((call) => call.isError)).toEqual([false]);
    expect(written).toBe("hello from the worker\n");
    const done = toolCalls(worker, "agent_task_done");
    expect(done.map((call) => [call.isError, call.details.requestedStatus])).toEqual([[false, "completed"]]);
    // The origin's model reads the result and the changed files in the message content.
    const completed = eventOf(origin, "task.completed");
    expect(completed).toHaveLength(1);
    expect(completed[0]!.content).toContain("changedFiles");
    expect(completed[0]!.content).toContain("hello.txt");
    expect(completed[0]!.content).toContain("wrote hello.txt");
  });

  test("the origin is woken with no prompt after completion and acknowledges exactly once", async () => {
    const { origin, worker } = await happy;
    expect(prompts(origin)).toBe(1);
    const firstSettled = indexOf(origin, (record) => record.type === "agent_settled");
    const completedIndex = indexOf(origin, (record) => isCustom(record, EVENT_MESSAGE));
    expect(firstSettled).toBeGreaterThan(-1);
    expect(completedIndex).toBeGreaterThan(firstSettled);
    const [completed] = eventOf(origin, "task.completed");
    expect(wakeMessages(origin).some((wake) => wake.eventIds.includes(completed!.eventId))).toBe(true);
    const acks = toolCalls(origin, "agent_task_ack");
    expect(acks.map((call) => [call.isError, call.args.taskId])).toEqual([[false, completed!.taskId]]);
    expect(
      archiveRecords(worker)
        .filter((record) => record.type === "task.parent_acknowledged")
        .map((record) => record.taskId),
    ).toEqual([completed!.taskId]);
  });

  test("each event appears exactly once in each session; the worker's own echoes are archive entries, not messages", async () => {
    const { origin, worker, entries } = await happy;
    await expectEachEventOnce(origin, "origin", entries.origin);
    await expectEachEventOnce(worker, "worker", entries.worker);
    expect(eventMessages(worker).map((message) => message.type)).toEqual(["task.created"]);
    expect(eventMessages(origin).map((message) => message.type)).toEqual(["task.completed"]);
    const workerArchive = archiveRecords(worker).map((record) => record.type);
    expect(workerArchive).toContain("task.completed");
    expect(workerArchive).toContain("task.parent_acknowledged");
  });

  test("exactly one hidden wake per batch in each session", async () => {
    const { origin, worker } = await happy;
    expect(wakeMessages(worker).map((wake) => wake.eventIds)).toEqual([eventMessages(worker).map((message) => message.eventId)]);
    expect(wakeMessages(origin).map((wake) => wake.eventIds)).toEqual([eventMessages(origin).map((message) => message.eventId)]);
    for (const process of [origin, worker]) {
      for (const wake of process.customMessages(WAKE_MESSAGE)) expect(wake.display).toBe(false);
      for (const event of process.customMessages(EVENT_MESSAGE)) expect(event.display).toBe(true);
    }
  });

  // How soon (seconds, not the minute of history #3) is a figure of `npm run bench` ("Real Pi:
  // accepted → worker pi-tasks-event"); here: that it happens, and in which order.
  test("history #3: the idle worker is woken for the assignment, after the send began, by one wake that follows its insertion", async () => {
    const { origin, worker } = await happy;
    // From the send's start: the relay accepts (and the worker may be woken) before the tool's end record is written.
    const sent = indexOf(origin, (record) => record.type === "tool_execution_start" && record.toolName === "agent_task_send");
    const inserted = indexOf(worker, (record) => isCustom(record, EVENT_MESSAGE));
    const woken = indexOf(worker, (record) => isCustom(record, WAKE_MESSAGE));
    expect({ sent: sent >= 0, inserted: inserted >= 0, wokenAfterInsertion: woken > inserted }).toEqual({
      sent: true,
      inserted: true,
      wokenAfterInsertion: true,
    });
    expect(worker.times[woken]!).toBeGreaterThanOrEqual(origin.times[sent]!);
    const assignment = eventMessages(worker).find((message) => message.type === "task.created")!;
    expect(wakeMessages(worker)[0]!.eventIds).toContain(assignment.eventId);
    // The wake started the worker's turn: its model read the assignment.
    expect(worker.turns.some((turn) => lastSeen(turn, "## task assignment") !== undefined)).toBe(true);
  });

  test("both processes exit 0 by themselves on stdin close, with no extension errors", async () => {
    const { origin, worker, codes, killed } = await happy;
    expectCleanStops({ origin, worker }, { codes, killed });
  });
});

describe("question → answer → completion", () => {
  test("the origin answers with inReplyTo = the question's eventId from the rendered text; the worker completes with the answer", async () => {
    const { origin, worker } = await qa;
    const [question] = eventOf(origin, "task.question");
    expect(question).toBeDefined();
    expect(question!.content).toContain(`inReplyTo ${question!.eventId}`);
    const messages = toolCalls(origin, "agent_task_message");
    const wrong = messages.find((call) => call.args.inReplyTo === "not-a-question")!;
    expect(wrong.isError).toBe(true);
    expect(wrong.text).toContain("INVALID_REQUEST");
    const right = messages.find((call) => call.args.type === "answer" && call.args.inReplyTo === question!.eventId)!;
    expect(right.isError).toBe(false);
    const [answer] = eventOf(worker, "task.answer");
    expect(answer!.content).toContain(`- inReplyTo: ${question!.eventId}`);
    expect(answer!.content).toContain("blue");
    expect(answer!.content).not.toContain("red");
    const [completed] = eventOf(origin, "task.completed");
    expect(completed!.content).toContain("banner painted blue");
    expect(toolCalls(origin, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
  });

  test("history #2: with turn_end/agent_end/agent_settled refreshes around a burst of messages, nothing is inserted or woken twice", async () => {
    const { origin, worker, entries } = await qa;
    await expectEachEventOnce(origin, "origin", entries.origin);
    await expectEachEventOnce(worker, "worker", entries.worker);
    expect(eventOf(worker, "task.information")).toHaveLength(2);
    expect(eventOf(worker, "task.answer")).toHaveLength(1);
    expect(eventOf(origin, "task.question")).toHaveLength(1);
    // Origin-authored conversation never echoes back to the origin, not even as an archive entry.
    expect(eventMessages(origin).map((message) => message.type)).toEqual(["task.question", "task.completed"]);
    expect(archiveRecords(origin).filter((record) => record.type === "task.answer" || record.type === "task.information")).toEqual([]);
    // The worker's own question is an archive record on its side, never a message.
    expect(archiveRecords(worker).filter((record) => record.type === "task.question")).toHaveLength(1);
    expect(codesOk((await qa).codes)).toBe(true);
  });
});

function codesOk(codes: Record<string, number>): boolean {
  return Object.values(codes).every((code) => code === 0);
}

describe("origin cancel", () => {
  test("the worker is woken with `## task cancelled` and stops", async () => {
    const { worker } = await cancel;
    const [cancelled] = eventOf(worker, "task.cancelled");
    expect(cancelled).toBeDefined();
    expect(cancelled!.content.startsWith("## task cancelled")).toBe(true);
    expect(cancelled!.content).toContain("Stop working on this task.");
    expect(wakeMessages(worker).some((wake) => wake.eventIds.includes(cancelled!.eventId))).toBe(true);
    // The turn that saw the cancellation made no tool call.
    const sawCancel = worker.turns.find(
      (turn) => lastSeen(turn, "## task cancelled") !== undefined && lastSeen(turn, "Keep working") === undefined,
    );
    expect(sawCancel).toBeDefined();
    const cancelIndex = indexOf(
      worker,
      (record) => isCustom(record, EVENT_MESSAGE) && JSON.stringify(record).includes('"type":"task.cancelled"'),
    );
    const before = worker.records.slice(cancelIndex, (await cancel).afterCancel);
    expect(before.filter((record) => record.type === "tool_execution_start")).toEqual([]);
  });

  test("after the cancellation the worker's ordinary tools are locked again", async () => {
    const { worker, afterCancelFile } = await cancel;
    const bash = toolCalls(worker, "bash");
    expect(bash).toHaveLength(1);
    expect(bash[0]!.isError).toBe(true);
    expect(bash[0]!.text.startsWith("PI_TASK_WORKER_ASSIGNMENT_REQUIRED")).toBe(true);
    expect(afterCancelFile).toBe(false);
  });

  test("the origin sees status cancelled", async () => {
    const { origin, worker, entries, codes } = await cancel;
    const [status] = toolCalls(origin, "agent_task_status");
    expect(status!.isError).toBe(false);
    expect(field(status!.text, "status")).toBe("cancelled");
    expect(toolCalls(origin, "agent_task_cancel").map((call) => call.isError)).toEqual([false]);
    await expectEachEventOnce(origin, "origin", entries.origin);
    await expectEachEventOnce(worker, "worker", entries.worker);
    expect(codesOk(codes)).toBe(true);
  });
});

describe("two tasks in flight to one worker", () => {
  test("both are assigned, both completed, each acknowledged once", async () => {
    const { origin, worker, entries } = await two;
    const assigned = eventOf(worker, "task.created").map((message) => message.taskId);
    expect(new Set(assigned).size).toBe(2);
    expect(assigned).toHaveLength(2);
    const completed = eventOf(origin, "task.completed").map((message) => message.taskId);
    expect(completed.sort()).toEqual([...assigned].sort());
    const acks = toolCalls(origin, "agent_task_ack");
    expect(acks.map((call) => call.isError)).toEqual([false, false]);
    expect(acks.map((call) => call.args.taskId).sort()).toEqual([...assigned].sort());
    const parentAcks = archiveRecords(worker)
      .filter((record) => record.type === "task.parent_acknowledged")
      .map((record) => record.taskId);
    expect(parentAcks.sort()).toEqual([...assigned].sort());
    await expectEachEventOnce(origin, "origin", entries.origin);
    await expectEachEventOnce(worker, "worker", entries.worker);
  });

  test("history #1: the inbox is read-only and each terminal task needs its own ack", async () => {
    const { origin } = await two;
    const [inbox] = toolCalls(origin, "agent_task_inbox");
    const tasks = inbox!.details.tasks as { taskId: string; status: string; events: { type: string }[] }[];
    expect(tasks.map((task) => task.status)).toEqual(["completed", "completed"]);
    const acked = (details: Record<string, unknown>) =>
      ((details.task as { events: { type: string }[] }).events ?? []).some((event) => event.type === "task.parent_acknowledged");
    const statuses = toolCalls(origin, "agent_task_status");
    const [firstA, firstB, secondB] = statuses;
    // Reading the inbox acknowledged nothing; acknowledging A left B unacknowledged.
    expect([acked(firstA!.details), acked(firstB!.details), acked(secondB!.details)]).toEqual([false, false, false]);
    const ackA = toolCalls(origin, "agent_task_ack")[0]!;
    expect(ackA.args.taskId).toBe(firstA!.args.taskId);
    expect(secondB!.index).toBeGreaterThan(ackA.index);
    expect(secondB!.args.taskId).toBe(firstB!.args.taskId);
  });

  test("gate: send, cancel and ack are forbidden to a worker even with an assignment; ordinary tools are allowed", async () => {
    const { worker, origin, files } = await two;
    for (const name of ["agent_task_send", "agent_task_cancel", "agent_task_ack"]) {
      const [call] = toolCalls(worker, name);
      expect({ name, isError: call!.isError, reason: call!.text.split(":")[0] }).toEqual({
        name,
        isError: true,
        reason: "PI_TASK_WORKER_COORDINATION_FORBIDDEN",
      });
    }
    expect(files["allowed.txt"]).toBe(true);
    // The forbidden cancel changed nothing: the origin still got both completions.
    expect(eventOf(origin, "task.cancelled")).toEqual([]);
  });

  test("gate, history #16: after agent_task_done, sibling and later ordinary tools are blocked unless another assignment is active; a done retry stays allowed", async () => {
    const { worker, files } = await two;
    const bash = toolCalls(worker, "bash");
    const byFile = (name: string) => bash.find((call) => String(call.args.command).includes(name))!;
    expect(byFile("sibling-a.txt").isError).toBe(false);
    expect(files["sibling-a.txt"]).toBe(true);
    for (const name of ["sibling-b.txt", "later.txt"]) {
      expect({ name, isError: byFile(name).isError, blocked: byFile(name).text.startsWith("PI_TASK_WORKER_ASSIGNMENT_REQUIRED") }).toEqual({
        name,
        isError: true,
        blocked: true,
      });
      expect(files[name]).toBe(false);
    }
    const done = toolCalls(worker, "agent_task_done");
    expect(done).toHaveLength(3);
    expect(done.map((call) => call.text.startsWith("PI_TASK_WORKER"))).toEqual([false, false, false]);
    expect(done.map((call) => call.isError)).toEqual([false, false, false]);
  });
});

describe("a busy target", () => {
  test("gets the assignment exactly once, after its turn, not steered into the running turn", async () => {
    const { target } = await busy;
    const assignments = eventOf(target, "task.created");
    expect(assignments).toHaveLength(1);
    const bashEnd = indexOf(target, (record) => record.type === "tool_execution_end" && record.toolName === "bash");
    const firstSettled = indexOf(target, (record) => record.type === "agent_settled");
    const inserted = indexOf(target, (record) => isCustom(record, EVENT_MESSAGE));
    expect(bashEnd).toBeGreaterThan(-1);
    expect(firstSettled).toBeGreaterThan(bashEnd);
    expect(inserted).toBeGreaterThan(firstSettled);
    // That the end of a turn runs a pass at once (not at the next poll) is tests/extension/lifecycle.test.ts's.
    // The model's turn right after the long call did not see the assignment.
    const afterBash = target.turns.find(
      (turn) => turn.messages.at(-1)?.role === "toolResult" && turn.messages.at(-1)!.text.includes("slept"),
    );
    expect(afterBash).toBeDefined();
    expect(lastSeen(afterBash!, "## task assignment")).toBeUndefined();
    expect(wakeMessages(target)).toHaveLength(1);
    expect(toolCalls(target, "bash").map((call) => call.isError)).toEqual([false]);
  });

  test("history #14: background passes during the busy turn never re-send the queued insertion or wake", async () => {
    const { target, origin, receivesDuringBusy, entries, codes } = await busy;
    expect(receivesDuringBusy).toBeGreaterThanOrEqual(3);
    await expectEachEventOnce(target, "target", entries.target);
    await expectEachEventOnce(origin, "origin", entries.origin);
    expect(toolCalls(origin, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
    expect(codesOk(codes)).toBe(true);
  });
});

describe("history #23: parent ACK before the completion is presented", () => {
  test("the origin acks after agent_task_wait; afterwards exactly one wake follows, and it does not carry the acknowledged completion", async () => {
    const { origin, ackIndex } = await earlyAck;
    const [wait] = toolCalls(origin, "agent_task_wait");
    expect(wait!.isError).toBe(false);
    expect(wait!.text.startsWith("## task completed")).toBe(true);
    const wakesAfterAck = origin.records.slice(ackIndex).filter((record) => isCustom(record, WAKE_MESSAGE));
    expect(wakesAfterAck).toHaveLength(1);
    const [completed] = eventOf(origin, "task.completed");
    const [information] = eventOf(origin, "task.information");
    expect(completed).toBeDefined();
    expect(information).toBeDefined();
    const woken = wakeMessages(origin).flatMap((wake) => wake.eventIds);
    expect(woken).toEqual([information!.eventId]);
    expect(toolCalls(origin, "agent_task_ack")).toHaveLength(1);
  });

  test("every event still appears exactly once", async () => {
    const { origin, worker, entries, codes } = await earlyAck;
    await expectEachEventOnce(origin, "origin", entries.origin);
    await expectEachEventOnce(worker, "worker", entries.worker);
    expect(codesOk(codes)).toBe(true);
  });
});

describe("worker gate before any assignment", () => {
  test("bash and write are blocked with PI_TASK_WORKER_ASSIGNMENT_REQUIRED and have no effect", async () => {
    const { worker, files } = await gate;
    for (const name of ["bash", "write", "agent_task_message", "agent_task_done"]) {
      const [call] = toolCalls(worker, name);
      expect({ name, isError: call!.isError, blocked: call!.text.startsWith("PI_TASK_WORKER_ASSIGNMENT_REQUIRED") }).toEqual({
        name,
        isError: true,
        blocked: true,
      });
    }
    expect(files.worker).toEqual({ bash: false, write: false });
  });

  test("agent_task_inbox, agent_task_status and agent_task_wait pass the gate", async () => {
    const { worker } = await gate;
    const [inbox] = toolCalls(worker, "agent_task_inbox");
    expect(inbox!.isError).toBe(false);
    expect(inbox!.text).toContain("(no tasks)");
    for (const name of ["agent_task_status", "agent_task_wait"]) {
      const [call] = toolCalls(worker, name);
      // They reached the tool: the answer is the tool's own error about the unknown task.
      expect({ name, gated: call!.text.includes("PI_TASK_WORKER"), code: field(call!.text, "code") }).toEqual({
        name,
        gated: false,
        code: "UNKNOWN_TASK",
      });
    }
    for (const name of ["agent_task_ack", "agent_task_cancel"]) {
      const [call] = toolCalls(worker, name);
      expect(call!.text.startsWith("PI_TASK_WORKER_COORDINATION_FORBIDDEN")).toBe(true);
    }
  });

  test("a Pi without PI_TASK_WORKER is never gated", async () => {
    const { ordinary, files, codes } = await gate;
    expect(files.ordinary).toEqual({ bash: true, write: true });
    for (const call of toolCalls(ordinary))
      expect({ name: call.name, gated: call.text.includes("PI_TASK_WORKER") }).toEqual({ name: call.name, gated: false });
    // Coordination tools reached the tool and failed on the unknown task.
    for (const name of ["agent_task_ack", "agent_task_cancel", "agent_task_message", "agent_task_done"]) {
      expect({ name, code: field(toolCalls(ordinary, name)[0]!.text, "code") }).toEqual({ name, code: "UNKNOWN_TASK" });
    }
    expect(codesOk(codes)).toBe(true);
  });
});
