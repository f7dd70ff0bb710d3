/**
 * End to end: signed, sealed mail between two real Pi 1.6 CLIs (`--mode rpc`) on a real relay, each
 * with its own `PI_TASKS_HOME` (two users) or both on one home (one user). Identities and pairing go
 * through the real `pi-tasks identity` / `pi-tasks peers add` command line and the `/tasks pair`
 * slash command, as people do it. Both Pis keep running through all phases.
 *
 * Two users, three phases (docs/protocol.md "Sealing and proofs", docs/security.md):
 * 1. Unpaired both ways: agent_task_send first asks the worker's endpoint to prove its key (a
 *    content-free hello). The proven key is one the origin has not paired with, so nothing of the
 *    task leaves: the tool answers UNKNOWN_PEER naming the worker's fingerprint, the task fails
 *    locally (no effect), and the worker sees, archives and counts nothing (a hello is not mail).
 * 2. The origin pairs the worker (`pi-tasks peers add`), the worker still does not trust the
 *    origin: the sealed assignment leaves and the worker's pi-tasks refuses it before its model
 *    sees it (archived, counted in its footer, a signed `task.refused` back). The origin trusts
 *    the refusing key, so the refusal is verified: its model is woken with it and the task fails.
 * 3. The worker's person types `/tasks pair origin KEY` in its Pi: the third task completes end to
 *    end, each side naming the other by the name it paired it under.
 *
 * One user: both Pis on one home delegate with no setup at all.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { REJECTED_RECORD } from "../../extensions/pi-tasks/presenter.ts";
import {
  stopEach,
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
  quotedText,
  scenario,
  statusTexts,
  stopAll,
  tempDir,
  toolCalls,
  sendThenAckBrain,
} from "../helpers/pi-kit.ts";
import { runToExit } from "../helpers/run-to-exit.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { type Brain, type PiProcess, type PiProcessOptions, type RpcRecord, startPi } from "../helpers/pi-process.ts";
import { BUN, CLI_ENTRY, REPO_ROOT, startRelayProcess, type RelayProcess } from "../../testkit/relay-process.ts";

// Both scenarios start in beforeAll and run concurrently against one relay (about 10 s together);
// the first test of a scenario waits for all of it, and a broken trust gate makes the soft waits
// of phases 1 and 2 run out first.
setDefaultTimeout(60_000);

let relay: RelayProcess;
const spawned: PiProcess[] = [];
const homes: { path: string; remove(): void }[] = [];

function pi(options: Omit<PiProcessOptions, "relayUrl">): PiProcess {
  const started = startPi({ relayUrl: relay.url, ...options });
  spawned.push(started);
  return started;
}

function newHome(prefix: string): string {
  const created = tempDir(prefix);
  homes.push(created);
  return created.path;
}

/** `pi-tasks ARGS --json` through the real command line as the user of `home`: its one JSON line. */
async function piTasks(home: string, args: readonly string[]): Promise<any> {
  const env: Record<string, string | undefined> = { ...process.env, PI_TASKS_HOME: home };
  delete env.PI_TASKS_RELAY_URL;
  delete env.WOLFPACK_SESSION_NAME;
  const run = await runToExit([BUN, CLI_ENTRY, ...args, "--json"], { cwd: REPO_ROOT, env, timeoutMs: 10_000 });
  const lines = run.stdout.split("\n").filter((line) => line.trim().length > 0);
  if (run.code !== 0 || lines.length !== 1) throw new Error(`pi-tasks ${args.join(" ")} exited ${run.code}: ${run.stdout} ${run.stderr}`);
  return JSON.parse(lines[0]!);
}

async function stopped<P extends Record<string, PiProcess>>(processes: P) {
  return { processes, stopped: await stopEach(processes) };
}

/** Waits like `waitFor` but answers whether it happened (an assertion then says what is missing). */
async function happened(pi: PiProcess, predicate: (record: RpcRecord) => boolean, timeoutMs: number, from = 0): Promise<boolean> {
  return await pi.waitFor(predicate, timeoutMs, from).then(
    () => true,
    () => false,
  );
}

const FIRST_TASK = "Trust phase one: write a short note.";
const SECOND_TASK = "Trust phase two: write a short note.";
const THIRD_TASK = "Trust phase three: write a short note.";
const FIRST_PROMPT = "Send the first task to the worker.";
const SECOND_PROMPT = "The operator paired the worker's key. Send the second task to the worker.";
const THIRD_PROMPT = "The worker's person paired this identity too. Send the third task to the worker.";
const REFUSED = "## task refused by the worker";
/** The worker's footer once it refused the second assignment (and after it finished the third task). */
const WORKER_IDLE = "tasks: trust-worker · idle · 1 rejected";

