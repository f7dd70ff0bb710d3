/**
 * Readers and small helpers for end-to-end tests of the Pi extension: what each Pi process's RPC
 * stream says about pi-tasks (event messages, wakes, archive entries, loss records, status lines)
 * and what its scripted model saw. (The relay's session-control status: testkit/session-control.ts.)
 */
import { afterAll, beforeAll, expect } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EVENT_MESSAGE, EVENT_RECORD, WAKE_MESSAGE } from "../../extensions/pi-tasks/presenter.ts";
import { STATUS_KEY } from "../../extensions/pi-tasks/footer.ts";
import type { ScriptReply } from "../../src/demo/scripted-model.ts";
import { createFaultProxy, type FaultProxy } from "../../testkit/fault-proxy.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { answerQuestion, DEMO_TASK } from "../../src/demo/scenarios/demo-origin.ts";
import { type PiProcess, type PiProcessOptions, type RpcRecord, type ScriptTurn, startPi } from "./pi-process.ts";
import { type Presented, presentationFaults, rpcPresentations, sessionPresentations } from "./session-invariant.ts";
import { surfaceTeardownFailures } from "./teardown-check.ts";

export { EVENT_MESSAGE, EVENT_RECORD, STATUS_KEY, WAKE_MESSAGE };

export interface EventMessage {
  readonly taskId: string;
  readonly eventId: string;
  readonly type: string;
  readonly content: string;
}

function detailsOf(message: Record<string, unknown>): Record<string, unknown> {
  return (message.details ?? {}) as Record<string, unknown>;
}

/** The `pi-tasks-event` messages Pi recorded, in order. */
export function eventMessages(pi: PiProcess): EventMessage[] {
  return pi.customMessages(EVENT_MESSAGE).map((message) => {
    const details = detailsOf(message);
    return {
      taskId: String(details.taskId),
      eventId: String(details.eventId),
      type: String((details.event as { type?: unknown } | undefined)?.type),
      content: String(message.content),
    };
  });
}

/** Each `pi-tasks-wake` message: its wake id and the event ids it woke. */
export function wakeMessages(pi: PiProcess): { wakeId: string; eventIds: string[] }[] {
  return pi.customMessages(WAKE_MESSAGE).map((message) => {
    const details = detailsOf(message);
    return { wakeId: String(details.wakeId), eventIds: (details.eventIds as string[]) ?? [] };
  });
}

/** Archive-only `pi-tasks-event-record` entries: their event ids and types. */
export function archiveRecords(pi: PiProcess): { taskId: string; eventId: string; type: string }[] {
  return pi.appendedEntries(EVENT_RECORD).map((entry) => {
    const data = (entry.data ?? {}) as Record<string, unknown>;
    return {
      taskId: String(data.taskId),
      eventId: String(data.eventId),
      type: String((data.event as { type?: unknown } | undefined)?.type),
    };
  });
}

/** Every `setStatus` text for the pi-tasks key, in order (undefined = cleared). */
export function statusTexts(pi: PiProcess): (string | undefined)[] {
  return pi
    .uiRequests("setStatus")
    .filter((record) => record.statusKey === STATUS_KEY)
    .map((record) => (record.statusText === undefined || record.statusText === null ? undefined : String(record.statusText)));
}

/**
 * The footer when nothing is wrong: `tasks: <session> · idle` or its counts alone. A failure is
 * shown after the counts (extensions/pi-tasks/footer.ts), so a label with anything else is not healthy.
 */
export function isHealthyStatus(text: string | undefined): boolean {
  const count = "idle|\\d+ (?:active|running|stuck|orphaned|reconnecting|rejected)|\\d+ questions? waiting";
  return text !== undefined && new RegExp(`^tasks: \\S+(?: · (?:${count}))+$`).test(text);
}

/** Resolves with the `/tasks` board lines the process shows next (a notify), from record `from` on. */
export async function nextBoard(pi: PiProcess, from: number, timeoutMs = 10_000): Promise<string[]> {
  const record = await pi.waitFor(
    (item) => item.type === "extension_ui_request" && item.method === "notify" && String(item.message).startsWith("pi-tasks\n"),
    timeoutMs,
    from,
  );
  return String(record.message).split("\n");
}

/** Runs `/tasks <taskId>` in `pi` (RPC) and answers the detail it showed. */
export async function taskDetail(pi: PiProcess, taskId: string, timeoutMs = 10_000): Promise<string> {
  const from = pi.records.length;
  pi.prompt(`/tasks ${taskId}`);
  const shown = await pi.waitFor(
    (record) => record.type === "extension_ui_request" && record.method === "notify" && String(record.message).startsWith(`task ${taskId}`),
    timeoutMs,
    from,
  );
  return String(shown.message);
}

