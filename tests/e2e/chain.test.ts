/**
 * End to end beyond one hop: real Pi 1.6 CLIs (`--mode rpc`) on one real relay, scripted brains.
 *
 * 1. A → B → C: B (a coordinator, no worker gate) delegates A's task onward to C; C asks; B raises
 *    the question on A's task (`raisesQuestion`); A's model does not answer — A's human does,
 *    through the UI path: the `notify` announcing the question, the footer, `/tasks`, then
 *    `/tasks answer <id>` whose `input` dialog is answered with an `extension_ui_response`.
 *    pi-tasks at B relays the answer down to C bound to C's own question; C completes, B completes
 *    A's task, A acknowledges.
 * 2. The depth cap and the cycle guard: C (session 3 of its chain) may not delegate to a fourth
 *    Pi D, and B may not send back to A; nothing is created or sent, and the chain still completes.
 * 3. Progress: 50 progress reports in about a second never wake the origin; at most a few are
 *    shown to its model, the rest archived; `agent_task_status` shows the newest.
 * 4. Cancel: a gate worker inside a real `bash sleep 60` is aborted within moments of the cancel
 *    (the sleep is killed); the origin hears `turn aborted` without being woken, and
 *    `agent_task_status` shows the cancel outcome.
 *
 * The scenarios start in beforeAll and run concurrently against one relay (about 8 s together on a 2-core machine).
 * Waits on what the product must do are soft where they can be: a broken product fails the
 * assertions below rather than a timeout inside a scenario.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { eventually } from "../../testkit/async.ts";
import type { FaultProxy } from "../../testkit/fault-proxy.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import {
  stopEach,
  allSeen,
  archiveRecords,
  called,
  EVENT_MESSAGE,
  eventMessages,
  expectCleanStops,
  expectEachEventOnce,
  field,
  isCustom,
  lastSeen,
  nextBoard,
  notifications,
  quotedText,
  scenario,
  statusTexts,
  usePiFixture,
  toolCalls,
  wakeMessages,
} from "../helpers/pi-kit.ts";
import { REJECTED_RECORD } from "../../extensions/pi-tasks/presenter.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { requestEnvelopes } from "../../src/protocol/wire.ts";
import type { PiProcess, RpcRecord } from "../helpers/pi-process.ts";
import { maxDelegationDepth } from "../../src/protocol/limits.ts";

setDefaultTimeout(60_000);

const fx = usePiFixture();

const pi = fx.pi;

/** Settle time after a scenario's last step: longer than one active poll, so late duplicates show. */
const SETTLE_MS = 1_500;

/** Waits like `waitFor` but answers whether it happened (an assertion then says what is missing). */
async function happened(pi: PiProcess, predicate: (record: RpcRecord) => boolean, timeoutMs: number, from = 0): Promise<boolean> {
  return await pi.waitFor(predicate, timeoutMs, from).then(
    () => true,
    () => false,
  );
}

/** Index of the first record matching from `from` on, or -1. */
function indexFrom(pi: PiProcess, predicate: (record: RpcRecord) => boolean, from: number): number {
  for (let index = from; index < pi.records.length; index += 1) if (predicate(pi.records[index]!)) return index;
  return -1;
}

interface Finished<P extends Record<string, PiProcess>> {
  readonly processes: P;
  readonly entries: Record<string, Record<string, unknown>[]>;
  readonly stopped: { codes: Record<string, number>; killed: Record<string, boolean> };
}

/** Lets late duplicates show, snapshots each process's session entries, then stops them all. */
async function finish<P extends Record<string, PiProcess>>(processes: P): Promise<Finished<P>> {
  await Bun.sleep(SETTLE_MS);
  const entries: Record<string, Record<string, unknown>[]> = {};
  for (const [name, process] of Object.entries(processes)) entries[name] = await process.entries();
  return { processes, entries, stopped: await stopEach(processes) };
}

async function expectEachOnceEverywhere(finished: Finished<Record<string, PiProcess>>): Promise<void> {
  for (const [name, process] of Object.entries(finished.processes)) await expectEachEventOnce(process, name, finished.entries[name]);
}

