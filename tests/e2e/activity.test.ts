/**
 * The team at work, in real Pi 1.6 CLIs (`--mode rpc`) on one real relay, scripted brains:
 *
 * 1. Activity: a worker's model runs a real `bash sleep`; while the tool still runs the origin's
 *    `/tasks` board, its workers widget (`setWidget`) and its footer say the worker is running bash
 *    with the command; `agent_task_status` says it to the origin's model.
 * 2. Liveness, and one report per loss: that worker's Pi is killed (SIGKILL, no goodbye) while a
 *    stranger on the relay sends the origin junk every second (mail its gate rejects); the dead
 *    worker's registration lives on until its lease ends, yet the origin has the task `orphaned`
 *    from the missed heartbeats, while that registration still stands. It is shown once and wakes
 *    the origin's model once; the model reassigns it at once to a spare worker, which completes it,
 *    and it is never orphaned again (nothing of the dead worker's silence carries over).
 * 3. A result even when the worker forgets: a worker's model answers in prose and ends its turn
 *    without `agent_task_done`; its extension reminds it once; it ends again without a report;
 *    the origin receives `## task ended without a report` with the worker's last words, woken, and
 *    the task stays active (nothing was made up).
 *
 * The scenarios run concurrently against one relay. How long detection takes is measured by
 * `npm run bench`, not asserted here.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { sessionEndpoint, waitForEndpoint } from "../../testkit/session-control.ts";
import { encodeEnvelope, makeIntent } from "../../src/core/envelopes.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { REMINDER_MESSAGE } from "../../extensions/pi-tasks/reminders.ts";
import { WIDGET_KEY } from "../../extensions/pi-tasks/widget.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import {
  called,
  EVENT_MESSAGE,
  field,
  isCustom,
  lastSeen,
  nextBoard,
  statusTexts,
  toolCalls,
  usePiFixture,
  wakeMessages,
} from "../helpers/pi-kit.ts";
import type { PiProcess, RpcRecord } from "../helpers/pi-process.ts";

setDefaultTimeout(150_000);

const fx = usePiFixture();

/** How long a scenario waits for a step on a loaded 2-core machine (a budget, never an assertion). */
const STEP_BUDGET_MS = 45_000;
/** How often the stranger sends the origin junk while the worker lies dead. */
const JUNK_EVERY_MS = 1_000;
const SLEEP_COMMAND = "sleep 20";
const LAST_WORDS = "I counted 3 files, that is all.";

const isEvent = (title: string) => (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith(title);
const isToolStart = (name: string) => (record: RpcRecord) => record.type === "tool_execution_start" && record.toolName === name;

/** `/tasks` at a Pi until a line matches, or the deadline passes: the first matching line and when it came. */
async function boardUntil(pi: PiProcess, pattern: RegExp, deadline: number): Promise<{ line?: string; at: number }> {
  for (;;) {
    const from = pi.records.length;
    pi.prompt("/tasks");
    const board = await nextBoard(pi, from).catch(() => [] as string[]);
    const line = board.find((text) => pattern.test(text));
    if (line !== undefined || Date.now() > deadline) return { ...(line === undefined ? {} : { line }), at: Date.now() };
    await Bun.sleep(100);
  }
}

function originBrain(to: () => unknown) {
  return (turn: Parameters<NonNullable<Parameters<typeof fx.pi>[0]["brain"]>>[0]) => {
    if (!called(turn, "agent_task_send"))
      return { tools: [{ name: "agent_task_send", arguments: { to: to(), task: "Count the files." } }] };
    return { text: "waiting for my worker" };
  };
}

/**
 * A stranger on the relay who sends `to` mail its gate rejects (an unsigned-by-anyone-it-knows
 * intent for no task), every `JUNK_EVERY_MS` until stopped.
 */
async function junkSender(relayUrl: string, to: TaskEndpoint): Promise<{ stop(): Promise<number> }> {
  const session = createVolatileTaskSession({ url: relayUrl, callerSession: `junk-${crypto.randomUUID().slice(0, 8)}` });
  const source = (await session.lease()).endpoint;
  const stranger = { identity: generateIdentity().identity, peerName: () => undefined };
  let sent = 0;
  const timer = setInterval(() => {
    const intent = makeIntent("no-such-task", "task.activity", { state: "idle", since: Date.now(), usage: { turns: 0, tokens: 0 } }, 1);
    void session
      .send(encodeEnvelope(source, to, "no-such-task", "intent", intent, Date.now(), stranger))
      .then(() => (sent += 1))
      .catch(() => undefined);
  }, JUNK_EVERY_MS);
  return {
    async stop() {
      clearInterval(timer);
      await session.close();
      return sent;
    },
  };
}

/** The worker brain of a spare worker: completes whatever it is assigned. */
function spareBrain(turn: Parameters<NonNullable<Parameters<typeof fx.pi>[0]["brain"]>>[0]) {
  const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
  if (taskId === undefined) return { text: "nothing assigned" };
  if (called(turn, "agent_task_done")) return { text: "done" };
  return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "the spare counted them" } }] };
}