const isEventMessage = (title: string) => (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith(title);
const isRejectedEntry = (record: RpcRecord) =>
  record.type === "entry_appended" && (record.entry as { customType?: unknown }).customType === REJECTED_RECORD;
const isToolEnd = (name: string) => (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === name;
const isSettled = (record: RpcRecord) => record.type === "agent_settled";
const isParentAcked = (record: RpcRecord) =>
  record.type === "entry_appended" && JSON.stringify(record).includes("task.parent_acknowledged");
const isStatus = (text: string) => (record: RpcRecord) =>
  record.type === "extension_ui_request" && record.method === "setStatus" && record.statusText === text;

/** A worker that completes any assignment it sees. */
function workerBrain(summary: string): Brain {
  return (turn) => {
    const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
    if (taskId === undefined) return { text: "nothing assigned" };
    if (!called(turn, "agent_task_done"))
      return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary } }] };
    return { text: "finished" };
  };
}

/** The origin: one task per phase prompt; it tells its operator about a failure or a refusal, and acknowledges the completion. */
function originBrain(to: unknown): Brain {
  return (turn) => {
    if (lastSeen(turn, THIRD_PROMPT) !== undefined) {
      if (!called(turn, "agent_task_send", "phase three"))
        return { tools: [{ name: "agent_task_send", arguments: { to, task: THIRD_TASK } }] };
      const completed = lastSeen(turn, "## task completed");
      if (completed !== undefined && !called(turn, "agent_task_ack"))
        return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
      return { text: "ok" };
    }
    if (lastSeen(turn, SECOND_PROMPT) !== undefined) {
      if (!called(turn, "agent_task_send", "phase two"))
        return { tools: [{ name: "agent_task_send", arguments: { to, task: SECOND_TASK } }] };
      if (lastSeen(turn, REFUSED) === undefined) return { text: "sent" };
      return { text: "The worker refused the task: it has not paired with us. Telling my operator." };
    }
    if (!called(turn, "agent_task_send", "phase one")) return { tools: [{ name: "agent_task_send", arguments: { to, task: FIRST_TASK } }] };
    return { text: "The worker's key is not paired, nothing was sent. Telling my operator." };
  };
}

/** The message a process's model saw in a turn: every turn text containing `marker`. */
function seenByModel(pi: PiProcess, marker: string): string[] {
  return pi.turns.flatMap((turn) => turn.messages.filter((message) => message.text.includes(marker)).map((message) => message.text));
}

/** The next notify's lines from record `from` on. */
async function nextNotify(pi: PiProcess, from: number): Promise<string[]> {
  const record = await pi.waitFor((item) => item.type === "extension_ui_request" && item.method === "notify", 10_000, from);
  return String(record.message).split("\n");
}

/** `/tasks` and `/tasks <id>` at `pi`: the board's lines and the task's detail lines. */
async function boardAndDetail(pi: PiProcess, taskId: string): Promise<{ board: string[]; detail: string[] }> {
  const boardFrom = pi.records.length;
  pi.prompt("/tasks");
  const board = await nextBoard(pi, boardFrom);
  const detailFrom = pi.records.length;
  pi.prompt(`/tasks ${taskId.slice(0, 8)}`);
  return { board, detail: await nextNotify(pi, detailFrom) };
}

/** What the worker's side shows from record `from` on: what a test of "nothing reached it" checks. */
function workerSince(worker: PiProcess, from: number) {
  const records = worker.records.slice(from);
  return {
    runsStarted: records.filter((record) => record.type === "agent_start").length,
    events: records.filter((record) => isCustom(record, EVENT_MESSAGE)).length,
    rejected: records.filter(isRejectedEntry).map((record) => (record.entry as { data?: unknown }).data as Record<string, unknown>),
  };
}

// -----------------------------------------------------------------------------------------------
// Scenarios
// -----------------------------------------------------------------------------------------------