const isToolEnd = (name: string) => (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === name;
const isNotify = (prefix: string) => (record: RpcRecord) =>
  record.type === "extension_ui_request" && record.method === "notify" && String(record.message).startsWith(prefix);
const isEvent = (title: string) => (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith(title);
const isParentAcked = (record: RpcRecord) =>
  record.type === "entry_appended" && JSON.stringify(record).includes("task.parent_acknowledged");
const isSettled = (record: RpcRecord) => record.type === "agent_settled";

/** The text the peer wrote in an event (its first quoted block). */
function body(text: string | undefined): string | undefined {
  return quotedText(text);
}

/** Prompts and waits (softly) until the run it starts settled. */
async function promptAndSettle(pi: PiProcess, message: string, timeoutMs = 10_000): Promise<boolean> {
  const from = pi.records.length;
  pi.prompt(message);
  return await happened(pi, isSettled, timeoutMs, from);
}

/** `/tasks` at a Pi: its board lines. */
async function boardOf(pi: PiProcess): Promise<string[]> {
  const from = pi.records.length;
  pi.prompt("/tasks");
  return await nextBoard(pi, from);
}

/** The `N tasks · M active` line of a board. */
function countsLine(board: readonly string[]): string | undefined {
  return board.find((line) => /^\d+ tasks? · \d+ active/.test(line));
}

function escaped(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The models' `agent_start`s: how many runs a Pi started. */
function runs(pi: PiProcess, until = Number.POSITIVE_INFINITY): number {
  return pi.records.slice(0, until).filter((record) => record.type === "agent_start").length;
}

// -----------------------------------------------------------------------------------------------
// 1. A → B → C, a question raised up the chain and answered by A's human
// -----------------------------------------------------------------------------------------------

const CHAIN_TASK = "Make a banner for the release; delegate the painting if you like.";
const SUB_TASK = "Paint the release banner.";
const QUESTION = "Which colour should the banner be?";
const RAISED = `My worker asks: ${QUESTION}`;
const HUMAN_ANSWER = "forest green, please";
/** The coordinator's raise hint under a sub-task's question (render.ts answerHint). */
const RAISE_HINT = /raise it: agent_task_message taskId (\S+), type "question", raisesQuestion (\S+) —/;
const QUESTION_NOTICE = "pi-tasks: question on task";

async function chainQuestion() {
  const c = pi({
    session: "chain-c",
    worker: true,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId === undefined) return { text: "nothing assigned" };
      if (!called(turn, "agent_task_message", '"question"'))
        return { tools: [{ name: "agent_task_message", arguments: { taskId, type: "question", message: QUESTION } }] };
      const answer = lastSeen(turn, "## task answer");
      if (answer === undefined) return { text: "waiting for the answer" };
      if (!called(turn, "agent_task_done"))
        return {
          tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: `painted the banner ${body(answer)}` } }],
        };
      return { text: "finished" };
    },
  });
  const toC = await waitForEndpoint(fx.relay.url, "chain-c");
  const b = pi({
    session: "chain-b",
    brain: (turn) => {
      const parentId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (parentId === undefined) return { text: "nothing assigned" };
      if (!called(turn, "agent_task_send")) return { tools: [{ name: "agent_task_send", arguments: { to: toC, task: SUB_TASK } }] };
      const subId = field(lastSeen(turn, "## task sent"), "taskId");
      if (subId === undefined) return { text: "the send failed" };
      if (!called(turn, "agent_task_status")) return { tools: [{ name: "agent_task_status", arguments: { taskId: subId } }] };
      const question = lastSeen(turn, "## task question");
      if (question !== undefined && !called(turn, "agent_task_message", "raisesQuestion")) {
        // The model follows the rendered hint; without one it uses what it knows, so the scenario
        // goes on and a test names the missing hint.
        const hint = question.match(RAISE_HINT);
        const raise = {
          taskId: hint?.[1] ?? parentId,
          type: "question",
          message: RAISED,
          raisesQuestion: hint?.[2] ?? field(question, "eventId")!,
        };
        return { tools: [{ name: "agent_task_message", arguments: raise }] };
      }
      const completed = lastSeen(turn, "## task completed");
      if (completed !== undefined && !called(turn, "agent_task_done")) {
        return {
          tools: [
            { name: "agent_task_ack", arguments: { taskId: subId } },
            {
              name: "agent_task_done",
              arguments: { taskId: parentId, status: "completed", summary: `banner done: ${quotedText(completed)}` },
            },
          ],
        };
      }
      // Told that pi-tasks passed the answer down: nothing to send.
      return { text: "waiting for my worker" };
    },
  });
  const toB = await waitForEndpoint(fx.relay.url, "chain-b");
  const a = pi({
    session: "chain-a",
    // A's model never answers: it ends its turn; the person answers.
    brain: (turn) => {
      if (!called(turn, "agent_task_send")) return { tools: [{ name: "agent_task_send", arguments: { to: toB, task: CHAIN_TASK } }] };
      const completed = lastSeen(turn, "## task completed");
      if (completed !== undefined && !called(turn, "agent_task_ack"))
        return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
      return { text: "I leave that question to my operator." };
    },
  });
  a.prompt("Delegate the banner.");

  // The person at A is told about the question (an RPC notify record); A's model, woken by the
  // question too, ends its turn without answering.
  const noticeArrived = await happened(a, isNotify(QUESTION_NOTICE), 20_000);
  const questionAt = a.records.findIndex(isEvent("## task question"));
  if (questionAt >= 0) await happened(a, isSettled, 8_000, questionAt);
  const isWaitingFooter = (record: RpcRecord) =>
    record.type === "extension_ui_request" && record.method === "setStatus" && String(record.statusText).includes("question waiting");
  await happened(a, isWaitingFooter, 15_000);
  const board = await boardOf(a);
  const prefix = notifications(a)
    .find((message) => message.startsWith(QUESTION_NOTICE))
    ?.match(/answer with \/tasks answer (\S+) <text>/)?.[1];

  // `/tasks answer <id>` without text: pi-tasks asks the person with an input dialog.
  const answerFrom = a.records.length;
  a.prompt(`/tasks answer ${prefix ?? ""}`.trim());
  const dialogArrived = await happened(
    a,
    (record) => record.type === "extension_ui_request" && record.method === "input",
    8_000,
    answerFrom,
  );
  const dialog = a.records.slice(answerFrom).find((record) => record.type === "extension_ui_request" && record.method === "input");
  if (dialog !== undefined) a.command({ type: "extension_ui_response", id: dialog.id, value: HUMAN_ANSWER });
  await happened(a, isNotify("pi-tasks:"), 8_000, answerFrom);
  const answerLines = a.records
    .slice(answerFrom)
    .filter(isNotify("pi-tasks:"))
    .map((record) => String(record.message));

  await happened(a, isToolEnd("agent_task_ack"), 20_000, answerFrom);
  await happened(b, isParentAcked, 10_000);
  await happened(c, isParentAcked, 10_000);
  const done = await finish({ a, b, c });
  return { a, b, c, toB, toC, noticeArrived, prefix, board, dialogArrived, dialog, answerFrom, answerLines, ...done };
}