// -----------------------------------------------------------------------------------------------
// 1 and 2: activity shown while it runs; a killed worker orphaned once, reassigned, completed
// -----------------------------------------------------------------------------------------------

/** The short id the board shows (a model copies it from there): the tools take it. */
const short = (taskId: string) => taskId.slice(0, 8);

/** The origin's model: sends, asks for status when told to, reassigns an orphaned task to `spare`, acknowledges — naming tasks by their short ids. */
function busyOriginBrain(to: TaskEndpoint, spare: TaskEndpoint, statusAsked: () => boolean) {
  return (turn: Parameters<NonNullable<Parameters<typeof fx.pi>[0]["brain"]>>[0]) => {
    const taskId = field(lastSeen(turn, "## task sent"), "taskId");
    const orphaned = lastSeen(turn, "## task orphaned");
    if (orphaned !== undefined && !called(turn, "agent_task_reassign"))
      return { tools: [{ name: "agent_task_reassign", arguments: { taskId: short(field(orphaned, "taskId")!), to: spare } }] };
    const completed = lastSeen(turn, "## task completed");
    if (completed !== undefined && !called(turn, "agent_task_ack"))
      return { tools: [{ name: "agent_task_ack", arguments: { taskId: short(field(completed, "taskId")!) } }] };
    if (statusAsked() && taskId !== undefined && !called(turn, "agent_task_status"))
      return { tools: [{ name: "agent_task_status", arguments: { taskId: short(taskId) } }] };
    return originBrain(() => to)(turn);
  };
}

async function busyThenKilled(host: PiHost) {
  const worker = fx.pi({
    host,
    session: `busy-worker-${host}`,
    worker: true,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId === undefined) return { text: "nothing assigned" };
      if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command: SLEEP_COMMAND } }] };
      return { text: "slept" };
    },
  });
  const spareWorker = fx.pi({ host, session: `spare-worker-${host}`, worker: true, brain: spareBrain });
  const to = await waitForEndpoint(fx.relay.url, `busy-worker-${host}`);
  const spare = await waitForEndpoint(fx.relay.url, `spare-worker-${host}`);
  let statusAsked = false;
  const origin = fx.pi({ host, session: `busy-origin-${host}`, brain: busyOriginBrain(to, spare, () => statusAsked) });
  origin.prompt("Delegate the count.");
  await worker.waitFor(isToolStart("bash"), STEP_BUDGET_MS);
  const board = await boardUntil(origin, /worker running bash "sleep 20"/, Date.now() + STEP_BUDGET_MS);
  // Seen while the tool still ran: the worker's bash had not ended when the board said so.
  const bashEnded = worker.records.some((record) => record.type === "tool_execution_end" && record.toolName === "bash");
  // The widget and the footer are rewritten after each pass (the board reads the core at once).
  const widget = await origin
    .waitFor(
      (record) =>
        record.type === "extension_ui_request" &&
        record.method === "setWidget" &&
        record.widgetKey === WIDGET_KEY &&
        JSON.stringify(record.widgetLines).includes("running bash"),
      STEP_BUDGET_MS,
    )
    .catch(() => undefined);
  const footer = statusTexts(origin).find((text) => text?.includes("1 running"));
  statusAsked = true;
  const from = origin.records.length;
  origin.prompt("How is the worker doing?");
  const status = await origin.waitFor(
    (record) => record.type === "tool_execution_end" && record.toolName === "agent_task_status",
    STEP_BUDGET_MS,
    from,
  );
  // Now the crash: no goodbye, the registration stays until its lease ends; a stranger sends junk.
  const originEndpoint = await waitForEndpoint(fx.relay.url, `busy-origin-${host}`);
  const junk = await junkSender(fx.relay.url, originEndpoint);
  worker.process.kill("SIGKILL");
  const orphaned = await origin.waitFor(isEvent("## task orphaned"), STEP_BUDGET_MS, from).catch(() => undefined);
  const stillRegistered = (await sessionEndpoint(fx.relay.url, `busy-worker-${host}`))?.id === to.id;
  const junkSent = await junk.stop();
  const acked = await origin
    .waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack", STEP_BUDGET_MS, from)
    .catch(() => undefined);
  return {
    origin,
    spareWorker,
    boardLine: board.line,
    bashEnded,
    widget,
    footer,
    status,
    orphaned,
    stillRegistered,
    junkSent,
    acked,
  };
}