/** Two users: unpaired, nothing leaves; the origin paired, the worker refuses; both paired, it completes. */
async function twoUsers() {
  const homeA = newHome("pi-tasks-home-origin-");
  const homeB = newHome("pi-tasks-home-worker-");
  const [identityA, identityB] = await Promise.all([piTasks(homeA, ["identity"]), piTasks(homeB, ["identity"])]);

  const worker = pi({ session: "trust-worker", worker: true, home: homeB, brain: workerBrain("wrote the note") });
  const to = await waitForEndpoint(relay.url, "trust-worker");
  const origin = pi({ session: "trust-origin", home: homeA, brain: originBrain(to) });

  // Phase 1: unpaired both ways. Waits are soft so that a gate that (wrongly) let the task out fails
  // the assertions below instead of a timeout here.
  const start1 = { origin: origin.records.length, worker: worker.records.length };
  origin.prompt(FIRST_PROMPT);
  await happened(origin, isToolEnd("agent_task_send"), 10_000, start1.origin);
  await happened(origin, isSettled, 10_000, start1.origin);
  // Longer than an active poll: a late presentation, a hello counted as mail or a task leaving would show.
  await Bun.sleep(1_500);
  await happened(
    origin,
    isSettled,
    10_000,
    origin.records.findLastIndex((record) => record.type === "agent_start"),
  );
  const firstTaskId = String(
    (toolCalls(origin, "agent_task_send")[0]?.details.error as { details?: { taskId?: unknown } } | undefined)?.details?.taskId,
  );
  const phase1 = {
    sends: toolCalls(origin, "agent_task_send"),
    originEvents: eventMessages(origin),
    worker: workerSince(worker, start1.worker),
    workerTurns: worker.turns.length,
    workerArchived: archiveRecords(worker),
    workerStatus: statusTexts(worker),
    ...(await boardAndDetail(origin, firstTaskId)),
  };

  // Phase 2: the origin's person pairs the worker with the shell's CLI; the worker still does not
  // trust the origin. Both Pis keep running.
  const pairedAtA = await piTasks(homeA, ["peers", "add", "worker", identityB.publicKey, "--yes"]);
  const start2 = { origin: origin.records.length, worker: worker.records.length };
  origin.prompt(SECOND_PROMPT);
  const refusalArrived = await happened(origin, isEventMessage(REFUSED), 10_000, start2.origin);
  await happened(origin, isSettled, 10_000, Math.max(origin.records.findIndex(isEventMessage(REFUSED)), start2.origin));
  await happened(worker, isRejectedEntry, 15_000, start2.worker);
  await happened(worker, isStatus(WORKER_IDLE), 15_000, start2.worker);
  // Longer than an active poll: a redelivery, a second refusal or a late presentation would show.
  await Bun.sleep(1_200);
  const secondTaskId = String(toolCalls(origin, "agent_task_send")[1]?.details.taskId);
  const phase2 = {
    refusalArrived,
    sends: toolCalls(origin, "agent_task_send").slice(1),
    originEvents: eventMessages(origin).slice(phase1.originEvents.length),
    refusedMessages: origin.customMessages(EVENT_MESSAGE).filter((message) => String(message.content).startsWith(REFUSED)),
    originSeen: seenByModel(origin, REFUSED),
    worker: workerSince(worker, start2.worker),
    workerStatus: statusTexts(worker),
    ...(await boardAndDetail(origin, secondTaskId)),
  };

  // Phase 3: the worker's person pairs the origin with the slash command typed into its Pi (no
  // restart); the CLI then finds the same pair already made.
  const typedFrom = worker.records.length;
  worker.prompt(`/tasks pair origin ${identityA.publicKey}`);
  const pairedInPi = String(
    (
      await worker.waitFor(
        (item) => item.type === "extension_ui_request" && item.method === "notify" && String(item.message).startsWith("pi-tasks: paired"),
        10_000,
        typedFrom,
      )
    ).message,
  );
  const pairedAtB = await piTasks(homeB, ["peers", "add", "origin", identityA.publicKey, "--yes"]);
  const [peersOfA, peersOfB] = await Promise.all([piTasks(homeA, ["peers", "list"]), piTasks(homeB, ["peers", "list"])]);
  const from = { origin: origin.records.length, worker: worker.records.length };
  origin.prompt(THIRD_PROMPT);
  await origin.waitFor(isToolEnd("agent_task_ack"), 20_000, from.origin);
  await worker.waitFor(isParentAcked, 15_000, from.worker);
  // The worker's footer catches up with its finished task at its next pass (up to an active poll later).
  await happened(worker, isStatus(WORKER_IDLE), 15_000, worker.records.findIndex(isParentAcked));
  await Bun.sleep(500);
  const entries = { origin: await origin.entries(), worker: await worker.entries() };
  const done = await stopped({ origin, worker });
  return {
    identityA,
    identityB,
    pairedInPi,
    pairedAtA,
    pairedAtB,
    peersOfA,
    peersOfB,
    origin,
    worker,
    firstTaskId,
    secondTaskId,
    phase1,
    phase2,
    from,
    entries,
    ...done,
  };
}