// -----------------------------------------------------------------------------------------------
// 2. Depth cap (C → D) and cycle (B → A): refused before anything is created or sent
// -----------------------------------------------------------------------------------------------

const CAP_TASK = "Collect the release notes.";
const CAP_SUB_TASK = "Collect the release notes of the relay.";
const DELEGATE_TO_D = "Delegate a part of this to the fourth session now.";
const SEND_BACK_TO_A = "Send a part of this back to the session that gave it to you.";
const FINISH_NOW = "Finish your task now.";

/** Relay `send` requests through a proxy after `afterSeq`: each envelope's task, kind and target. */
function sentEnvelopes(proxy: FaultProxy, afterSeq: number): { taskId: string; kind: string; target: TaskEndpoint }[] {
  return proxy
    .requests()
    .filter((request) => (request.operation === "send" || request.operation === "acknowledge") && request.seq > afterSeq)
    .flatMap((request) => requestEnvelopes(request.body))
    .map((item) => {
      const envelope = item as { target?: TaskEndpoint; payload?: { taskId?: unknown; kind?: unknown } };
      return { taskId: String(envelope.payload?.taskId), kind: String(envelope.payload?.kind), target: envelope.target! };
    });
}

/** Whether a send request carries an intent (a worker's mail to its origin). */
function isIntent(request: { body?: unknown }): boolean {
  return requestEnvelopes(request.body).some((envelope) => (envelope.payload as { kind?: unknown } | undefined)?.kind === "intent");
}

const lastSeq = (proxy: FaultProxy) => proxy.requests().at(-1)?.seq ?? 0;

/** One refused delegation: the sender's board before and after, and what left it for the relay. */
async function refusedSend(sender: PiProcess, proxy: FaultProxy, prompt: string) {
  const boardBefore = await boardOf(sender);
  const mark = lastSeq(proxy);
  const from = sender.records.length;
  const settled = await promptAndSettle(sender, prompt);
  const boardAfter = await boardOf(sender);
  // Anything the refused send would have shipped has had an active poll's time to leave.
  await Bun.sleep(1_200);
  return {
    settled,
    calls: toolCalls(sender, "agent_task_send").filter((call) => call.index > from),
    boardBefore,
    boardAfter,
    // A worker's activity reports to its own origin (sealed intents) flow all along; anything else is the send's.
    sends: sentEnvelopes(proxy, mark).filter((envelope) => envelope.kind !== "intent"),
    operations: proxy
      .requests()
      .filter((request) => request.seq > mark && !(request.operation === "send" && isIntent(request)))
      .map((request) => request.operation),
  };
}

async function depthAndCycle() {
  // B and C reach the relay through observing proxies: what they send is on record.
  const proxyB = fx.proxy();
  const proxyC = fx.proxy();
  const d = pi({ session: "cap-d", brain: () => ({ text: "nothing to do" }) });
  const toD = await waitForEndpoint(fx.relay.url, "cap-d");
  // C is no gate worker: it may try to delegate onward.
  const c = pi({
    session: "cap-c",
    relayUrl: proxyC.url,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId === undefined) return { text: "nothing assigned" };
      if (lastSeen(turn, FINISH_NOW) !== undefined) {
        if (!called(turn, "agent_task_done"))
          return {
            tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "collected the relay notes myself" } }],
          };
        return { text: "finished" };
      }
      if (lastSeen(turn, DELEGATE_TO_D) !== undefined && !called(turn, "agent_task_send"))
        return { tools: [{ name: "agent_task_send", arguments: { to: toD, task: "Collect the notes of one module." } }] };
      return { text: "working on it" };
    },
  });
  const toC = await waitForEndpoint(fx.relay.url, "cap-c");
  let toA: TaskEndpoint | undefined;
  const b = pi({
    session: "cap-b",
    relayUrl: proxyB.url,
    brain: (turn) => {
      const parentId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (parentId === undefined) return { text: "nothing assigned" };
      if (!called(turn, "agent_task_send", CAP_SUB_TASK))
        return { tools: [{ name: "agent_task_send", arguments: { to: toC, task: CAP_SUB_TASK } }] };
      if (lastSeen(turn, SEND_BACK_TO_A) !== undefined && !called(turn, "agent_task_send", "Check the notes")) {
        return { tools: [{ name: "agent_task_send", arguments: { to: toA, task: "Check the notes I collected." } }] };
      }
      const completed = lastSeen(turn, "## task completed");
      if (completed !== undefined && !called(turn, "agent_task_done")) {
        return {
          tools: [
            { name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } },
            { name: "agent_task_done", arguments: { taskId: parentId, status: "completed", summary: "notes collected" } },
          ],
        };
      }
      return { text: "waiting for my worker" };
    },
  });
  const toB = await waitForEndpoint(fx.relay.url, "cap-b");
  const a = pi({
    session: "cap-a",
    brain: (turn) => {
      if (!called(turn, "agent_task_send")) return { tools: [{ name: "agent_task_send", arguments: { to: toB, task: CAP_TASK } }] };
      const completed = lastSeen(turn, "## task completed");
      if (completed !== undefined && !called(turn, "agent_task_ack"))
        return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
      return { text: "ok" };
    },
  });
  toA = await waitForEndpoint(fx.relay.url, "cap-a");
  a.prompt("Delegate the release notes.");
  // B delegated onward to C; C got its assignment; both models ended their turns.
  const cAssigned = await c.waitFor(isEvent("## task assignment"), 20_000);
  await c.waitFor(isSettled, 10_000, c.records.indexOf(cAssigned));
  await b.waitFor(isSettled, 10_000, b.records.findIndex(isToolEnd("agent_task_send")));

  const depth = await refusedSend(c, proxyC, DELEGATE_TO_D);
  const cycle = await refusedSend(b, proxyB, SEND_BACK_TO_A);

  // The chain still completes.
  const finishFrom = a.records.length;
  c.prompt(FINISH_NOW);
  await happened(a, isToolEnd("agent_task_ack"), 20_000, finishFrom);
  await happened(b, isParentAcked, 10_000);
  await happened(c, isParentAcked, 10_000);
  const aBoard = await boardOf(a);
  const dBoard = await boardOf(d);
  const done = await finish({ a, b, c, d });
  return {
    a,
    b,
    c,
    d,
    toA,
    toB,
    toC,
    toD,
    depth,
    cycle,
    aBoard,
    dBoard,
    allSentByB: sentEnvelopes(proxyB, 0),
    allSentByC: sentEnvelopes(proxyC, 0),
    ...done,
  };
}