// -----------------------------------------------------------------------------------------------
// 3. a worker that forgets to report
// -----------------------------------------------------------------------------------------------

async function forgetful(host: PiHost) {
  const worker = fx.pi({
    host,
    session: `forgetful-worker-${host}`,
    worker: true,
    brain: (turn) => (lastSeen(turn, "## task assignment") === undefined ? { text: "nothing assigned" } : { text: LAST_WORDS }),
  });
  const to = await waitForEndpoint(fx.relay.url, `forgetful-worker-${host}`);
  const origin = fx.pi({ host, session: `forgetful-origin-${host}`, brain: originBrain(() => to) });
  origin.prompt("Delegate the count.");
  const told = await origin.waitFor(isEvent("## task ended without a report"), 40_000).catch(() => undefined);
  await Bun.sleep(1_500);
  return { worker, origin, told };
}

describeOnHosts("the team at work", (host) => {
  let busy: ReturnType<typeof busyThenKilled>;
  let forgot: ReturnType<typeof forgetful>;

  beforeAll(() => {
    busy = busyThenKilled(host);
    forgot = forgetful(host);
    busy.catch(() => undefined);
    forgot.catch(() => undefined);
  });

  describe("worker activity, live", () => {
    test("/tasks at the origin shows the worker running bash with its command while the tool runs", async () => {
      const { boardLine, bashEnded } = await busy;
      expect(boardLine).toMatch(/worker running bash "sleep 20"/);
      expect(bashEnded).toBe(false);
    });

    test("the workers widget and the footer say so too; agent_task_status tells the origin's model", async () => {
      const { widget, footer, status } = await busy;
      expect(JSON.stringify(widget?.widgetLines)).toMatch(
        /running bash \\"sleep 20\\" for \d+s · \d+ turns? · [\d,]+ tokens · heard \d+s ago/,
      );
      expect(footer).toMatch(new RegExp(`^tasks: busy-origin-${host} · 1 active · 1 running`));
      expect(JSON.stringify(status)).toMatch(/workerActivity: running bash \\"sleep 20\\"/);
    });
  });

  describe("a lost worker, reported once", () => {
    test("a killed worker is orphaned from its silence while its registration still stands, though a stranger sends the origin junk every second", async () => {
      const { orphaned, stillRegistered, junkSent, origin } = await busy;
      expect(orphaned).toBeDefined();
      expect(stillRegistered).toBe(true);
      expect(junkSent).toBeGreaterThan(0);
      expect(origin.problems()).toEqual([]);
    });

    test("it is shown once and wakes the origin's model once; reassigned at once, the spare completes it and it is never orphaned again", async () => {
      const { origin, spareWorker, orphaned, acked } = await busy;
      const reports = origin.customMessages(EVENT_MESSAGE).filter((message) => String(message.content).startsWith("## task orphaned"));
      expect(reports).toHaveLength(1);
      const orphanId = String((orphaned!.message as { details?: { eventId?: unknown } }).details?.eventId);
      expect(wakeMessages(origin).filter((wake) => wake.eventIds.includes(orphanId))).toHaveLength(1);
      // Named by the short ids the board shows, each result naming the task's full id.
      const reassigned = toolCalls(origin, "agent_task_reassign");
      expect(reassigned.map((call) => call.isError)).toEqual([false]);
      expect(String(reassigned[0]!.args.taskId)).toHaveLength(8);
      expect(reassigned[0]!.text).toContain(String(reassigned[0]!.details.taskId));
      expect(toolCalls(spareWorker, "agent_task_done").map((call) => call.isError)).toEqual([false]);
      expect(acked).toBeDefined();
      expect(toolCalls(origin, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
    });
  });

  describe("a result even when the worker forgets", () => {
    test("the worker's model is reminded once, then the origin is told with its last words; the task stays active", async () => {
      const { worker, origin, told } = await forgot;
      expect(worker.customMessages(REMINDER_MESSAGE)).toHaveLength(1);
      expect(told).toBeDefined();
      const text = String((told!.message as { content?: unknown }).content);
      expect(text).toContain(LAST_WORDS);
      expect(text).toContain("Nothing above is a result.");
      // One report: nothing more after it, and no fabricated terminal.
      expect(
        origin.customMessages(EVENT_MESSAGE).filter((message) => String(message.content).startsWith("## task ended without a report")),
      ).toHaveLength(1);
      expect(origin.customMessages(EVENT_MESSAGE).some((message) => /^## task (completed|failed)/.test(String(message.content)))).toBe(
        false,
      );
      expect(toolCalls(worker, "agent_task_done")).toEqual([]);
      // The origin's model was woken by it (a run started after it arrived).
      const at = origin.records.indexOf(told!);
      expect(origin.records.slice(at).some((record) => record.type === "agent_start")).toBe(true);
    });
  });
});