/** One user: both Pis on the same explicit home delegate with no setup at all. */
async function oneUser() {
  const home = newHome("pi-tasks-home-one-user-");
  const worker = pi({ session: "same-worker", worker: true, home, brain: workerBrain("done on my side") });
  const to = await waitForEndpoint(relay.url, "same-worker");
  const origin = pi({
    session: "same-origin",
    home,
    brain: sendThenAckBrain(to, "Same user: write a short note."),
  });
  origin.prompt("Delegate a note to the worker.");
  await origin.waitFor(isToolEnd("agent_task_ack"), 20_000);
  await worker.waitFor(isParentAcked, 15_000);
  const peersFile = existsSync(join(home, "peers.json"));
  const done = await stopped({ origin, worker });
  // Asked after the fact: the Pis created the identity themselves, nobody ran a setup command.
  const identity = await piTasks(home, ["identity"]);
  return { home, origin, worker, peersFile, identity, ...done };
}

let two: ReturnType<typeof twoUsers>;
let one: ReturnType<typeof oneUser>;

beforeAll(async () => {
  relay = await startRelayProcess();
  two = scenario(twoUsers);
  one = scenario(oneUser);
});

afterAll(async () => {
  await stopAll(spawned);
  await relay?.stop();
  for (const created of homes) created.remove();
});

// -----------------------------------------------------------------------------------------------
// Tests
// -----------------------------------------------------------------------------------------------