// -----------------------------------------------------------------------------------------------
// 3. Progress: 50 reports in about a second, never waking the origin
// -----------------------------------------------------------------------------------------------

const PROGRESS_REPORTS = 50;
const progressMessage = (n: number) => `step ${n} of ${PROGRESS_REPORTS}`;

async function progress() {
  const worker = pi({
    session: "progress-worker",
    worker: true,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId === undefined) return { text: "nothing assigned" };
      const report = (n: number) => ({
        name: "agent_task_message",
        arguments: { taskId, type: "progress", message: progressMessage(n), percent: n * 2 },
      });
      // 49 reports at once (parallel tool calls), then the 50th alone: it is the newest at the origin.
      if (!called(turn, "agent_task_message", `"${progressMessage(1)}"`))
        return { tools: Array.from({ length: PROGRESS_REPORTS - 1 }, (_, index) => report(index + 1)) };
      if (!called(turn, "agent_task_message", `"${progressMessage(PROGRESS_REPORTS)}"`)) return { tools: [report(PROGRESS_REPORTS)] };
      if (!called(turn, "agent_task_done"))
        return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "all 50 steps done" } }] };
      return { text: "finished" };
    },
  });
  const to = await waitForEndpoint(fx.relay.url, "progress-worker");
  const origin = pi({
    session: "progress-origin",
    brain: (turn) => {
      if (!called(turn, "agent_task_send"))
        return { tools: [{ name: "agent_task_send", arguments: { to, task: "Run the 50 steps; report progress." } }] };
      const completed = lastSeen(turn, "## task completed");
      if (completed === undefined) return { text: "waiting" };
      const taskId = field(completed, "taskId")!;
      if (!called(turn, "agent_task_status")) return { tools: [{ name: "agent_task_status", arguments: { taskId } }] };
      if (!called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
      return { text: "acknowledged" };
    },
  });
  origin.prompt("Delegate the 50 steps.");
  await happened(origin, isToolEnd("agent_task_ack"), 25_000);
  await happened(worker, isParentAcked, 10_000);
  const done = await finish({ origin, worker });
  return { origin, worker, ...done };
}

// -----------------------------------------------------------------------------------------------
// 4. Cancel: a gate worker inside `bash sleep 60` is aborted
// -----------------------------------------------------------------------------------------------

/** A sleep no other process runs: `ps` tells whether it still runs. */
const SLEEP_ARG = `60.${1000 + Math.floor(Math.random() * 9000)}`;
const CANCEL_PROMPT = "The build is not needed any more: cancel it.";
const STATUS_PROMPT = "What became of the cancelled build?";
/**
 * How long the test waits for a cancelled worker's turn to end: a budget for a loaded machine (the
 * product's grace is 5 s), well inside the 60 s sleep — the abort itself is shown by what ended the
 * turn (`Command aborted`, stop reason `aborted`, the sleep killed), not by a time.
 */
const ABORT_WAIT_MS = 40_000;

function sleepRunning(): boolean {
  const ps = Bun.spawnSync(["ps", "-eo", "args"]);
  return ps.stdout
    .toString()
    .split("\n")
    .some((line) => line.trim() === `sleep ${SLEEP_ARG}`);
}

