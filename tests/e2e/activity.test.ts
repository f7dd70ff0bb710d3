/**
 * The team at work, in real Pi 1.6 CLIs (`--mode rpc`) on one real relay, scripted brains:
 *
 * 1. Activity: a worker's model runs a real `bash sleep`; within 2 s of the tool starting the
 *    origin's `/tasks` board, its workers widget (`setWidget`) and its footer say the worker is
 *    running bash with the command; `agent_task_status` says it to the origin's model.
 * 2. Liveness: that worker's Pi is killed (SIGKILL, no goodbye); its registration lives on until
 *    its lease ends, yet the origin has the task `orphaned` within 15 s, from the missed heartbeats.
 * 3. A result even when the worker forgets: a worker's model answers in prose and ends its turn
 *    without `agent_task_done`; its extension reminds it once; it ends again without a report;
 *    the origin receives `## task ended without a report` with the worker's last words, woken, and
 *    the task stays active (nothing was made up).
 *
 * The scenarios run concurrently against one relay.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { waitForEndpoint } from "../../kit/session-control.ts";
import { REMINDER_MESSAGE } from "../../extensions/pi-tasks/reminders.ts";
import { WIDGET_KEY } from "../../extensions/pi-tasks/widget.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { called, EVENT_MESSAGE, field, isCustom, lastSeen, nextBoard, statusTexts, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import type { PiProcess, RpcRecord } from "../helpers/pi-process.ts";

setDefaultTimeout(60_000);

const fx = usePiFixture();

/** How soon the origin must show a tool the worker's model started, and know a killed worker gone (the bounds). */
const SHOWN_WITHIN_MS = 2_000;
const ORPHANED_WITHIN_MS = 15_000;
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

// -----------------------------------------------------------------------------------------------
// 1 and 2: activity shown within 2 s; a killed worker orphaned within 15 s
// -----------------------------------------------------------------------------------------------

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
  const to = await waitForEndpoint(fx.relay.url, `busy-worker-${host}`);
  let statusAsked = false;
  const origin = fx.pi({
    host,
    session: `busy-origin-${host}`,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task sent"), "taskId");
      if (statusAsked && taskId !== undefined && !called(turn, "agent_task_status"))
        return { tools: [{ name: "agent_task_status", arguments: { taskId } }] };
      return originBrain(() => to)(turn);
    },
  });
  origin.prompt("Delegate the count.");
  const started = await worker.waitFor(isToolStart("bash"), 30_000);
  const startedAt = worker.times[worker.records.indexOf(started)]!;
  const shown = await boardUntil(origin, /worker running bash "sleep 20"/, startedAt + SHOWN_WITHIN_MS * 3);
  // The widget and the footer are rewritten after each pass (the board reads the core at once).
  const widget = await origin
    .waitFor(
      (record) =>
        record.type === "extension_ui_request" &&
        record.method === "setWidget" &&
        record.widgetKey === WIDGET_KEY &&
        JSON.stringify(record.widgetLines).includes("running bash"),
      5_000,
    )
    .catch(() => undefined);
  const footer = statusTexts(origin).find((text) => text?.includes("1 running"));
  statusAsked = true;
  const from = origin.records.length;
  origin.prompt("How is the worker doing?");
  const status = await origin.waitFor(
    (record) => record.type === "tool_execution_end" && record.toolName === "agent_task_status",
    15_000,
    from,
  );
  // Now the crash: no goodbye, the registration stays until its lease ends.
  worker.process.kill("SIGKILL");
  const killedAt = Date.now();
  const orphaned = await origin.waitFor(isEvent("## task orphaned"), ORPHANED_WITHIN_MS * 2, from).catch(() => undefined);
  return {
    shownAfterMs: shown.line === undefined ? undefined : shown.at - startedAt,
    boardLine: shown.line,
    widget,
    footer,
    statusText: JSON.stringify(status),
    orphanedAfterMs: orphaned === undefined ? undefined : origin.times[origin.records.indexOf(orphaned)]! - killedAt,
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
    test("/tasks at the origin shows the worker running bash with its command within 2 s of the tool starting", async () => {
      const { shownAfterMs, boardLine } = await busy;
      expect(boardLine).toMatch(/worker running bash "sleep 20"/);
      expect(shownAfterMs).toBeLessThanOrEqual(SHOWN_WITHIN_MS);
    });

    test("the workers widget and the footer say so too; agent_task_status tells the origin's model", async () => {
      const { widget, footer, statusText } = await busy;
      expect(JSON.stringify(widget?.widgetLines)).toMatch(
        /running bash \\"sleep 20\\" for \d+s · \d+ turns? · [\d,]+ tokens · heard \d+s ago/,
      );
      expect(footer).toMatch(new RegExp(`^tasks: busy-origin-${host} · 1 active · 1 running`));
      expect(statusText).toMatch(/workerActivity: running bash \\"sleep 20\\"/);
    });
  });

  describe("liveness in seconds", () => {
    test("a killed worker (its registration still alive) is orphaned at the origin within 15 s", async () => {
      const { orphanedAfterMs } = await busy;
      expect(orphanedAfterMs).toBeDefined();
      expect(orphanedAfterMs!).toBeLessThanOrEqual(ORPHANED_WITHIN_MS);
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
