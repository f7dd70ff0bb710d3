/**
 * End to end: the extension's lifetime inside real Pi processes — shutdown in the middle of a
 * pass, a Pi without a relay identity, print and json modes, the status line and `/tasks`.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ConfiguredTaskCore, createConfiguredTaskCore } from "../../src/core/configured.ts";
import { defaultRequestDeadlineMs, watchClientWaitMs } from "../../src/protocol/limits.ts";
import { RELAY_ID } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import {
  called,
  expectNoProblems,
  field,
  isHealthyStatus,
  nextBoard,
  statusTexts,
  STATUS_KEY,
  toolCalls,
  scenario,
  usePiFixture,
} from "../helpers/pi-kit.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { type RpcRecord, runPiOnce, STOP_GRACE_MS } from "../helpers/pi-process.ts";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { REPLY } from "./scripts/says-ok.ts";

// The scenarios start in beforeAll and run concurrently; a test waits for its scenario's real processes.
setDefaultTimeout(60_000);

const SAYS_OK = join(REPO_ROOT, "tests", "e2e", "scripts", "says-ok.ts");

const fx = usePiFixture();
const cores: ConfiguredTaskCore[] = [];

const pi = fx.pi;

const proxy = fx.proxy;

/** An in-process endpoint (the configured core without a Pi) to address tasks to. */
async function plainEndpoint(session: string): Promise<{ core: ConfiguredTaskCore; endpoint: TaskEndpoint }> {
  const core = createConfiguredTaskCore({ url: fx.relay.url, callerSession: session });
  cores.push(core);
  const endpoint = await core.run((current) => current.connect());
  return { core, endpoint };
}

const UNHANDLED = /unhandled|rejection|uncaught/i;

/** history #7: stdin closes while the worker's pass waits on a held relay receive. */
async function shutdownMidPass() {
  const gate = proxy();
  const worker = pi({ session: "shutdown-worker", relayUrl: gate.url, worker: true, brain: () => ({ text: "idle" }) });
  const workerEndpoint = await waitForEndpoint(fx.relay.url, "shutdown-worker");
  // Let the first passes finish, then hold every receive at the proxy.
  await Bun.sleep(300);
  gate.push({ operation: "receive", kind: "hold", times: Infinity });
  const { core: origin } = await plainEndpoint("shutdown-origin");
  // Mail waits for the worker: the doorbell (or the 1 s cadence) starts a pass that gets held.
  await origin.run((current) => current.createTask({ to: workerEndpoint, task: "never presented" }));
  await gate.waitFor((stats) => stats.held >= 1, 15_000);
  const mark = worker.records.length;
  const closedAt = Date.now();
  // A grace beyond the request deadline (plus the usual stop budget): Pi must exit by itself.
  const code = await worker.stop(defaultRequestDeadlineMs + STOP_GRACE_MS);
  const killed = worker.killed();
  // The held request may now reach the relay; the worker is gone and must not have acted on it.
  gate.release();
  await Bun.sleep(200);
  const after = worker.records.slice(mark);
  const requestsAfter = gate
    .requests()
    .filter((request) => request.receivedAt >= closedAt)
    .map((request) => request.operation);
  const task = origin.current().listTasks()[0]!;
  return { worker, code, killed, after, requestsAfter, task };
}

/** A Pi without WOLFPACK_SESSION_NAME: it names itself from its project directory and works. */
async function noSessionName() {
  const gate = proxy();
  const lonely = pi({
    relayUrl: gate.url,
    brain: (turn) => {
      if (turn.messages.at(-1)?.text === "Say hello.") return { text: "hello" };
      if (!called(turn, "agent_task_inbox")) {
        return {
          tools: [
            { name: "agent_task_inbox", arguments: {} },
            { name: "agent_task_send", arguments: { to: { relay: RELAY_ID, id: "00000000-0000-4000-8000-0000000000aa" }, task: "x" } },
          ],
        };
      }
      return { text: "understood" };
    },
  });
  const named = await lonely.waitFor(
    (record) =>
      record.type === "extension_ui_request" &&
      record.method === "setStatus" &&
      /^tasks: pi-tasks-project-/.test(String(record.statusText)),
  );
  const session = String(named.statusText).slice("tasks: ".length).split(" · ")[0]!;
  const endpoint = await waitForEndpoint(gate.url, session);
  lonely.prompt("Use the task tools.");
  await lonely.waitFor((record) => record.type === "agent_settled");
  const from = lonely.records.length;
  lonely.prompt("Say hello.");
  await lonely.waitFor((record) => record.type === "agent_settled", 15_000, from);
  const code = await lonely.stop();
  return { lonely, code, session, endpoint };
}