async function cancelAbort() {
  const worker = pi({
    session: "abort-worker",
    worker: true,
    brain: (turn) => {
      if (lastSeen(turn, "## task cancelled") !== undefined) return { text: "stopping" };
      if (lastSeen(turn, "## task assignment") === undefined) return { text: "nothing assigned" };
      if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command: `sleep ${SLEEP_ARG}` } }] };
      return { text: "the build finished" };
    },
  });
  const to = await waitForEndpoint(fx.relay.url, "abort-worker");
  const origin = pi({
    session: "abort-origin",
    brain: (turn) => {
      if (!called(turn, "agent_task_send"))
        return { tools: [{ name: "agent_task_send", arguments: { to, task: "Run the long build (about a minute)." } }] };
      const taskId = field(lastSeen(turn, "## task sent"), "taskId")!;
      if (lastSeen(turn, CANCEL_PROMPT) !== undefined && !called(turn, "agent_task_cancel"))
        return { tools: [{ name: "agent_task_cancel", arguments: { taskId } }] };
      if (lastSeen(turn, STATUS_PROMPT) !== undefined && !called(turn, "agent_task_status"))
        return { tools: [{ name: "agent_task_status", arguments: { taskId } }] };
      return { text: "ok" };
    },
  });
  origin.prompt("Delegate the long build.");
  const bashStart = await worker.waitFor((record) => record.type === "tool_execution_start" && record.toolName === "bash", 20_000);
  const workerFrom = worker.records.indexOf(bashStart);
  const sleepingBefore = (await eventually(() => sleepRunning(), 15_000, 50)) === true;
  await happened(origin, isSettled, 15_000);

  // The origin's model cancels on a second prompt, while the worker sleeps.
  const cancelFrom = origin.records.length;
  origin.prompt(CANCEL_PROMPT);
  const cancelEnd = await origin.waitFor(isToolEnd("agent_task_cancel"), 10_000, cancelFrom);
  const cancelledAt = origin.times[origin.records.indexOf(cancelEnd)]!;
  await happened(worker, isSettled, ABORT_WAIT_MS, workerFrom);
  // Whether it ended, and after the cancel (the order, not how long it took).
  const endedAfterCancel = (predicate: (record: RpcRecord) => boolean) => {
    const index = indexFrom(worker, predicate, workerFrom);
    return index < 0 ? undefined : worker.times[index]! >= cancelledAt;
  };
  const bashEndedAfterCancel = endedAfterCancel(isToolEnd("bash"));
  const agentEndedAfterCancel = endedAfterCancel((record) => record.type === "agent_end");
  // Killed with its turn (or at least by the time the worker stopped).
  const sleepGone = (await eventually(() => !sleepRunning(), 15_000, 50)) === true;

  // The outcome arrives without waking the origin's model; then its model is asked for the status.
  const outcomeArrived = await happened(origin, isEvent("## task cancel outcome"), 10_000, cancelFrom);
  await happened(origin, isSettled, 15_000, cancelFrom);
  await Bun.sleep(500);
  const runsBeforeStatus = runs(origin);
  await promptAndSettle(origin, STATUS_PROMPT);
  const done = await finish({ origin, worker });
  return {
    origin,
    worker,
    workerFrom,
    cancelFrom,
    sleepingBefore,
    bashEndedAfterCancel,
    agentEndedAfterCancel,
    sleepGone,
    outcomeArrived,
    runsBeforeStatus,
    ...done,
  };
}

// -----------------------------------------------------------------------------------------------

let chain: ReturnType<typeof chainQuestion>;
let cap: ReturnType<typeof depthAndCycle>;
let progressRun: ReturnType<typeof progress>;
let cancelRun: ReturnType<typeof cancelAbort>;

beforeAll(async () => {
  chain = scenario(chainQuestion);
  cap = scenario(depthAndCycle);
  progressRun = scenario(progress);
  cancelRun = scenario(cancelAbort);
});

// -----------------------------------------------------------------------------------------------
// Tests
// -----------------------------------------------------------------------------------------------

/** The ids of a chain run: A's task, C's task (B's sub-task), C's question, A's question and answer. */
async function chainIds() {
  const run = await chain;
  const { a, b, c } = run;
  const rootTaskId = String(toolCalls(a, "agent_task_send")[0]?.details.taskId);
  const subTaskId = String(toolCalls(b, "agent_task_send")[0]?.details.taskId);
  const questionAtB = eventMessages(b).find((event) => event.type === "task.question");
  const raisedAtA = eventMessages(a).find((event) => event.type === "task.question");
  const answerAtB = eventMessages(b).find((event) => event.type === "task.answer");
  const answerAtC = eventMessages(c).filter((event) => event.type === "task.answer");
  return { ...run, rootTaskId, subTaskId, questionAtB, raisedAtA, answerAtB, answerAtC };
}