describe("two Pis with different PI_TASKS_HOME: unpaired, nothing of the task leaves; the origin paired, the worker refuses it; both paired, it completes end to end", () => {
  test("`pi-tasks identity --json` gives each home its own new identity", async () => {
    const { identityA, identityB } = await two;
    for (const identity of [identityA, identityB]) {
      expect(identity.ok).toBe(true);
      expect(identity.created).toBe(true);
      expect(identity.publicKey).toMatch(/^ed25519:[A-Za-z0-9_-]{43}$/);
      expect(identity.fingerprint).toMatch(/^[0-9a-f]{4}(:[0-9a-f]{4}){3}$/);
    }
    expect(identityA.publicKey).not.toBe(identityB.publicKey);
    expect(identityA.fingerprint).not.toBe(identityB.fingerprint);
  });

  test("unpaired: agent_task_send answers UNKNOWN_PEER naming the worker's fingerprint — nothing was sent, the task failed without effect", async () => {
    const { phase1, identityB, firstTaskId } = await two;
    expect(phase1.sends.map((call) => ({ task: call.args.task, isError: call.isError }))).toEqual([{ task: FIRST_TASK, isError: true }]);
    const [send] = phase1.sends;
    expect(send!.text.split("\n")[0]).toBe("## task error");
    expect(field(send!.text, "code")).toBe("UNKNOWN_PEER");
    expect(field(send!.text, "message")).toBe(
      `the worker at this endpoint is signed by key ${identityB.fingerprint}, which this identity has not paired with; nothing was sent to it`,
    );
    expect(field(send!.text, "retryable")).toBe("false");
    const error = send!.details.error as { code?: unknown; details?: unknown };
    expect(error.code).toBe("UNKNOWN_PEER");
    expect(error.details).toEqual({ taskId: firstTaskId, status: "failed", noEffect: true });
    expect(firstTaskId).toMatch(/^[0-9a-f-]{36}$/);
    // The model read the failure in the tool's answer: the same failure is not shown (nor does it
    // wake the model) a second time. (Had the tool answered `pending`, the event would tell it.)
    expect(phase1.originEvents).toEqual([]);
  });

  test("unpaired: the worker's model never sees anything, and the worker archives and counts nothing (a hello is not mail)", async () => {
    const { phase1, worker } = await two;
    expect(phase1.worker).toEqual({ runsStarted: 0, events: 0, rejected: [] });
    expect(phase1.workerTurns).toBe(0);
    expect(phase1.workerArchived).toEqual([]);
    expect(phase1.workerStatus.filter((text) => text?.includes("rejected"))).toEqual([]);
    expect(phase1.workerStatus.at(-1)).toBe("tasks: trust-worker · idle");
    // Not even later: the first task's text never reached the worker.
    expect(seenByModel(worker, FIRST_TASK)).toEqual([]);
    expect(eventMessages(worker).filter((message) => message.content.includes(FIRST_TASK))).toEqual([]);
  });

  test("unpaired: the origin's /tasks lists the task to trust-worker as failed, created and failed locally", async () => {
    const { phase1, firstTaskId, identityA } = await two;
    const { board, detail } = phase1;
    expect(board[0]).toBe("pi-tasks");
    expect(board[2]).toBe(`identity: ${identityA.fingerprint} · /tasks identity shows how to pair`);
    expect(board).toContain("1 task · 0 active");
    const line = board.find((candidate) => candidate.startsWith(`  ${firstTaskId.slice(0, 8)}`));
    expect(line).toBeDefined();
    // No worker key is bound to it: the worker never sent task mail (its hello is not).
    expect(line).toContain("  to `trust-worker` (unverified claim) [no key yet] — failed — review and acknowledge — ");
    expect(line).toContain(`"${FIRST_TASK}"`);
    expect(detail[0]).toBe(`task ${firstTaskId}`);
    expect(detail.some((text) => text.startsWith("  status failed;"))).toBe(true);
    expect(
      detail.filter((text) => /ago {2}task\.\w+/.test(text)).map((text) => text.replace(/^.* ago {2}/, "").replace(/ — .*$/, "")),
    ).toEqual(["task.created", "task.failed"]);
  });

  test("the origin's person pairs the worker with `pi-tasks peers add` while its Pi runs", async () => {
    const { pairedAtA, identityB } = await two;
    expect({
      ok: pairedAtA.ok,
      changed: pairedAtA.changed,
      name: pairedAtA.peer.name,
      key: pairedAtA.peer.key,
      fingerprint: pairedAtA.peer.fingerprint,
    }).toEqual({
      ok: true,
      changed: true,
      name: "worker",
      key: identityB.publicKey,
      fingerprint: identityB.fingerprint,
    });
  });

  test("the worker does not trust the origin: the second assignment leaves, and the worker refuses it before its model sees it — one pi-tasks-rejected entry (UNKNOWN_PEER, naming the origin's key and claimed name), footer `1 rejected`", async () => {
    const { phase2, identityA, secondTaskId } = await two;
    expect(
      phase2.sends.map((call) => ({
        task: call.args.task,
        isError: call.isError,
        delivery: call.details.delivery,
        taskId: call.details.taskId,
      })),
    ).toEqual([{ task: SECOND_TASK, isError: false, delivery: "accepted", taskId: secondTaskId }]);
    expect(phase2.sends[0]!.text).toContain("- delivery: relay acceptance only");
    expect(phase2.worker.runsStarted).toBe(0);
    expect(phase2.worker.events).toBe(0);
    expect(phase2.worker.rejected).toHaveLength(1);
    const [rejected] = phase2.worker.rejected;
    expect(rejected!.code).toBe("UNKNOWN_PEER");
    const details = rejected!.details as Record<string, unknown>;
    expect({ key: details.key, fingerprint: details.fingerprint, claimedName: details.claimedName }).toEqual({
      key: identityA.publicKey,
      fingerprint: identityA.fingerprint,
      claimedName: "trust-origin",
    });
    expect(phase2.workerStatus.at(-1)).toBe(WORKER_IDLE);
  });

  test("the origin's model is woken with `## task refused by the worker`, verified: the frame names the paired peer, reason UNKNOWN_PEER, the task failed, pairing left to the operator", async () => {
    const { phase2, identityB, secondTaskId } = await two;
    expect(phase2.refusalArrived).toBe(true);
    // The refusal is the one message: the failure it caused is not a second one.
    expect(phase2.originEvents.map((event) => ({ taskId: event.taskId, type: event.type }))).toEqual([
      { taskId: secondTaskId, type: "task.refused" },
    ]);
    const content = phase2.originEvents[0]!.content;
    expect(content.split("\n")[0]).toBe(REFUSED);
    expect(content.split("\n")[1]).toBe(`> Peer mail from paired peer "worker" (key ${identityB.fingerprint}), signature verified.`);
    expect(field(content, "taskId")).toBe(secondTaskId);
    expect(field(content, "status")).toBe("failed");
    expect(field(content, "reason")).toBe("UNKNOWN_PEER");
    expect(field(content, "refusedBy")).toBe(`key ${identityB.fingerprint}, claiming the name \`trust-worker\` (unverified claim)`);
    expect(field(content, "refusedByKey")).toBe(identityB.publicKey);
    expect(content).toContain(
      "The worker's pi-tasks (a key you trust) refused this assignment before its model saw it: it does not trust your identity. Nothing ran; the task failed.",
    );
    expect(content).not.toContain("agent_task_cancel");
    expect(content).toContain("Pairing is their decision, never yours");
    expect(content).toContain("`/tasks pair NAME KEY`");
    // The model read it in a turn: it was woken by it, nobody prompted it.
    expect(phase2.originSeen.length).toBeGreaterThan(0);
    expect(phase2.originSeen.every((text) => text.includes("- reason: UNKNOWN_PEER") && text.includes(identityB.fingerprint))).toBe(true);
  });

  test("the origin's human sees it — the refusal is a displayed message, and /tasks lists the task to the paired worker as failed, refused (UNKNOWN_PEER), with its task.refused and task.failed events", async () => {
    const { phase2, secondTaskId, firstTaskId } = await two;
    expect(phase2.refusedMessages.map((message) => message.display)).toEqual([true]);
    const { board, detail } = phase2;
    expect(board).toContain("2 tasks · 0 active");
    const line = board.find((candidate) => candidate.startsWith(`  ${secondTaskId.slice(0, 8)}`));
    expect(line).toBeDefined();
    expect(line).toContain("  to `trust-worker` (unverified claim) [worker ✓] — failed");
    expect(line).toContain(`"${SECOND_TASK}"`);
    expect(board.some((candidate) => candidate.startsWith(`  ${firstTaskId.slice(0, 8)}`))).toBe(true);
    expect(detail[0]).toBe(`task ${secondTaskId}`);
    expect(detail.some((text) => text.startsWith("  status failed;"))).toBe(true);
    expect(detail).toContain(`  worker signer: paired peer "worker" (key ${(await two).identityB.fingerprint}), signature verified`);
    expect(
      detail.filter((text) => /ago {2}task\.\w+/.test(text)).map((text) => text.replace(/^.* ago {2}/, "").replace(/ — .*$/, "")),
    ).toEqual(["task.created", "task.refused", "task.failed"]);
    // The failure the verified refusal caused (ASSIGNMENT_REFUSED, no effect) says why in its summary.
    expect(detail.find((text) => / ago {2}task\.failed/.test(text))).toContain(
      `task.failed — "The worker refused the assignment (UNKNOWN_PEER`,
    );
  });

  test("`/tasks pair` typed in the worker's Pi pairs the origin's key (no Pi restart); `pi-tasks peers add` then finds it made", async () => {
    const { pairedInPi, pairedAtB, peersOfA, peersOfB, identityA, identityB } = await two;
    expect(pairedInPi).toBe(`pi-tasks: paired origin (fingerprint ${identityA.fingerprint}); its mail is trusted from now on.`);
    expect({
      ok: pairedAtB.ok,
      changed: pairedAtB.changed,
      name: pairedAtB.peer.name,
      key: pairedAtB.peer.key,
      fingerprint: pairedAtB.peer.fingerprint,
    }).toEqual({
      ok: true,
      changed: false,
      name: "origin",
      key: identityA.publicKey,
      fingerprint: identityA.fingerprint,
    });
    expect(peersOfA.peers.map((peer: { name: string; key: string }) => [peer.name, peer.key])).toEqual([["worker", identityB.publicKey]]);
    expect(peersOfB.peers.map((peer: { name: string; key: string }) => [peer.name, peer.key])).toEqual([["origin", identityA.publicKey]]);
  });

  test("paired both ways: the third task completes end to end — the worker works on it and calls agent_task_done, the origin's model is woken with the completion and acknowledges it", async () => {
    const { origin, worker, from, firstTaskId, secondTaskId } = await two;
    const sends = toolCalls(origin, "agent_task_send");
    expect(sends.map((call) => call.isError)).toEqual([true, false, false]);
    const thirdTaskId = String(sends[2]!.details.taskId);
    expect(new Set([firstTaskId, secondTaskId, thirdTaskId]).size).toBe(3);
    expect(sends[2]!.details.delivery).toBe("accepted");
    // The worker's model got the third task and only it.
    expect(eventMessages(worker).map((event) => ({ taskId: event.taskId, type: event.type }))).toEqual([
      { taskId: thirdTaskId, type: "task.created" },
    ]);
    expect(quotedText(eventMessages(worker)[0]!.content)).toBe(THIRD_TASK);
    const done = toolCalls(worker, "agent_task_done");
    expect(done.map((call) => ({ taskId: call.args.taskId, status: call.args.status, isError: call.isError }))).toEqual([
      { taskId: thirdTaskId, status: "completed", isError: false },
    ]);
    // The origin's model was woken with the completion and acknowledged it.
    const completed = eventMessages(origin).filter((event) => event.type === "task.completed");
    expect(completed.map((event) => event.taskId)).toEqual([thirdTaskId]);
    expect(quotedText(completed[0]!.content)).toBe("wrote the note");
    expect(seenByModel(origin, "## task completed").some((text) => text.includes(thirdTaskId))).toBe(true);
    const acks = toolCalls(origin, "agent_task_ack");
    expect(acks.map((call) => ({ taskId: call.args.taskId, isError: call.isError }))).toEqual([{ taskId: thirdTaskId, isError: false }]);
    expect(acks[0]!.index).toBeGreaterThan(from.origin);
    // No new rejection once paired.
    expect(worker.appendedEntries(REJECTED_RECORD)).toHaveLength(1);
    expect(statusTexts(worker).at(-1)).toBe(WORKER_IDLE);
  });

  test("paired both ways: each side's rendered events open with the peer frame naming the paired peer name and its fingerprint", async () => {
    const { origin, worker, identityA, identityB } = await two;
    const assignment = eventMessages(worker).find((event) => event.type === "task.created")!;
    expect(assignment.content.split("\n").slice(0, 2)).toEqual([
      "## task assignment",
      `> Peer mail from paired peer "origin" (key ${identityA.fingerprint}), signature verified.`,
    ]);
    expect(field(assignment.content, "from")).toEndWith(', signed by paired peer "origin"');
    const completed = eventMessages(origin).find((event) => event.type === "task.completed")!;
    expect(completed.content.split("\n").slice(0, 2)).toEqual([
      "## task completed",
      `> Peer mail from paired peer "worker" (key ${identityB.fingerprint}), signature verified.`,
    ]);
  });

  test("each event appears once at each side, and both Pis stop cleanly", async () => {
    const { processes, stopped, entries } = await two;
    await expectEachEventOnce(processes.origin, "origin", entries.origin);
    await expectEachEventOnce(processes.worker, "worker", entries.worker);
    expectCleanStops(processes, stopped);
  });
});