/** The status line under relay capacity refusals of receive, then healthy again. */
async function statusLine() {
  const gate = proxy();
  const worker = pi({ session: "status-worker", relayUrl: gate.url, worker: true, brain: () => ({ text: "idle" }) });
  await waitForEndpoint(fx.relay.url, "status-worker");
  await Bun.sleep(200);
  const mark = worker.records.length;
  const refusals = gate.push({ operation: "receive", kind: "capacity", times: 2 });
  const isStatus = (record: RpcRecord) => record.type === "extension_ui_request" && record.method === "setStatus";
  const warned = await worker.waitFor(
    (record) => isStatus(record) && typeof record.statusText === "string" && !isHealthyStatus(record.statusText),
    10_000,
    mark,
  );
  const cleared = await worker.waitFor(
    (record) => isStatus(record) && isHealthyStatus(record.statusText as string),
    15_000,
    worker.records.indexOf(warned),
  );
  const boardFrom = worker.records.length;
  worker.prompt("/tasks");
  const board = await nextBoard(worker, boardFrom);
  await Bun.sleep(300);
  const boards = worker.uiRequests("notify").filter((record) => String(record.message).startsWith("pi-tasks\n")).length;
  const widgets = worker.uiRequests("setWidget").length;
  const code = await worker.stop();
  return { worker, warned, cleared, hits: refusals.hits(), board, boards, widgets, code, turns: worker.turns.length };
}

/** `/tasks` on an origin with two tasks in flight. */
async function board() {
  const { endpoint } = await plainEndpoint("board-target");
  const origin = pi({
    session: "board-origin",
    brain: (turn) => {
      if (!called(turn, "agent_task_send")) {
        return {
          tools: [
            { name: "agent_task_send", arguments: { to: endpoint, task: "First board task." } },
            { name: "agent_task_send", arguments: { to: endpoint, task: "Second board task." } },
          ],
        };
      }
      return { text: "sent" };
    },
  });
  origin.prompt("Send two tasks.");
  await origin.waitFor((record) => record.type === "agent_settled");
  const turnsBefore = origin.turns.length;
  const from = origin.records.length;
  origin.prompt("/tasks");
  const lines = await nextBoard(origin, from);
  const detailFrom = origin.records.length;
  const sent = toolCalls(origin, "agent_task_send").map((call) => String(call.details.taskId));
  origin.prompt(`/tasks ${sent[0]!.slice(0, 8)}`);
  const detail = String(
    (await origin.waitFor((record) => record.type === "extension_ui_request" && record.method === "notify", 10_000, detailFrom)).message,
  ).split("\n");
  await Bun.sleep(300);
  const turnsAfter = origin.turns.length;
  const code = await origin.stop();
  return { origin, lines, detail, turnsBefore, turnsAfter, code, endpoint };
}

/** `pi -p` / `pi --mode json` once, through a proxy that records what reached the relay. */
async function runOnce(mode: "print" | "json", withRelay: boolean) {
  const gate = proxy();
  const mark = join(tmpdir(), `pi-tasks-reply-${crypto.randomUUID()}`);
  try {
    const result = await runPiOnce({
      mode,
      prompt: "Say it.",
      script: SAYS_OK,
      // With a relay, the reply waits until the lifetime has connected and opened its long-poll watch.
      env: { PI_TASKS_TEST_REPLY_DELAY_MS: withRelay ? "1500" : "0", PI_TASKS_TEST_REPLY_MARK: mark },
      session: `${mode}-once-${withRelay}`,
      // Without a relay the URL points at a closed port: nothing ever answers.
      relayUrl: withRelay ? gate.url : "http://127.0.0.1:9",
      // A hang would outlast the watch's long poll; kill well after it.
      timeoutMs: watchClientWaitMs + 15_000,
    });
    const repliedAt = existsSync(mark) ? Number(readFileSync(mark, "utf8")) : Number.NaN;
    const requests = gate.requests();
    return {
      result,
      repliedBeforeExit: repliedAt <= result.exitedAt,
      operations: requests.map((request) => request.operation),
      // Whether Pi's last watch was still open when it exited (its client went away unanswered).
      lastWatchAbandoned: requests.findLast((request) => request.operation === "watch")?.clientGoneAt !== undefined,
    };
  } finally {
    rmSync(mark, { force: true });
  }
}