describe("A → B → C: a coordinator delegates onward, raises its worker's question to A, and A's human answers it through the UI", () => {
  test("the sub-task inherits A's lineage: depth 3, root and parent = A's task (agent_task_status at B, C's assignment text)", async () => {
    const { b, c, rootTaskId, subTaskId } = await chainIds();
    const sends = toolCalls(b, "agent_task_send");
    expect(sends.map((call) => call.isError)).toEqual([false]);
    const status = toolCalls(b, "agent_task_status").find((call) => call.args.taskId === subTaskId);
    expect(field(status?.text, "lineage")).toBe(`root ${rootTaskId}, depth 3, parent ${rootTaskId}`);
    const assignment = eventMessages(c).filter((event) => event.type === "task.created");
    expect(assignment.map((event) => event.taskId)).toEqual([subTaskId]);
    expect(assignment[0]!.content).toContain(
      `Delegated onward (session 3 of a chain of at most ${maxDelegationDepth}); root task ${rootTaskId}.`,
    );
  });

  test("B's model reads C's question with the hint to raise it on A's task, and raises it with raisesQuestion", async () => {
    const { b, rootTaskId, subTaskId, questionAtB, raisedAtA } = await chainIds();
    expect(questionAtB?.taskId).toBe(subTaskId);
    expect(body(questionAtB?.content)).toBe(QUESTION);
    const hint = questionAtB?.content.match(RAISE_HINT);
    expect([hint?.[1], hint?.[2]]).toEqual([rootTaskId, questionAtB!.eventId]);
    const raises = toolCalls(b, "agent_task_message");
    expect(raises.map((call) => ({ args: call.args, isError: call.isError }))).toEqual([
      { args: { taskId: rootTaskId, type: "question", message: RAISED, raisesQuestion: questionAtB!.eventId }, isError: false },
    ]);
    // A's side reads where the question comes from.
    expect(raisedAtA?.taskId).toBe(rootTaskId);
    expect(field(raisedAtA?.content, "raisedFrom")).toBe(`question ${questionAtB!.eventId} of sub-task ${subTaskId}`);
  });

  test("A's person is told once (a notify naming the question id), the footer shows `1 question waiting` and `/tasks` lists it with its age; A's model does not answer", async () => {
    const { a, noticeArrived, prefix, board, raisedAtA, rootTaskId } = await chainIds();
    expect(noticeArrived).toBe(true);
    const notices = notifications(a).filter((message) => message.startsWith(QUESTION_NOTICE));
    expect(notices).toEqual([
      `${QUESTION_NOTICE} ${rootTaskId.slice(0, 8)} [own identity ✓]: "${RAISED}" — answer with /tasks answer ${raisedAtA!.eventId.slice(0, 8)} <text>, or let your agent answer.`,
    ]);
    expect(prefix).toBe(raisedAtA!.eventId.slice(0, 8));
    // While the question waited, and not any more once answered.
    const footers = statusTexts(a);
    // (B's activity may count as running meanwhile: `· 1 running`.)
    const waitingAt = footers.findIndex((text) => /^tasks: chain-a · 1 active( · 1 running)? · 1 question waiting$/.test(text ?? ""));
    expect(waitingAt).toBeGreaterThan(-1);
    expect(footers.slice(waitingAt + 1).some((text) => /^tasks: chain-a · 1 active( · 1 running)?$/.test(text ?? ""))).toBe(true);
    expect(footers.at(-1)).toBe("tasks: chain-a · idle");
    const listed = board.indexOf("questions waiting for you (1):");
    expect(listed).toBeGreaterThan(-1);
    expect(board[listed + 1]).toMatch(
      new RegExp(`^  ${prefix}  task ${rootTaskId.slice(0, 8)} \\[own identity ✓\\], \\d+s ago: "${escaped(RAISED)}"$`),
    );
    expect(countsLine(board)).toBe("1 task · 1 active · 1 question waiting for you");
    // A's model was woken by the question and ended its turn without answering.
    expect(a.turns.some((turn) => lastSeen(turn, "## task question") !== undefined)).toBe(true);
    expect(toolCalls(a, "agent_task_message")).toEqual([]);
  });

  test("`/tasks answer <id>` without text asks with an RPC input dialog; its extension_ui_response is sent as the answer bound to A's question", async () => {
    const { a, b, dialogArrived, dialog, answerLines, raisedAtA, answerAtB, rootTaskId, answerFrom } = await chainIds();
    expect(dialogArrived).toBe(true);
    expect(dialog?.title).toBe(`pi-tasks: your answer to "${RAISED}"`);
    expect(answerLines).toEqual([`pi-tasks: answered question ${raisedAtA!.eventId.slice(0, 8)} on task ${rootTaskId.slice(0, 8)}`]);
    // The command ran no model turn.
    const answeredAt = indexFrom(a, isNotify("pi-tasks: answered"), answerFrom);
    expect(answeredAt).toBeGreaterThan(answerFrom);
    expect(a.records.slice(answerFrom, answeredAt).filter((record) => record.type === "agent_start")).toEqual([]);
    expect(answerAtB?.taskId).toBe(rootTaskId);
    expect(field(answerAtB?.content, "inReplyTo")).toBe(raisedAtA!.eventId);
    expect(body(answerAtB?.content)).toBe(HUMAN_ANSWER);
    // B's model is told the answer already went down, and sends nothing itself.
    expect(answerAtB?.content).toContain("pi-tasks already delivered this answer to the sub-task's worker");
    expect(answerAtB?.content).toContain("do not send it again.");
    expect(toolCalls(b, "agent_task_message").filter((call) => call.args.type === "answer")).toEqual([]);
  });

  test("pi-tasks at B relays the answer down: C gets one `## task answer` bound to its own question (inReplyTo, relayedFrom) and completes with it", async () => {
    const { c, questionAtB, answerAtB, answerAtC, subTaskId, rootTaskId } = await chainIds();
    expect(answerAtC.map((event) => event.taskId)).toEqual([subTaskId]);
    const answer = answerAtC[0]!.content;
    expect(field(answer, "inReplyTo")).toBe(questionAtB!.eventId);
    expect(field(answer, "relayedFrom")).toBe(`answer ${answerAtB!.eventId} on task ${rootTaskId}`);
    expect(body(answer)).toBe(HUMAN_ANSWER);
    expect(c.turns.some((turn) => lastSeen(turn, "## task answer")?.includes(HUMAN_ANSWER) === true)).toBe(true);
    const done = toolCalls(c, "agent_task_done");
    expect(done.map((call) => ({ taskId: call.args.taskId, summary: call.args.summary, isError: call.isError }))).toEqual([
      { taskId: subTaskId, summary: `painted the banner ${HUMAN_ANSWER}`, isError: false },
    ]);
  });

  test("B sees C's completion, acknowledges it and completes A's task; A acknowledges", async () => {
    const { a, b, c, rootTaskId, subTaskId } = await chainIds();
    expect(
      eventMessages(b)
        .filter((event) => event.type === "task.completed")
        .map((event) => event.taskId),
    ).toEqual([subTaskId]);
    expect(toolCalls(b, "agent_task_ack").map((call) => ({ taskId: call.args.taskId, isError: call.isError }))).toEqual([
      { taskId: subTaskId, isError: false },
    ]);
    expect(toolCalls(b, "agent_task_done").map((call) => ({ taskId: call.args.taskId, isError: call.isError }))).toEqual([
      { taskId: rootTaskId, isError: false },
    ]);
    const completed = eventMessages(a).filter((event) => event.type === "task.completed");
    expect(completed.map((event) => event.taskId)).toEqual([rootTaskId]);
    // The summary is the worker's text: the quoted block of the completion.
    expect(quotedText(completed[0]!.content)).toBe(`banner done: painted the banner ${HUMAN_ANSWER}`);
    expect(toolCalls(a, "agent_task_ack").map((call) => ({ taskId: call.args.taskId, isError: call.isError }))).toEqual([
      { taskId: rootTaskId, isError: false },
    ]);
    expect(
      archiveRecords(b)
        .filter((record) => record.type === "task.parent_acknowledged")
        .map((record) => record.taskId),
    ).toEqual([rootTaskId]);
    expect(
      archiveRecords(c)
        .filter((record) => record.type === "task.parent_acknowledged")
        .map((record) => record.taskId),
    ).toEqual([subTaskId]);
  });

  test("each event is presented once at A, B and C, and all three stop cleanly", async () => {
    const run = await chain;
    await expectEachOnceEverywhere(run);
    expectCleanStops(run.processes, run.stopped);
  });
});