export function notifications(pi: PiProcess): string[] {
  return pi.uiRequests("notify").map((record) => String(record.message));
}

/** Counts per event id (a map so a duplicate shows its count). */
export function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}

/**
 * Every task event appears at most once in the process: one `pi-tasks-event` message per event id,
 * never also archived, every wake names distinct events and no event is woken twice, each loss is
 * reported once (tests/helpers/session-invariant.ts: the invariant every Pi's teardown checks too).
 * The session branch (RPC `get_entries`) agrees with the stream.
 */
export async function expectEachEventOnce(pi: PiProcess, label: string, entries?: readonly Record<string, unknown>[]): Promise<void> {
  const presented = rpcPresentations(pi.records);
  expect({ label, ...presentationFaults(presented) }).toEqual({
    label,
    insertedTwice: [],
    archivedTwice: [],
    wokenTwice: [],
    insertedAndArchived: [],
    wokenNotInserted: [],
    orphanedTwice: [],
  });
  const branch = entries ?? (pi.exitCode() === null ? await pi.entries() : undefined);
  if (branch !== undefined) {
    const ids = (items: readonly Presented[]) => items.flatMap((item) => (item.kind === "inserted" ? [item.eventId] : [])).sort();
    expect({ label, branch: ids(sessionPresentations(branch)) }).toEqual({ label, branch: ids(presented) });
  }
}

/** Extension errors or corrupt stdout lines must never appear. */
export function expectNoProblems(pi: PiProcess, label: string): void {
  expect({ label, problems: pi.problems() }).toEqual({ label, problems: [] });
}

/**
 * Each process (by name) exited 0 by itself after its stdin closed (a hang is killed at the stop
 * grace, and says so), without extension errors.
 */
export function expectCleanStops(
  processes: Record<string, PiProcess>,
  stopped: { codes: Record<string, number>; killed: Record<string, boolean> },
): void {
  const names = Object.keys(processes);
  expect(stopped).toEqual({
    codes: Object.fromEntries(names.map((name) => [name, 0])),
    killed: Object.fromEntries(names.map((name) => [name, false])),
  });
  for (const [name, pi] of Object.entries(processes)) expectNoProblems(pi, name);
}

/** Starts a scenario now; its failure surfaces where a test awaits it (never as an unhandled rejection). */
export function scenario<T>(run: () => Promise<T>): Promise<T> {
  const promise = run();
  promise.catch(() => undefined);
  return promise;
}

/** The value of `- name: value` in a rendered message. */
export function field(text: string | undefined, name: string): string | undefined {
  return text?.match(new RegExp(`^- ${name}: (.+)$`, "m"))?.[1]?.trim();
}

/** What the peer wrote in a rendered event: its first quoted block, without the "│ " of each line (extensions/pi-tasks/quote.ts). */
export function quotedText(text: string | undefined): string | undefined {
  const lines = (text ?? "").split("\n");
  const start = lines.findIndex((line) => line.startsWith("│ "));
  if (start < 0) return undefined;
  const end = lines.findIndex((line, index) => index > start && !line.startsWith("│ "));
  return lines
    .slice(start, end < 0 ? undefined : end)
    .map((line) => line.slice("│ ".length))
    .join("\n")
    .trim();
}

/** The newest message the model saw that contains `marker`. */
export function lastSeen(turn: ScriptTurn, marker: string): string | undefined {
  return [...turn.messages].reverse().find((message) => message.text.includes(marker))?.text;
}

/** Every message of a turn that contains `marker`. */
export function allSeen(turn: ScriptTurn, marker: string): string[] {
  return turn.messages.filter((message) => message.text.includes(marker)).map((message) => message.text);
}

/** Whether the model already issued a tool call (its transcript shows `[toolCall name …]`). */
export function called(turn: ScriptTurn, name: string, containing = ""): boolean {
  return turn.messages.some(
    (message) => message.role === "assistant" && message.text.includes(`[toolCall ${name} `) && message.text.includes(containing),
  );
}

export function lastMessage(turn: ScriptTurn) {
  return turn.messages.at(-1);
}

/** A tool result's first text. */
export function resultText(record: RpcRecord): string {
  const result = record.result as { content?: { text?: string }[] } | undefined;
  return String(result?.content?.[0]?.text ?? "");
}

export function resultDetails(record: RpcRecord): Record<string, unknown> {
  return ((record.result as { details?: unknown } | undefined)?.details ?? {}) as Record<string, unknown>;
}