describe("two Pis sharing one PI_TASKS_HOME: everything works as before, with no setup", () => {
  test("the completion reaches the origin, framed as mail from a session of your own identity, and no peers.json was needed", async () => {
    const { origin, worker, identity, peersFile } = await one;
    // The Pis made the identity; `pi-tasks identity` afterwards finds it rather than creating one.
    expect(identity.created).toBe(false);
    const completed = eventMessages(origin).filter((event) => event.type === "task.completed");
    expect(completed).toHaveLength(1);
    expect(quotedText(completed[0]!.content)).toBe("done on my side");
    expect(completed[0]!.content.split("\n")[1]).toBe(
      `> Peer mail from a session of your own identity (key ${identity.fingerprint}), signature verified.`,
    );
    const assignment = eventMessages(worker).filter((event) => event.type === "task.created");
    expect(assignment).toHaveLength(1);
    expect(assignment[0]!.content.split("\n")[1]).toBe(
      `> Peer mail from a session of your own identity (key ${identity.fingerprint}), signature verified.`,
    );
    expect(toolCalls(origin, "agent_task_ack").map((call) => ({ taskId: call.args.taskId, isError: call.isError }))).toEqual([
      { taskId: completed[0]!.taskId, isError: false },
    ]);
    expect(peersFile).toBe(false);
    // Nothing was refused on either side.
    expect([...worker.appendedEntries(REJECTED_RECORD), ...origin.appendedEntries(REJECTED_RECORD)]).toEqual([]);
    expect([...statusTexts(worker), ...statusTexts(origin)].filter((text) => text?.includes("rejected"))).toEqual([]);
  });

  test("both Pis stop cleanly", async () => {
    const { processes, stopped } = await one;
    expectCleanStops(processes, stopped);
  });
});