describe("the depth cap and the cycle guard: refused before anything is created or sent", () => {
  test("C (session 3 of A→B→C) sending to a fourth Pi D gets DELEGATION_DEPTH_EXCEEDED", async () => {
    const { depth, a } = await cap;
    const rootTaskId = String(toolCalls(a, "agent_task_send")[0]?.details.taskId);
    expect(depth.settled).toBe(true);
    expect(
      depth.calls.map((call) => ({
        isError: call.isError,
        code: field(call.text, "code"),
        error: (call.details.error as { details?: unknown } | undefined)?.details,
      })),
    ).toEqual([
      {
        isError: true,
        code: "DELEGATION_DEPTH_EXCEEDED",
        error: { depth: maxDelegationDepth + 1, maxDepth: maxDelegationDepth, rootTaskId },
      },
    ]);
  });

  test("B (working on A's task) sending to A gets DELEGATION_CYCLE", async () => {
    const { cycle, a, toA } = await cap;
    const rootTaskId = String(toolCalls(a, "agent_task_send")[0]?.details.taskId);
    expect(cycle.settled).toBe(true);
    expect(cycle.calls.map((call) => ({ isError: call.isError, code: field(call.text, "code") }))).toEqual([
      { isError: true, code: "DELEGATION_CYCLE" },
    ]);
    const details = (cycle.calls[0]!.details.error as { details: { target: TaskEndpoint; rootTaskId: string } }).details;
    expect(details.target.id).toBe(toA!.id);
    expect(details.rootTaskId).toBe(rootTaskId);
  });

  test("nothing was created: each sender's /tasks count is unchanged and no assignment left it for the relay", async () => {
    const { depth, cycle, allSentByB, allSentByC, toA, toC, toD } = await cap;
    expect(countsLine(depth.boardBefore)).toBe("1 task · 1 active");
    expect(countsLine(depth.boardAfter)).toBe(countsLine(depth.boardBefore));
    expect(countsLine(cycle.boardBefore)).toBe("2 tasks · 2 active");
    expect(countsLine(cycle.boardAfter)).toBe(countsLine(cycle.boardBefore));
    // Not a single request went out while the refused sends ran: refused before any relay request.
    expect({ depth: depth.sends, cycle: cycle.sends }).toEqual({ depth: [], cycle: [] });
    expect({ depth: depth.operations.includes("send"), cycle: cycle.operations.includes("send") }).toEqual({ depth: false, cycle: false });
    expect({ depth: depth.operations.includes("resolve"), cycle: cycle.operations.includes("resolve") }).toEqual({
      depth: false,
      cycle: false,
    });
    // Over the whole run: C never addressed D, B addressed A only about A's task and assigned only to C.
    expect(allSentByC.filter((envelope) => envelope.target.id === toD.id)).toEqual([]);
    expect(allSentByB.filter((envelope) => envelope.kind === "assignment").map((envelope) => envelope.target.id)).toEqual([toC.id]);
    expect(allSentByB.filter((envelope) => envelope.target.id === toA!.id && envelope.kind === "assignment")).toEqual([]);
  });

  test("D and A received nothing new: D has no task, no event and ran no turn; A has only its own task", async () => {
    const { d, a, dBoard, aBoard } = await cap;
    const rootTaskId = String(toolCalls(a, "agent_task_send")[0]?.details.taskId);
    expect(countsLine(dBoard)).toBe("0 tasks · 0 active");
    expect({
      events: eventMessages(d),
      archived: archiveRecords(d),
      entries: d.appendedEntries().map((entry) => entry.customType),
      turns: d.turns.length,
    }).toEqual({ events: [], archived: [], entries: [], turns: 0 });
    expect(countsLine(aBoard)).toBe("1 task · 0 active");
    expect([...new Set([...eventMessages(a).map((event) => event.taskId), ...archiveRecords(a).map((record) => record.taskId)])]).toEqual([
      rootTaskId,
    ]);
    // Not even a refused assignment reached A's pi-tasks.
    expect(a.appendedEntries(REJECTED_RECORD)).toEqual([]);
  });

  test("the chain still completes: C completes, B acknowledges and completes A's task, A acknowledges", async () => {
    const { a, b, c } = await cap;
    expect(toolCalls(c, "agent_task_done").map((call) => call.isError)).toEqual([false]);
    expect(toolCalls(b, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
    expect(toolCalls(b, "agent_task_done").map((call) => call.isError)).toEqual([false]);
    expect(toolCalls(a, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
  });

  test("each event is presented once at A, B, C and D, and all four stop cleanly", async () => {
    const run = await cap;
    await expectEachOnceEverywhere(run);
    expectCleanStops(run.processes, run.stopped);
  });
});

describe("progress: 50 reports in two turns", () => {
  // How fast they go is a figure for `npm run bench`, not an assertion here.
  test("the worker's 50 progress reports all succeed, each step once, the 50th last", async () => {
    const { worker } = await progressRun;
    const reports = toolCalls(worker, "agent_task_message");
    expect(reports.length).toBe(PROGRESS_REPORTS);
    expect(reports.filter((call) => call.isError)).toEqual([]);
    expect(new Set(reports.map((call) => call.args.message))).toEqual(
      new Set(Array.from({ length: PROGRESS_REPORTS }, (_, index) => progressMessage(index + 1))),
    );
    expect(reports.at(-1)!.args.message).toBe(progressMessage(PROGRESS_REPORTS));
  });

  test("at the origin no progress woke the model: no wake names a progress event, and its model ran only the prompt's run and the completion's", async () => {
    const { origin } = await progressRun;
    const progressIds = new Set(
      [...eventMessages(origin), ...archiveRecords(origin)].filter((event) => event.type === "task.progress").map((event) => event.eventId),
    );
    const completed = eventMessages(origin).filter((event) => event.type === "task.completed");
    expect(wakeMessages(origin).map((wake) => wake.eventIds)).toEqual([completed.map((event) => event.eventId)]);
    expect(
      wakeMessages(origin)
        .flatMap((wake) => wake.eventIds)
        .filter((id) => progressIds.has(id)),
    ).toEqual([]);
    expect(runs(origin)).toBe(2);
  });

  test("at most a handful of progress events are shown to the origin's model; the rest are archived, each event once", async () => {
    const { origin } = await progressRun;
    const shown = eventMessages(origin).filter((event) => event.type === "task.progress");
    const archived = archiveRecords(origin).filter((record) => record.type === "task.progress");
    expect(shown.length).toBeGreaterThanOrEqual(1);
    expect(shown.length).toBeLessThanOrEqual(3);
    expect(new Set([...shown, ...archived].map((event) => event.eventId)).size).toBe(PROGRESS_REPORTS);
    expect(shown.length + archived.length).toBe(PROGRESS_REPORTS);
    // What the model read of progress: those few, said to need nothing.
    expect(shown[0]!.content).toContain("Progress only: nothing to do unless it changes your plans.");
    const seen = new Set(origin.turns.flatMap((turn) => allSeen(turn, "## task progress")));
    expect(seen.size).toBe(shown.length);
  });

  test("agent_task_status at the origin shows the newest progress (the 50th report)", async () => {
    const { origin } = await progressRun;
    const status = toolCalls(origin, "agent_task_status");
    expect(status.map((call) => call.isError)).toEqual([false]);
    // The worker's message is quoted (a JSON string on the line: extensions/pi-tasks/quote.ts).
    expect(field(status[0]!.text, "progress")).toMatch(
      new RegExp(`^100% — "${progressMessage(PROGRESS_REPORTS)}" \\(\\d{4}-\\d\\d-\\d\\dT`),
    );
    expect(toolCalls(origin, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
  });

  test("each event is presented once at both sides, and both stop cleanly", async () => {
    const run = await progressRun;
    await expectEachOnceEverywhere(run);
    expectCleanStops(run.processes, run.stopped);
  });
});

describe("cancel: a gate worker inside `bash sleep 60` is aborted", () => {
  test("the worker's running turn ends after the cancel, long before its sleep would: bash is aborted, the turn stops, the sleep is killed", async () => {
    const { worker, workerFrom, sleepingBefore, bashEndedAfterCancel, agentEndedAfterCancel, sleepGone } = await cancelRun;
    expect(sleepingBefore).toBe(true);
    expect({ bashEndedAfterCancel, agentEndedAfterCancel }).toEqual({ bashEndedAfterCancel: true, agentEndedAfterCancel: true });
    expect(sleepGone).toBe(true);
    const bash = toolCalls(worker, "bash");
    expect(bash.map((call) => ({ isError: call.isError, text: call.text }))).toEqual([{ isError: true, text: "Command aborted" }]);
    // The turn ended as aborted, not by the model finishing it.
    const assistants = worker.records
      .slice(workerFrom)
      .filter((record) => record.type === "message_end" && (record.message as { role?: unknown }).role === "assistant")
      .map((record) => (record.message as { stopReason?: unknown }).stopReason);
    expect(assistants).toContain("aborted");
    expect(worker.turns.some((turn) => lastSeen(turn, "the build finished") !== undefined)).toBe(false);
  });

  test("the cancel reached the worker's session once, as a task event", async () => {
    const { worker, origin } = await cancelRun;
    const taskId = String(toolCalls(origin, "agent_task_send")[0]?.details.taskId);
    expect(eventMessages(worker).map((event) => ({ taskId: event.taskId, type: event.type }))).toEqual([
      { taskId, type: "task.created" },
      { taskId, type: "task.cancelled" },
    ]);
  });

  test("the origin receives `## task cancel outcome` (turn aborted) without a wake, and agent_task_status shows cancelOutcome", async () => {
    const { origin, outcomeArrived, runsBeforeStatus } = await cancelRun;
    expect(outcomeArrived).toBe(true);
    const outcomes = eventMessages(origin).filter((event) => event.type === "task.cancel_outcome");
    expect(outcomes.length).toBe(1);
    expect(field(outcomes[0]!.content, "outcome")).toBe("turn aborted: the worker stopped its running turn");
    // Not woken: the runs before the status prompt were the two prompts' own.
    expect(wakeMessages(origin).flatMap((wake) => wake.eventIds)).not.toContain(outcomes[0]!.eventId);
    expect(runsBeforeStatus).toBe(2);
    const status = toolCalls(origin, "agent_task_status");
    expect(status.map((call) => call.isError)).toEqual([false]);
    expect(field(status[0]!.text, "status")).toBe("cancelled");
    expect(field(status[0]!.text, "cancelOutcome")).toBe("turn aborted: the worker stopped its running turn");
  });

  test("each event is presented once at both sides, and both stop cleanly (nothing left running)", async () => {
    const run = await cancelRun;
    await expectEachOnceEverywhere(run);
    expectCleanStops(run.processes, run.stopped);
    expect(sleepRunning()).toBe(false);
  });
});