export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** Stops every process, in parallel, and returns their exit codes. */
export async function stopAll(processes: readonly (PiProcess | undefined)[]): Promise<number[]> {
  return await Promise.all(processes.filter((pi): pi is PiProcess => pi !== undefined).map((pi) => pi.stop()));
}

/** Stops every named process at once; their exit codes and whether each had to be killed (what `expectCleanStops` checks). */
export async function stopEach(
  processes: Record<string, PiProcess>,
): Promise<{ codes: Record<string, number>; killed: Record<string, boolean> }> {
  const codes: Record<string, number> = {};
  const killed: Record<string, boolean> = {};
  await Promise.all(
    Object.entries(processes).map(async ([name, process]) => {
      codes[name] = await process.stop();
      killed[name] = process.killed();
    }),
  );
  return { codes, killed };
}

/** Resolves after `ms` with nothing new matching `predicate` (from index `from`); returns the matches. */
export async function quietFor(pi: PiProcess, ms: number, predicate: (record: RpcRecord) => boolean, from: number): Promise<RpcRecord[]> {
  await Bun.sleep(ms);
  return pi.records.slice(from).filter(predicate);
}

/** How many times the model already called `name` with arguments containing `containing`. */
export function callCount(turn: ScriptTurn, name: string, containing = ""): number {
  return turn.messages
    .filter((message) => message.role === "assistant")
    .flatMap((message) => message.text.split("\n"))
    .filter((line) => line.startsWith(`[toolCall ${name} `) && line.includes(containing)).length;
}

export interface ToolCall {
  readonly toolCallId: string;
  readonly name: string;
  readonly args: Record<string, unknown>;
  readonly isError: boolean;
  readonly text: string;
  readonly details: Record<string, unknown>;
  /** Index of the `tool_execution_end` record. */
  readonly index: number;
}

/** Finished tool calls with their arguments (start and end records joined by toolCallId). */
export function toolCalls(pi: PiProcess, name?: string): ToolCall[] {
  const args = new Map<string, Record<string, unknown>>();
  const calls: ToolCall[] = [];
  pi.records.forEach((record, index) => {
    if (record.type === "tool_execution_start") args.set(String(record.toolCallId), (record.args ?? {}) as Record<string, unknown>);
    if (record.type !== "tool_execution_end" || (name !== undefined && record.toolName !== name)) return;
    calls.push({
      toolCallId: String(record.toolCallId),
      name: String(record.toolName),
      args: args.get(String(record.toolCallId)) ?? {},
      isError: record.isError === true,
      text: resultText(record),
      details: resultDetails(record),
      index,
    });
  });
  return calls;
}

/** Index of the first record matching, or -1. */
export function indexOf(pi: PiProcess, predicate: (record: RpcRecord) => boolean, from = 0): number {
  for (let index = from; index < pi.records.length; index += 1) if (predicate(pi.records[index]!)) return index;
  return -1;
}

export function isCustom(record: RpcRecord, customType: string): boolean {
  const message = record.message as Record<string, unknown> | undefined;
  return record.type === "message_end" && message?.role === "custom" && message.customType === customType;
}

/**
 * An origin brain that sends one task to `to`, then acknowledges its completion (and otherwise
 * says "ok"); `extra` answers turns first (e.g. questions), when it returns a reply.
 */
export function sendThenAckBrain(
  to: unknown,
  task: string,
  extra?: (turn: ScriptTurn) => ScriptReply | undefined,
): (turn: ScriptTurn) => ScriptReply {
  return (turn) => {
    if (!called(turn, "agent_task_send")) return { tools: [{ name: "agent_task_send", arguments: { to, task } }] };
    const answered = extra?.(turn);
    if (answered !== undefined) return answered;
    const completed = lastSeen(turn, "## task completed");
    if (completed !== undefined && !called(turn, "agent_task_ack"))
      return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
    return { text: "ok" };
  };
}

/**
 * A worker brain that asks the banner question once assigned, waits for the answer and completes
 * with it (`banner painted <answer>`).
 */
export function bannerWorkerBrain(): (turn: ScriptTurn) => ScriptReply {
  return (turn) => {
    const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
    if (taskId === undefined) return { text: "nothing assigned" };
    if (!called(turn, "agent_task_message", '"question"')) {
      return {
        tools: [{ name: "agent_task_message", arguments: { taskId, type: "question", message: "Which colour should the banner be?" } }],
      };
    }
    const answer = lastSeen(turn, "## task answer");
    if (answer === undefined) return { text: "waiting for the answer" };
    if (!called(turn, "agent_task_done")) {
      const colour = quotedText(answer);
      return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: `banner painted ${colour}` } }] };
    }
    return { text: "finished" };
  };
}