const onceRuns: Record<string, ReturnType<typeof runOnce>> = {};

let shutdown: ReturnType<typeof shutdownMidPass>;
let nameless: ReturnType<typeof noSessionName>;
let status: ReturnType<typeof statusLine>;
let boardRun: ReturnType<typeof board>;

beforeAll(async () => {
  shutdown = scenario(shutdownMidPass);
  nameless = scenario(noSessionName);
  status = scenario(statusLine);
  boardRun = scenario(board);
  for (const mode of ["print", "json"] as const)
    for (const withRelay of [false, true]) onceRuns[`${mode}:${withRelay}`] = scenario(() => runOnce(mode, withRelay));
});

afterAll(async () => {
  await Promise.all(cores.map((core) => core.close()));
});

describe("shutdown in the middle of a pass (history #7)", () => {
  // How fast it stops is a figure for `npm run bench`, not an assertion here.
  test("Pi exits 0 by itself although a relay request is held", async () => {
    const { code, killed } = await shutdown;
    expect({ code, killed }).toEqual({ code: 0, killed: false });
  });

  test("nothing is written after shutdown began: no message, archive entry, status or notify, no corrupt stdout", async () => {
    const { worker, after } = await shutdown;
    const written = after.filter((record) =>
      ["message_end", "entry_appended", "extension_ui_request", "extension_error", "unparsed", "agent_start"].includes(record.type),
    );
    expect(written).toEqual([]);
    expectNoProblems(worker, "worker");
  });

  test("no unhandled rejection, and the worker neither acknowledged nor reported the held mail", async () => {
    const { worker, requestsAfter, task } = await shutdown;
    expect(worker.stderr()).not.toMatch(UNHANDLED);
    expect(requestsAfter.filter((operation) => operation === "acknowledge" || operation === "send")).toEqual([]);
    // The origin never got a receipt: the assignment was not presented by the dying lifetime.
    expect(task.deliveryEvidence.receiverReceipt).toBe("not_confirmed");
  });
});

describe("without WOLFPACK_SESSION_NAME", () => {
  test("the session names itself from its project directory plus a random suffix, registers under it and shows it in the footer", async () => {
    const { lonely, session, endpoint } = await nameless;
    expect(session).toMatch(/^pi-tasks-project-[0-9a-z]+-[0-9a-z]{6}$/);
    expect(endpoint.relay).toBe(RELAY_ID);
    expect(statusTexts(lonely)).toContain(`tasks: ${session} · idle`);
  });

  test("the tools work: the inbox answers, a send to an unregistered endpoint is refused as such", async () => {
    const { lonely, code } = await nameless;
    const [inbox] = toolCalls(lonely, "agent_task_inbox");
    expect(inbox!.isError).toBe(false);
    expect(inbox!.text).toContain("(no tasks)");
    const [send] = toolCalls(lonely, "agent_task_send");
    expect({ isError: send!.isError, code: field(send!.text, "code") }).toEqual({ isError: true, code: "TARGET_NOT_REGISTERED" });
    expect(lonely.records.filter((record) => record.type === "agent_settled")).toHaveLength(2);
    expect(code).toBe(0);
    expectNoProblems(lonely, "no-name");
  });
});

