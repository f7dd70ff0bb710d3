/**
 * End to end: signed mail between two real Pi 1.6 CLIs (`--mode rpc`) on a real relay, each with
 * its own `PI_TASKS_HOME` (two users) or both on one home (one user). Identities and pairing go
 * through the real `pi-tasks identity` / `pi-tasks peers add` command line, as a person does it.
 *
 * Unpaired, the worker's pi-tasks refuses the assignment before its model sees it (RPC has no
 * pairing dialog), archives the rejection, counts it in its footer and tells the origin why: the
 * origin's model and human read the reason. An unpaired key's refusal is unverified (a relay could
 * forge one), so the task stays active until the operator accepts the refusal and the model cancels
 * it. After `peers add` on both sides — with both Pis still running — a second task completes end
 * to end, each side naming the other by the name it paired it under.
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
  scenario,
  statusTexts,
  stopAll,
  tempDir,
  toolCalls,
  sendThenAckBrain,
} from "../helpers/pi-kit.ts";
import { runToExit } from "../helpers/run-to-exit.ts";
import { waitForEndpoint } from "../../kit/session-control.ts";
import { type Brain, type PiProcess, type PiProcessOptions, type RpcRecord, startPi } from "../helpers/pi-process.ts";
import { BUN, CLI_ENTRY, REPO_ROOT, startRelayProcess, type RelayProcess } from "../../kit/relay-process.ts";

// Both scenarios start in beforeAll and run concurrently against one relay (about 5 s together);
// the first test of a scenario waits for all of it, and a broken trust gate makes the soft waits
// of phase 1 run out first.
setDefaultTimeout(45_000);

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
const SECOND_PROMPT = "The operator paired both sides. Send the second task to the worker.";
const REFUSED = "## task refused by the worker";
const CANCEL_PROMPT = "The operator accepts the refusal. Cancel the first task.";
/** The worker's footer after the refused assignment and the cancel of it (two rejected envelopes). */
const WORKER_IDLE = "tasks: trust-worker · idle · 2 rejected";

const isEventMessage = (title: string) => (record: RpcRecord) => isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith(title);
const isRejectedEntry = (record: RpcRecord) => record.type === "entry_appended" && (record.entry as { customType?: unknown }).customType === REJECTED_RECORD;
const isAckEnd = (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack";
const isParentAcked = (record: RpcRecord) => record.type === "entry_appended" && JSON.stringify(record).includes("task.parent_acknowledged");

/** A worker that completes any assignment it sees. */
function workerBrain(summary: string): Brain {
  return (turn) => {
    const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
    if (taskId === undefined) return { text: "nothing assigned" };
    if (!called(turn, "agent_task_done")) return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary } }] };
    return { text: "finished" };
  };
}

/** The message a process's model saw in a turn: every turn text containing `marker`. */
function seenByModel(pi: PiProcess, marker: string): string[] {
  return pi.turns.flatMap((turn) => turn.messages.filter((message) => message.text.includes(marker)).map((message) => message.text));
}

// -----------------------------------------------------------------------------------------------
// Scenarios
// -----------------------------------------------------------------------------------------------