/** One real relay per test file, the Pis and fault proxies the file starts, all stopped after it. */
export interface PiFixture {
  /** The relay (started in the fixture's beforeAll, which runs before the file's own). */
  readonly relay: RelayProcess;
  /** A scripted Pi on the relay (stopped after the file). */
  pi(options: Omit<PiProcessOptions, "relayUrl"> & { relayUrl?: string }): PiProcess;
  /** A fault proxy in front of the relay (stopped after the file). */
  proxy(): FaultProxy;
  /** Runs `step` after the file, before the relay stops. */
  defer(step: () => unknown): void;
}

export function usePiFixture(): PiFixture {
  let relay: RelayProcess | undefined;
  const spawned: PiProcess[] = [];
  const proxies: FaultProxy[] = [];
  const steps: (() => unknown)[] = [];
  beforeAll(async () => {
    relay = await startRelayProcess();
  });
  afterAll(async () => {
    await stopAll(spawned);
    for (const step of steps.reverse())
      await Promise.resolve()
        .then(step)
        .catch(() => undefined);
    await Promise.all(proxies.map((created) => created.stop()));
    await relay?.stop();
    // The teardown check of the Pis stopped above fails this file (tests/helpers/teardown-check.ts).
    surfaceTeardownFailures();
  });
  const live = (): RelayProcess => {
    if (relay === undefined) throw new Error("the Pi fixture is used before its beforeAll ran");
    return relay;
  };
  return {
    get relay() {
      return live();
    },
    pi(options) {
      const started = startPi({ relayUrl: live().url, ...options });
      spawned.push(started);
      return started;
    },
    proxy() {
      const created = createFaultProxy({ target: live().url });
      proxies.push(created);
      return created;
    },
    defer: (step) => steps.push(step),
  };
}

/**
 * An origin brain that spawns the worker `name` in a worktree of its own, sends it the demo's
 * hello.txt task, answers its question, then — once the result is in (`onCompleted` sees it first)
 * — applies it when `apply`, acknowledges it and stops the worker; then says `last`.
 */
export function worktreeOriginBrain(
  name: string,
  options: { readonly apply: boolean; readonly last: string; readonly onCompleted?: () => void; readonly worktree?: boolean },
): (turn: ScriptTurn) => ScriptReply {
  const asked = options.worktree === undefined ? {} : { worktree: options.worktree };
  return (turn) => {
    if (!called(turn, "agent_task_spawn")) return { tools: [{ name: "agent_task_spawn", arguments: { name, ...asked } }] };
    const endpoint = field(lastSeen(turn, "## worker started"), "taskEndpoint");
    if (endpoint === undefined) return { text: "no worker" };
    if (!called(turn, "agent_task_send"))
      return { tools: [{ name: "agent_task_send", arguments: { to: JSON.parse(endpoint), task: DEMO_TASK } }] };
    const answer = answerQuestion(turn);
    if (answer !== undefined) return answer;
    const taskId = field(lastSeen(turn, "## task completed"), "taskId");
    if (taskId === undefined) return { text: "waiting" };
    options.onCompleted?.();
    if (options.apply && !called(turn, "agent_task_apply")) return { tools: [{ name: "agent_task_apply", arguments: { taskId } }] };
    if (!called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
    if (!called(turn, "agent_task_stop")) return { tools: [{ name: "agent_task_stop", arguments: { name } }] };
    return { text: options.last };
  };
}

/**
 * A worker brain that, once assigned, asks "Which colour?" with `choices` (suggesting
 * `defaultChoice`), waits for the answer and then completes — or, with `complete: false`, keeps the
 * task open (a test that reads what the answer left on the origin's screen).
 */
export function choiceWorkerBrain(choices: readonly string[], defaultChoice: string, complete = true): (turn: ScriptTurn) => ScriptReply {
  return (turn) => {
    const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
    if (taskId === undefined) return { text: "nothing assigned" };
    if (!called(turn, "agent_task_message")) {
      const question = { taskId, type: "question", message: "Which colour?", choices: [...choices], defaultChoice };
      return { tools: [{ name: "agent_task_message", arguments: question }] };
    }
    if (lastSeen(turn, "## task answer") === undefined) return { text: "waiting for the answer" };
    if (!complete) return { text: "waiting" };
    if (!called(turn, "agent_task_done"))
      return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "painted" } }] };
    return { text: "done" };
  };
}
