/**
 * End to end: relay loss and relay absence. A relay restart mid-task (the relay process is
 * stopped and a fresh one started on the same port) makes both Pis rebind automatically with one
 * non-waking loss record per active task; a relay that is down at startup is retried until it
 * comes up.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import {
  called,
  eventMessages,
  expectEachEventOnce,
  expectNoProblems,
  field,
  isCustom,
  lastSeen,
  lossMessages,
  notifications,
  isHealthyStatus,
  nextBoard,
  statusTexts,
  toolCalls,
  allSeen,
  expectCleanStops,
  scenario,
  stopAll,
} from "../helpers/pi-kit.ts";
import { waitForEndpoint } from "../../kit/session-control.ts";
import { type PiProcess, type PiProcessOptions, startPi } from "../helpers/pi-process.ts";
import { freePort, startRelayProcess, type RelayProcess } from "../../kit/relay-process.ts";
import { idlePollIntervalMs } from "../../src/protocol/limits.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";

// The scenarios start in beforeAll and run concurrently; a test waits for its scenario's real processes.
setDefaultTimeout(60_000);

const spawned: PiProcess[] = [];
const relays: RelayProcess[] = [];

function pi(options: PiProcessOptions): PiProcess {
  const started = startPi(options);
  spawned.push(started);
  return started;
}

async function relayOn(port?: number): Promise<RelayProcess> {
  const relay = await startRelayProcess(port === undefined ? {} : { port });
  relays.push(relay);
  return relay;
}


const AFTER_RESTART = "after the restart";

async function relayRestart() {
  const first = await relayOn();
  const worker = pi({
    session: "restart-worker",
    relayUrl: first.url,
    worker: true,
    brain: (turn) => {
      const fresh = allSeen(turn, "## task assignment").find((text) => text.includes(AFTER_RESTART));
      if (fresh !== undefined) {
        const taskId = field(fresh, "taskId")!;
        if (!called(turn, "agent_task_done", taskId)) return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "done on the fresh endpoint" } }] };
        return { text: "finished" };
      }
      return { text: lastSeen(turn, "## task assignment") === undefined ? "nothing assigned" : "working on it" };
    },
  });
  const origin = pi({
    session: "restart-origin",
    relayUrl: first.url,
    brain: (turn) => {
      if (lastSeen(turn, "Delegate again") !== undefined) {
        if (!called(turn, "agent_task_send", AFTER_RESTART)) return { tools: [{ name: "agent_task_send", arguments: { to: target, task: `A task sent ${AFTER_RESTART}.` } }] };
        const completed = lastSeen(turn, "## task completed");
        if (completed !== undefined && !called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
        return { text: "ok" };
      }
      if (!called(turn, "agent_task_send")) {
        return {
          tools: [
            { name: "agent_task_send", arguments: { to: target, task: "Long task one." } },
            { name: "agent_task_send", arguments: { to: target, task: "Long task two." } },
          ],
        };
      }
      return { text: "ok" };
    },
  });
  const workerBefore = await waitForEndpoint(first.url, "restart-worker");
  const originBefore = await waitForEndpoint(first.url, "restart-origin");
  let target: TaskEndpoint = workerBefore;
  origin.prompt("Delegate two long tasks.");
  await worker.waitFor(() => eventMessages(worker).filter((message) => message.type === "task.created").length === 2);
  const secondAssignment = eventMessages(worker).filter((message) => message.type === "task.created")[1]!.eventId;
  const woken = await worker.waitFor((record) => isCustom(record, "pi-tasks-wake") && JSON.stringify(record).includes(secondAssignment));
  await worker.waitFor((record) => record.type === "agent_settled", 15_000, worker.records.indexOf(woken));
  await origin.waitFor((record) => record.type === "agent_settled");

  const marks = { origin: origin.records.length, worker: worker.records.length, originTurns: origin.turns.length };
  const code = await first.stop();
  // While the relay is gone, the status line says so.
  await origin.waitFor(
    (record) => record.type === "extension_ui_request" && record.method === "setStatus" && typeof record.statusText === "string" && !isHealthyStatus(record.statusText),
    10_000,
    marks.origin,
  );
  const outageStatus = statusTexts(origin).at(-1);
  const second = await relayOn(first.port);
  const workerAfter = await waitForEndpoint(second.url, "restart-worker", { not: workerBefore.id, timeoutMs: 15_000 });
  const originAfter = await waitForEndpoint(second.url, "restart-origin", { not: originBefore.id, timeoutMs: 15_000 });
  await origin.waitFor(() => lossMessages(origin).length >= 2, 10_000);
  await worker.waitFor(() => lossMessages(worker).length >= 2, 10_000);
  await origin.waitFor((record) => record.type === "extension_ui_request" && record.method === "notify", 10_000, marks.origin);
  await worker.waitFor((record) => record.type === "extension_ui_request" && record.method === "notify", 10_000, marks.worker);
  // Give a wrongly waking loss record time to start a turn.
  await Bun.sleep(1_500);
  const quiet = {
    originTurns: origin.turns.length - marks.originTurns,
    originRuns: origin.records.slice(marks.origin).filter((record) => record.type === "agent_start").length,
    workerRuns: worker.records.slice(marks.worker).filter((record) => record.type === "agent_start").length,
  };

  // Both work again on their fresh endpoints.
  target = workerAfter;
  const againFrom = origin.records.length;
  origin.prompt("Delegate again to the fresh endpoint.");
  await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack", 20_000, againFrom);
  await Bun.sleep(1_200);
  // The successor lifetimes did not adopt the lost tasks.
  const boards: Record<string, string[]> = {};
  for (const [name, process] of [["origin", origin], ["worker", worker]] as const) {
    const from = process.records.length;
    process.prompt("/tasks");
    boards[name] = await nextBoard(process, from);
  }
  const entries = { origin: await origin.entries(), worker: await worker.entries() };
  const statusAtEnd = { origin: statusTexts(origin).at(-1), worker: statusTexts(worker).at(-1) };
  const codes = { origin: await origin.stop(), worker: await worker.stop() };
  const stopMs = { origin: origin.stopMs(), worker: worker.stopMs() };
  return { origin, worker, workerBefore, workerAfter, originBefore, originAfter, relayExit: code, outageStatus, quiet, boards, entries, statusAtEnd, codes, stopMs, marks };
}

async function startFailure() {
  const port = freePort();
  const url = `http://127.0.0.1:${port}`;
  const worker = pi({ session: "late-worker", relayUrl: url, worker: true, brain: () => ({ text: "still here" }) });
  const ordinary = pi({ session: "late-ordinary", relayUrl: url, brain: () => ({ text: "still here" }) });
  // A turn while the relay is down: turn_end/agent_end/agent_settled refreshes fail quietly.
  ordinary.prompt("Say something.");
  worker.prompt("Say something.");
  const isWarning = (record: { type: string; method?: unknown; statusText?: unknown }) =>
    record.type === "extension_ui_request" && record.method === "setStatus" && typeof record.statusText === "string" && record.statusText.startsWith("tasks: relay unreachable");
  await Promise.all([worker, ordinary].map((process) => process.waitFor(isWarning as never, 10_000)));
  await Promise.all([worker, ordinary].map((process) => process.waitFor((record) => record.type === "agent_settled", 10_000)));
  const failing = (texts: (string | undefined)[]) => texts.find((text) => text !== undefined && text !== "tasks: starting…" && !isHealthyStatus(text));
  const downStatus = { worker: failing(statusTexts(worker)), ordinary: failing(statusTexts(ordinary)) };
  await Bun.sleep(500);
  const relay = await relayOn(port);
  const upAt = Date.now();
  await Promise.all(["late-worker", "late-ordinary"].map((session) => waitForEndpoint(relay.url, session, { timeoutMs: 15_000 })));
  const registeredAfterMs = Date.now() - upAt;
  await Promise.all([worker, ordinary].map((process) => process.waitFor(() => isHealthyStatus(statusTexts(process).at(-1)), 10_000)));
  const codes = { worker: await worker.stop(), ordinary: await ordinary.stop() };
  return { worker, ordinary, downStatus, registeredAfterMs, codes };
}

let restart: ReturnType<typeof relayRestart>;
let late: ReturnType<typeof startFailure>;

beforeAll(() => {
  restart = scenario(relayRestart);
  late = scenario(startFailure);
});

afterAll(async () => {
  await stopAll(spawned);
  await Promise.all(relays.map((relay) => relay.stop()));
});

describe("relay restart mid-task", () => {
  test("both Pis rebind automatically to fresh endpoints", async () => {
    const { workerBefore, workerAfter, originBefore, originAfter } = await restart;
    expect(workerAfter.id).not.toBe(workerBefore.id);
    expect(originAfter.id).not.toBe(originBefore.id);
    expect(workerAfter.relay).toBe(workerBefore.relay);
  });

  test("history #22: the origin gets one non-waking pi-tasks-relay-loss message per active task: failed, RELAY_STATE_LOST, remote outcome unknown", async () => {
    const { origin, quiet } = await restart;
    const sent = toolCalls(origin, "agent_task_send").slice(0, 2).map((call) => String(call.details.taskId));
    const losses = lossMessages(origin);
    expect(losses).toHaveLength(2);
    expect(losses.map((loss) => (loss.details as { taskId: string }).taskId).sort()).toEqual([...sent].sort());
    for (const loss of losses) {
      expect(loss.details).toMatchObject({ role: "origin", status: "failed", error: { code: "RELAY_STATE_LOST" }, remoteOutcome: "unknown" });
      // The model reads the same facts in the content.
      const content = String(loss.content);
      expect(content).toContain((loss.details as { taskId: string }).taskId);
      expect(content).toContain("RELAY_STATE_LOST");
      expect(content).toContain("remoteOutcome: unknown");
    }
    // No turn started because of them.
    expect(quiet).toEqual({ originTurns: 0, originRuns: 0, workerRuns: 0 });
  });

  test("the worker records the loss of its two assignments the same way", async () => {
    const { worker } = await restart;
    const losses = lossMessages(worker);
    expect(losses).toHaveLength(2);
    for (const loss of losses) expect(loss.details).toMatchObject({ role: "target", status: "failed", error: { code: "RELAY_STATE_LOST" }, remoteOutcome: "unknown" });
  });

  test("a notify reports the recovery; the status line shows the outage and is cleared afterwards", async () => {
    const { origin, worker, outageStatus, statusAtEnd, marks } = await restart;
    for (const [process, mark] of [
      [origin, marks.origin],
      [worker, marks.worker],
    ] as const) {
      const notes = process.records.slice(mark).filter((record) => record.type === "extension_ui_request" && record.method === "notify" && String(record.message).startsWith("pi-tasks: relay"));
      expect(notes).toHaveLength(1);
      expect(String(notes[0]!.message)).toContain("relay state was lost");
      expect(String(notes[0]!.message)).toContain("2 active tasks marked failed");
    }
    expect(outageStatus).toMatch(/^tasks: relay (unreachable|state lost)/);
    expect(statusAtEnd.origin).toMatch(/^tasks: restart-origin · /);
    expect(statusAtEnd.worker).toMatch(/^tasks: restart-worker · /);
    expect(notifications(origin).filter((message) => message.includes("relay state was lost"))).toHaveLength(1);
  });

  test("both work again on the fresh endpoints: a new task is assigned, completed and acknowledged once", async () => {
    const { origin, worker, entries, boards } = await restart;
    const fresh = eventMessages(worker).filter((message) => message.type === "task.created" && message.content.includes(AFTER_RESTART));
    expect(fresh).toHaveLength(1);
    const completed = eventMessages(origin).filter((message) => message.type === "task.completed");
    expect(completed.map((message) => message.taskId)).toEqual([fresh[0]!.taskId]);
    const acks = toolCalls(origin, "agent_task_ack");
    expect(acks.map((call) => [call.isError, call.args.taskId])).toEqual([[false, fresh[0]!.taskId]]);
    await expectEachEventOnce(origin, "origin", entries.origin);
    await expectEachEventOnce(worker, "worker", entries.worker);
    // The lost tasks are not adopted by the successor lifetime.
    const lost = lossMessages(worker).map((loss) => (loss.details as { taskId: string }).taskId);
    expect(lost).not.toContain(fresh[0]!.taskId);
    for (const [name, lines] of Object.entries(boards)) {
      const rows = lines.filter((line) => line.startsWith("  "));
      expect({ name, counts: lines[4], rows: rows.length }).toEqual({ name, counts: "1 task · 0 active", rows: 1 });
      expect(rows[0]!.trim().startsWith(fresh[0]!.taskId.slice(0, 8))).toBe(true);
    }
  });

  test("nothing hangs: both processes exit 0 promptly on stdin close, without extension errors", async () => {
    const { origin, worker, codes, stopMs, relayExit } = await restart;
    expect(relayExit).toBe(0);
    expectCleanStops({ origin, worker }, { codes, stopMs });
  });
});

describe("history #6: relay down at startup", () => {
  test("the warning status names the failure while the relay is down, and turns still complete without extension errors", async () => {
    const { worker, ordinary, downStatus } = await late;
    expect(downStatus.worker).toMatch(/^tasks: relay unreachable at http:\/\/127\.0\.0\.1:\d+; retrying$/);
    expect(downStatus.ordinary).toMatch(/^tasks: relay unreachable at http:\/\/127\.0\.0\.1:\d+; retrying$/);
    for (const process of [worker, ordinary]) {
      expect(process.records.filter((record) => record.type === "agent_settled").length).toBeGreaterThanOrEqual(1);
      expectNoProblems(process, "late");
    }
  });

  test("the start is retried: once the relay is up both sessions register and the warning clears", async () => {
    const { worker, ordinary, registeredAfterMs, codes } = await late;
    // The idle cadence bounds the retry (with slack for a loaded machine).
    expect(registeredAfterMs).toBeLessThan(idlePollIntervalMs * 2);
    expect(statusTexts(worker).at(-1)).toBe("tasks: late-worker · idle");
    expect(statusTexts(ordinary).at(-1)).toBe("tasks: late-ordinary · idle");
    expect(codes).toEqual({ worker: 0, ordinary: 0 });
  });
});