/** Two users: unpaired, the assignment is refused; paired through the CLI, the next one completes. */
async function twoUsers() {
  const homeA = newHome("pi-tasks-home-origin-");
  const homeB = newHome("pi-tasks-home-worker-");
  const [identityA, identityB] = await Promise.all([piTasks(homeA, ["identity"]), piTasks(homeB, ["identity"])]);

  const worker = pi({ session: "trust-worker", worker: true, home: homeB, brain: workerBrain("wrote the note") });
  const to = await waitForEndpoint(relay.url, "trust-worker");
  const origin = pi({
    session: "trust-origin",
    home: homeA,
    brain: (turn) => {
      if (lastSeen(turn, SECOND_PROMPT) === undefined) {
        if (!called(turn, "agent_task_send")) return { tools: [{ name: "agent_task_send", arguments: { to, task: FIRST_TASK } }] };
        const refused = lastSeen(turn, REFUSED);
        if (refused === undefined) return { text: "sent" };
        // The refusal is unverified: the model tells its operator and cancels only when told to.
        if (lastSeen(turn, CANCEL_PROMPT) !== undefined && !called(turn, "agent_task_cancel")) return { tools: [{ name: "agent_task_cancel", arguments: { taskId: field(refused, "taskId")! } }] };
        return { text: "The worker's side says it refused the task (UNKNOWN_PEER); telling my operator." };
      }
      if (!called(turn, "agent_task_send", "phase two")) return { tools: [{ name: "agent_task_send", arguments: { to, task: SECOND_TASK } }] };
      const completed = lastSeen(turn, "## task completed");
      if (completed !== undefined && !called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
      return { text: "ok" };
    },
  });

  // Phase 1: unpaired. Waits are soft so that a worker that (wrongly) trusted everyone fails the
  // assertions below instead of a timeout here.
  origin.prompt("Send the first task to the worker.");
  const refusalArrived = await happened(origin, isEventMessage(REFUSED), 8_000);
  const refusalAt = origin.records.findIndex(isEventMessage(REFUSED));
  await happened(origin, (record) => record.type === "agent_settled", 8_000, Math.max(refusalAt, 0));
  await happened(worker, isRejectedEntry, 3_000);
  await happened(worker, (record) => record.type === "extension_ui_request" && record.method === "setStatus" && String(record.statusText).includes("rejected"), 3_000);
  const boardFrom = origin.records.length;
  origin.prompt("/tasks");
  const board = await nextBoard(origin, boardFrom);
  const firstTaskId = String(toolCalls(origin, "agent_task_send")[0]?.details.taskId);
  const detailFrom = origin.records.length;
  origin.prompt(`/tasks ${firstTaskId.slice(0, 8)}`);
  const detail = await nextNotify(origin, detailFrom);
  // Longer than an active poll: a redelivery, a second refusal or a late presentation would show.
  await Bun.sleep(1_200);
  const phase1 = {
    refusalArrived,
    workerTurns: worker.turns.length,
    workerRunsStarted: worker.records.filter((record) => record.type === "agent_start").length,
    workerEvents: eventMessages(worker),
    workerArchived: archiveRecords(worker),
    rejected: worker.appendedEntries(REJECTED_RECORD).map((entry) => entry.data as Record<string, unknown>),
    workerStatus: statusTexts(worker),
    originEvents: eventMessages(origin),
    refusedMessages: origin.customMessages(EVENT_MESSAGE).filter((message) => String(message.content).startsWith(REFUSED)),
    originSeen: seenByModel(origin, REFUSED),
    sends: toolCalls(origin, "agent_task_send"),
    board,
    detail,
  };

  // The refusal was unverified, so the task stayed active. The operator accepts it: the model
  // cancels the task, and the board shows it cancelled.
  const cancelFrom = { origin: origin.records.length, worker: worker.records.length };
  let boardAfter: string[] = [];
  if (refusalArrived) {
    origin.prompt(CANCEL_PROMPT);
    await happened(origin, (record) => record.type === "tool_execution_end" && record.toolName === "agent_task_cancel", 8_000, cancelFrom.origin);
    await happened(origin, (record) => record.type === "agent_settled", 8_000, cancelFrom.origin);
    const boardFrom2 = origin.records.length;
    origin.prompt("/tasks");
    boardAfter = await nextBoard(origin, boardFrom2);
    // The cancel reaches the worker, which never took the task: let its rejection show.
    await happened(worker, isRejectedEntry, 3_000, cancelFrom.worker);
  }
  const cancel = {
    calls: toolCalls(origin, "agent_task_cancel"),
    board: boardAfter,
    workerStarted: worker.records.slice(cancelFrom.worker).filter((record) => record.type === "agent_start").length,
    workerRejected: worker.appendedEntries(REJECTED_RECORD).slice(phase1.rejected.length).map((entry) => entry.data as Record<string, unknown>),
  };

  // Phase 2: pair while both Pis keep running — the origin's side with the shell's CLI, the
  // worker's side with the slash command its person types into Pi.
  const typedFrom = worker.records.length;
  worker.prompt(`/tasks pair origin ${identityA.publicKey}`);
  const pairedInPi = String((await worker.waitFor((item) => item.type === "extension_ui_request" && item.method === "notify" && String(item.message).startsWith("pi-tasks: paired"), 10_000, typedFrom)).message);
  const [pairedAtA, pairedAtB] = await Promise.all([piTasks(homeA, ["peers", "add", "worker", identityB.publicKey, "--yes"]), piTasks(homeB, ["peers", "add", "origin", identityA.publicKey, "--yes"])]);
  const [peersOfA, peersOfB] = await Promise.all([piTasks(homeA, ["peers", "list"]), piTasks(homeB, ["peers", "list"])]);
  const from = { origin: origin.records.length, worker: worker.records.length };
  origin.prompt(SECOND_PROMPT);
  await origin.waitFor(isAckEnd, 20_000, from.origin);
  await worker.waitFor(isParentAcked, 15_000, from.worker);
  // The worker's footer catches up with its finished task at its next pass (up to an active poll later).
  await happened(worker, (record) => record.type === "extension_ui_request" && record.statusText === WORKER_IDLE, 3_000, worker.records.findIndex(isParentAcked));
  await Bun.sleep(500);
  const entries = { origin: await origin.entries(), worker: await worker.entries() };
  const done = await stopped({ origin, worker });
  return { identityA, identityB, pairedInPi, pairedAtA, pairedAtB, peersOfA, peersOfB, origin, worker, firstTaskId, phase1, cancel, from, entries, ...done };
}

/** The next notify's lines from record `from` on. */
async function nextNotify(pi: PiProcess, from: number): Promise<string[]> {
  const record = await pi.waitFor((item) => item.type === "extension_ui_request" && item.method === "notify", 10_000, from);
  return String(record.message).split("\n");
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
  await origin.waitFor(isAckEnd, 20_000);
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

describe("two Pis with different PI_TASKS_HOME, unpaired: the assignment is refused and the origin's model and human see why; after `pi-tasks peers add` on both sides it completes end to end", () => {
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

  test("unpaired: the worker's model never sees the task — no event message, no run started, nothing archived as a task event, not even after pairing", async () => {
    const { phase1, worker } = await two;
    expect(phase1.workerEvents).toEqual([]);
    expect(phase1.workerArchived).toEqual([]);
    expect(phase1.workerTurns).toBe(0);
    expect(phase1.workerRunsStarted).toBe(0);
    // The refused assignment is never resurrected once the origin is paired.
    expect(seenByModel(worker, FIRST_TASK)).toEqual([]);
    expect(eventMessages(worker).filter((message) => message.content.includes(FIRST_TASK))).toEqual([]);
  });

  test("unpaired: the worker archives one pi-tasks-rejected entry (UNKNOWN_PEER, naming the origin's key) and its footer says `1 rejected`", async () => {
    const { phase1, identityA } = await two;
    expect(phase1.rejected).toHaveLength(1);
    const [rejected] = phase1.rejected;
    expect(rejected!.code).toBe("UNKNOWN_PEER");
    const details = rejected!.details as Record<string, unknown>;
    expect({ key: details.key, fingerprint: details.fingerprint, claimedName: details.claimedName }).toEqual({
      key: identityA.publicKey,
      fingerprint: identityA.fingerprint,
      claimedName: "trust-origin",
    });
    expect(phase1.workerStatus.at(-1)).toBe("tasks: trust-worker · idle · 1 rejected");
  });

  test("unpaired: the origin's model is woken with `## task refused by the worker` — reason UNKNOWN_PEER, the worker's fingerprint and key, marked unverified, and pairing left to the operator", async () => {
    const { phase1, identityB, firstTaskId } = await two;
    expect(phase1.refusalArrived).toBe(true);
    expect(phase1.sends.map((call) => call.isError)).toEqual([false]);
    expect(phase1.originEvents.map((event) => ({ taskId: event.taskId, type: event.type }))).toEqual([{ taskId: firstTaskId, type: "task.refused" }]);
    const content = phase1.originEvents[0]!.content;
    expect(content.split("\n")[0]).toBe(REFUSED);
    expect(field(content, "taskId")).toBe(firstTaskId);
    expect(field(content, "reason")).toBe("UNKNOWN_PEER");
    expect(field(content, "refusedBy")).toBe(`key ${identityB.fingerprint} (claims to be "trust-worker", unverified)`);
    expect(field(content, "refusedByKey")).toBe(identityB.publicKey);
    // The frame names the refusal's own signer, an unpaired key with its claim marked unverified.
    expect(content.split("\n")[1]).toBe(`> Peer mail from an unpaired key ${identityB.fingerprint} claiming to be "trust-worker" (unverified claim).`);
    // An unpaired key's refusal could be forged by the relay: the task stays active until the
    // origin's side decides (docs/security.md).
    expect(field(content, "status")).toBe("active (refusal unverified)");
    expect(content).toContain(`cancel it with agent_task_cancel (taskId ${firstTaskId}) if you accept the refusal`);
    expect(content).toContain("Pairing is their decision, never yours");
    expect(content).toContain("`/tasks pair NAME KEY`");
    // The model read it in a turn: it was woken by it, nobody prompted it.
    expect(phase1.originSeen.length).toBeGreaterThan(0);
    expect(phase1.originSeen.every((text) => text.includes("- reason: UNKNOWN_PEER") && text.includes(identityB.fingerprint))).toBe(true);
  });

  test("unpaired: the origin's human sees it — the refusal is a displayed message, and /tasks lists the task to trust-worker with its task.refused event", async () => {
    const { phase1, firstTaskId, identityA } = await two;
    expect(phase1.refusedMessages.map((message) => message.display)).toEqual([true]);
    const { board, detail } = phase1;
    expect(board[0]).toBe("pi-tasks");
    expect(board[2]).toBe(`identity: ${identityA.fingerprint} · /tasks identity shows how to pair`);
    expect(board).toContain("1 task · 1 active");
    const line = board.find((candidate) => candidate.startsWith(`  ${firstTaskId.slice(0, 8)}`));
    expect(line).toBeDefined();
    expect(line).toContain("  to trust-worker ");
    expect(line).toContain("refused by the worker (unverified: it does not trust your identity) — pair, or cancel");
    expect(line).toContain(`"${FIRST_TASK}"`);
    expect(detail[0]).toBe(`task ${firstTaskId}`);
    expect(detail.some((text) => text.startsWith("  status active;"))).toBe(true);
    expect(detail.filter((text) => /ago {2}task\.\w+/.test(text)).map((text) => text.replace(/^.* ago {2}/, ""))).toEqual(["task.created", "task.refused"]);
  });

  test("unpaired: when the operator accepts the refusal the model cancels the task and /tasks shows it cancelled; the worker's model still never sees it", async () => {
    const { cancel, firstTaskId } = await two;
    expect(cancel.calls.map((call) => ({ taskId: call.args.taskId, isError: call.isError }))).toEqual([{ taskId: firstTaskId, isError: false }]);
    expect(cancel.board).toContain("1 task · 0 active");
    const line = cancel.board.find((candidate) => candidate.startsWith(`  ${firstTaskId.slice(0, 8)}`));
    expect(line).toContain("  to trust-worker ");
    expect(line).toContain(" — cancelled — ");
    // The worker never took the task, so the cancel is rejected there too (a second rejected envelope).
    expect(cancel.workerStarted).toBe(0);
    expect(cancel.workerRejected.map((data) => ({ code: data.code, taskId: (data.details as Record<string, unknown>).taskId }))).toEqual([{ code: "UNKNOWN_TASK", taskId: firstTaskId }]);
  });

  test("`/tasks pair` in the worker's Pi and `pi-tasks peers add` at the origin pair each with the other's key (no Pi restart)", async () => {
    const { pairedInPi, pairedAtA, pairedAtB, peersOfA, peersOfB, identityA, identityB } = await two;
    expect(pairedInPi).toBe(`pi-tasks: paired origin (fingerprint ${identityA.fingerprint}); its mail is trusted from now on.`);
    // The CLI then finds the same pair already made (the slash command wrote the same peers.json).
    expect({ ok: pairedAtA.ok, changed: pairedAtA.changed, name: pairedAtA.peer.name, key: pairedAtA.peer.key, fingerprint: pairedAtA.peer.fingerprint }).toEqual({
      ok: true,
      changed: true,
      name: "worker",
      key: identityB.publicKey,
      fingerprint: identityB.fingerprint,
    });
    expect({ ok: pairedAtB.ok, changed: pairedAtB.changed, name: pairedAtB.peer.name, key: pairedAtB.peer.key, fingerprint: pairedAtB.peer.fingerprint }).toEqual({
      ok: true,
      changed: false,
      name: "origin",
      key: identityA.publicKey,
      fingerprint: identityA.fingerprint,
    });
    expect(peersOfA.peers.map((peer: { name: string; key: string }) => [peer.name, peer.key])).toEqual([["worker", identityB.publicKey]]);
    expect(peersOfB.peers.map((peer: { name: string; key: string }) => [peer.name, peer.key])).toEqual([["origin", identityA.publicKey]]);
  });

  test("paired: the second task completes end to end — the worker works on it and calls agent_task_done, the origin's model is woken with the completion and acknowledges it", async () => {
    const { origin, worker, from, firstTaskId } = await two;
    const sends = toolCalls(origin, "agent_task_send");
    expect(sends.map((call) => call.isError)).toEqual([false, false]);
    const secondTaskId = String(sends[1]!.details.taskId);
    expect(secondTaskId).not.toBe(firstTaskId);
    // The worker's model got the second task and only it.
    expect(eventMessages(worker).map((event) => ({ taskId: event.taskId, type: event.type }))).toEqual([{ taskId: secondTaskId, type: "task.created" }]);
    expect(eventMessages(worker)[0]!.content).toContain(SECOND_TASK);
    const done = toolCalls(worker, "agent_task_done");
    expect(done.map((call) => ({ taskId: call.args.taskId, status: call.args.status, isError: call.isError }))).toEqual([{ taskId: secondTaskId, status: "completed", isError: false }]);
    // The origin's model was woken with the completion and acknowledged it.
    const completed = eventMessages(origin).filter((event) => event.type === "task.completed");
    expect(completed.map((event) => event.taskId)).toEqual([secondTaskId]);
    expect(field(completed[0]!.content, "summary")).toBe("wrote the note");
    expect(seenByModel(origin, "## task completed").some((text) => text.includes(secondTaskId))).toBe(true);
    const acks = toolCalls(origin, "agent_task_ack");
    expect(acks.map((call) => ({ taskId: call.args.taskId, isError: call.isError }))).toEqual([{ taskId: secondTaskId, isError: false }]);
    expect(acks[0]!.index).toBeGreaterThan(from.origin);
    // No new rejection once paired.
    expect(worker.appendedEntries(REJECTED_RECORD)).toHaveLength(2);
    expect(statusTexts(worker).at(-1)).toBe(WORKER_IDLE);
  });

  test("paired: each side's rendered events open with the peer frame naming the paired peer name and its fingerprint", async () => {
    const { origin, worker, identityA, identityB } = await two;
    const assignment = eventMessages(worker).find((event) => event.type === "task.created")!;
    expect(assignment.content.split("\n").slice(0, 2)).toEqual(["## task assignment", `> Peer mail from paired peer "origin" (key ${identityA.fingerprint}), signature verified.`]);
    const completed = eventMessages(origin).find((event) => event.type === "task.completed")!;
    expect(completed.content.split("\n").slice(0, 2)).toEqual(["## task completed", `> Peer mail from paired peer "worker" (key ${identityB.fingerprint}), signature verified.`]);
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
    expect(field(completed[0]!.content, "summary")).toBe("done on my side");
    expect(completed[0]!.content.split("\n")[1]).toBe(`> Peer mail from a session of your own identity (key ${identity.fingerprint}), signature verified.`);
    const assignment = eventMessages(worker).filter((event) => event.type === "task.created");
    expect(assignment).toHaveLength(1);
    expect(assignment[0]!.content.split("\n")[1]).toBe(`> Peer mail from a session of your own identity (key ${identity.fingerprint}), signature verified.`);
    expect(toolCalls(origin, "agent_task_ack").map((call) => ({ taskId: call.args.taskId, isError: call.isError }))).toEqual([{ taskId: completed[0]!.taskId, isError: false }]);
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