describe("print and json modes exit by themselves after the prompt (timers unref'd, the open watch abandoned)", () => {
  for (const mode of ["print", "json"] as const) {
    for (const withRelay of [false, true]) {
      test(`${mode} mode, ${withRelay ? "registered on a live relay with a watch open" : "with the relay unreachable"}`, async () => {
        const { result, repliedBeforeExit, operations, lastWatchAbandoned } = await onceRuns[`${mode}:${withRelay}`]!;
        // Pi exits by itself after the reply: a timer that held it would keep it alive until it is killed.
        expect({ killed: result.killed, code: result.code, repliedBeforeExit }).toEqual({
          killed: false,
          code: 0,
          repliedBeforeExit: true,
        });
        expect(result.stderr).not.toMatch(UNHANDLED);
        if (withRelay) {
          expect(operations).toContain("connect");
          expect(operations).toContain("watch");
          // The open long poll did not hold it: Pi went away with its watch unanswered.
          expect(lastWatchAbandoned).toBe(true);
        } else {
          expect(operations).toEqual([]);
        }
        if (mode === "print") {
          expect(result.stdout.trim()).toBe(REPLY);
        } else {
          const lines = result.stdout.split("\n").filter((line) => line.trim().length > 0);
          expect(lines.length).toBeGreaterThan(0);
          for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
          expect(result.stdout).toContain(REPLY);
        }
      });
    }
  }
});

describe("the status line", () => {
  test("a relay capacity refusal of receive says so in words (never 'unavailable'); then the footer shows the session and its counts again", async () => {
    const { warned, cleared, hits } = await status;
    expect(hits).toBeGreaterThanOrEqual(1);
    expect(warned.statusKey).toBe(STATUS_KEY);
    expect(warned.statusText).toMatch(/^tasks: status-worker · capacity \(RELAY_CAPACITY\) on \w+ — the relay is at capacity; retrying$/);
    expect(cleared.statusKey).toBe(STATUS_KEY);
    expect(cleared.statusText).toBe("tasks: status-worker · idle");
  });

  test("/tasks on a Pi without tasks prints the board once (one notify, no widget) without calling the model", async () => {
    const { board, boards, widgets, turns, code } = await status;
    expect(board[0]).toBe("pi-tasks");
    expect(board[1]).toMatch(/^session: status-worker · endpoint wolfpack-pi-tasks-v2\/[0-9a-f-]{36}$/);
    expect(board[2]).toMatch(/^identity: [0-9a-f]{4}(:[0-9a-f]{4}){3} · \/tasks identity shows how to pair$/);
    expect(board[3]).toMatch(/^relay: http:\/\/127\.0\.0\.1:\d+ \(from PI_TASKS_RELAY_URL\)$/);
    expect(board[4]).toBe("0 tasks · 0 active");
    expect(board).toHaveLength(5);
    expect(boards).toBe(1);
    expect(widgets).toBe(0);
    expect(turns).toBe(0);
    expect(code).toBe(0);
  });
});

describe("/tasks", () => {
  test("prints the board with one line per task in plain words, naming the peer session; /tasks <id> shows one task's details", async () => {
    const { lines, detail, turnsBefore, turnsAfter, origin, code } = await boardRun;
    // The two sends ran in one turn: their results may end in either order, so each is matched by its own task text.
    const sends = toolCalls(origin, "agent_task_send");
    expect(sends.map((call) => call.args.task).sort()).toEqual(["First board task.", "Second board task."]);
    // A plain relay client never proves a key: nothing of either task left (docs/protocol.md "Sealing and proofs").
    expect(sends.map((call) => ({ isError: call.isError, delivery: call.details.delivery }))).toEqual([
      { isError: false, delivery: "pending" },
      { isError: false, delivery: "pending" },
    ]);
    expect(lines[4]).toBe("2 tasks · 2 active");
    for (const call of sends) {
      const taskId = String(call.details.taskId);
      const line = lines.find((candidate) => candidate.startsWith(`  ${taskId.slice(0, 8)}`));
      expect(line).toBeDefined();
      // The target is a plain relay client named board-target: the relay's session list names it
      // (a name it claims, marked so). No signed mail came back from it yet: no key is bound to the task.
      // It never proved its key (a plain relay client): the board says what the task waits for.
      expect(line).toContain(
        "to `board-target` (unverified claim) [no key yet] — sending to the worker (waiting for the worker to prove its key) — ",
      );
      expect(line).toContain(`"${String(call.args.task)}"`);
      expect(line).not.toContain("terminal=");
    }
    expect(lines.at(-1)).toBe("Details: /tasks <task id>");
    expect(detail[0]).toBe(`task ${sends[0]!.details.taskId}`);
    expect(detail).toContain("  delivery evidence:");
    expect(detail.some((line) => line.startsWith("    relay accepted the assignment: "))).toBe(true);
    expect(turnsAfter).toBe(turnsBefore);
    expect(code).toBe(0);
  });
});
