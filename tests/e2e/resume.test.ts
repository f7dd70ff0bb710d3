/**
 * Resume after a restart in the real Pi 1.6 CLI (`--mode rpc`), on each host, with
 * `PI_TASKS_RESUME=1`: the origin delegates two tasks; one worker asks a question; the origin's Pi
 * quits, and so does the other worker. A new origin Pi continues the same session (`--continue`):
 * it reads from its history which tasks it delegated and to whom, asks each worker, signed, whether
 * it still holds its task. The worker that does continues — the origin's model answers the question
 * it saw before the restart (not shown again), the worker completes, the origin acknowledges once —
 * and the task whose worker is gone is shown orphaned.
 *
 * The origin also spawned a worker in the same project folder: its session is kept apart (under the
 * pi-tasks home), so `--continue` there opens the person's session, not the worker's. A second
 * restart takes back only what was still open: the acknowledged task stays closed (a second
 * acknowledgement is refused) and the loss already reported is not reported again.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { eventually } from "../../testkit/async.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import {
  bannerWorkerBrain,
  callCount,
  called,
  EVENT_MESSAGE,
  field,
  isCustom,
  lastSeen,
  toolCalls,
  usePiFixture,
} from "../helpers/pi-kit.ts";
import { type PiProcess, type RpcRecord, type ScriptReply, type ScriptTurn, sharedTestHome } from "../helpers/pi-process.ts";

setDefaultTimeout(90_000);

const fx = usePiFixture();

const isAcked = (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack";
const titled = (pi: PiProcess, title: string) =>
  pi.customMessages(EVENT_MESSAGE).filter((message) => String(message.content).startsWith(title));
const shows = (title: string) => (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith(title);

/** The origin's model after the restart: answers the question it saw before, acknowledges the result. */
function resumedBrain(turn: ScriptTurn): ScriptReply {
  const question = lastSeen(turn, "## task question");
  if (question !== undefined && !called(turn, "agent_task_message")) {
    const answer = { taskId: field(question, "taskId")!, type: "answer", inReplyTo: field(question, "eventId")!, message: "blue" };
    return { tools: [{ name: "agent_task_message", arguments: answer }] };
  }
  const completed = lastSeen(turn, "## task completed");
  if (completed !== undefined && !called(turn, "agent_task_ack"))
    return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
  return { text: "carrying on" };
}

/** The session file a Pi writes (RPC `get_state`). */
async function sessionFile(pi: PiProcess): Promise<string | undefined> {
  const state = await pi.rpc({ type: "get_state" });
  return (state.data as { sessionFile?: string } | undefined)?.sessionFile;
}

/**
 * The origin's model after a second restart: acknowledges the task it acknowledged before (its
 * transcript shows it), once more; then cancels the task whose worker is lost, by its short id.
 */
function ackAgainBrain(acked: () => string, lost: () => string): (turn: ScriptTurn) => ScriptReply {
  return (turn) => {
    if (callCount(turn, "agent_task_ack") < 2) return { tools: [{ name: "agent_task_ack", arguments: { taskId: acked() } }] };
    if (!called(turn, "agent_task_cancel")) return { tools: [{ name: "agent_task_cancel", arguments: { taskId: lost().slice(0, 8) } }] };
    return { text: "done" };
  };
}

async function restart(host: PiHost) {
  const sessionDir = mkdtempSync(join(tmpdir(), "pi-tasks-sessions-"));
  const cwd = mkdtempSync(join(tmpdir(), "pi-tasks-project-"));
  fx.defer(() => rmSync(sessionDir, { recursive: true, force: true }));
  fx.defer(() => rmSync(cwd, { recursive: true, force: true }));
  const worker = fx.pi({ host, session: `resume-worker-${host}`, worker: true, brain: bannerWorkerBrain() });
  const paint = await waitForEndpoint(fx.relay.url, `resume-worker-${host}`);
  const env = { PI_TASKS_RESUME: "1", PI_TASKS_WORKER_SCRIPT: join(import.meta.dir, "scripts", "says-ok.ts") };
  const originOptions = { host, session: `resume-origin-${host}`, cwd, sessionDir, env };
  const spawned = `resume-spawned-${host}`;
  const before = fx.pi({
    ...originOptions,
    // The second worker is one it spawns (in the same folder); it stops when this Pi quits.
    brain: (turn) => {
      if (!called(turn, "agent_task_spawn")) return { tools: [{ name: "agent_task_spawn", arguments: { name: spawned } }] };
      const hold = field(lastSeen(turn, "## worker started"), "taskEndpoint");
      if (called(turn, "agent_task_send") || hold === undefined) return { text: "waiting for the workers" };
      return {
        tools: [
          { name: "agent_task_send", arguments: { to: paint, task: "Paint the banner." } },
          { name: "agent_task_send", arguments: { to: JSON.parse(hold), task: "Hold this for me." } },
        ],
      };
    },
  });
  before.prompt("Delegate both.");
  await before.waitFor(shows("## task question"), 30_000);
  // The spawned worker took its task in (its receipt reached the origin): it worked, in its own session.
  const spawnedSessions = join(sharedTestHome(), "sessions", spawned);
  await eventually(() => existsSync(spawnedSessions) && readdirSync(spawnedSessions).some((file) => file.endsWith(".jsonl")), 30_000, 100);
  const beforeFile = await sessionFile(before);
  await before.stop();
  const after = fx.pi({ ...originOptions, extraArgs: ["--continue"], brain: resumedBrain });
  after.prompt("Carry on.");
  const afterFile = await sessionFile(after);
  const acked = await after.waitFor(isAcked, 45_000).catch(() => undefined);
  const orphaned = await after.waitFor(shows("## task orphaned"), 10_000).catch(() => undefined);
  // Once more: a second restart of the same session.
  const painted = () => String(toolCalls(after, "agent_task_ack")[0]?.details.taskId);
  const held = () => String(toolCalls(before, "agent_task_send").find((call) => call.args.task === "Hold this for me.")?.details.taskId);
  await after.stop();
  const again = fx.pi({ ...originOptions, extraArgs: ["--continue"], brain: ackAgainBrain(painted, held) });
  again.prompt("Carry on again.");
  const ackedAgain = await again.waitFor(isAcked, 30_000).catch(() => undefined);
  await again
    .waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_cancel", 30_000)
    .catch(() => undefined);
  return { before, after, again, worker, acked, orphaned, ackedAgain, beforeFile, afterFile, spawnedSessions };
}

describeOnHosts("resume after a restart (PI_TASKS_RESUME=1)", (host) => {
  let run: ReturnType<typeof restart>;
  beforeAll(() => {
    run = restart(host);
    run.catch(() => undefined);
  });

  test("the held task continues without showing anything twice; the task whose worker is gone is orphaned", async () => {
    const { before, after, worker, acked, orphaned } = await run;
    expect(titled(before, "## task question")).toHaveLength(1);
    expect(titled(after, "## task question")).toHaveLength(0);
    expect(toolCalls(after, "agent_task_message").map((call) => call.isError)).toEqual([false]);
    expect(toolCalls(worker, "agent_task_done").map((call) => call.isError)).toEqual([false]);
    expect(acked).toBeDefined();
    expect(toolCalls(after, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
    const completions = titled(after, "## task completed");
    expect(completions).toHaveLength(1);
    expect(String(completions[0]!.content)).toContain("banner painted blue");
    expect(orphaned).toBeDefined();
    const held = toolCalls(before, "agent_task_send").find((call) => call.args.task === "Hold this for me.")!;
    expect(field(String((orphaned!.message as { content: unknown }).content), "taskId")).toBe(String(held.details.taskId));
    expect(toolCalls(after, "agent_task_send")).toHaveLength(0);
    expect(after.problems()).toEqual([]);
  });

  test("the worker the origin spawned in the same folder kept its session apart: --continue opened the person's session", async () => {
    const { beforeFile, afterFile, spawnedSessions } = await run;
    expect(beforeFile).toBeDefined();
    expect(afterFile).toBe(beforeFile);
    expect(readdirSync(spawnedSessions).filter((file) => file.endsWith(".jsonl"))).toHaveLength(1);
    expect(readdirSync(dirname(beforeFile!)).filter((file) => file.endsWith(".jsonl"))).toEqual([basename(beforeFile!)]);
  });

  test("a second restart takes back only what was open: the acknowledged task stays closed, the reported loss is not reported again", async () => {
    const { again, ackedAgain } = await run;
    expect(ackedAgain).toBeDefined();
    const second = toolCalls(again, "agent_task_ack");
    expect(second.map((call) => call.isError)).toEqual([true]);
    expect(second[0]!.text).toContain("UNKNOWN_TASK");
    expect(titled(again, "## task orphaned")).toHaveLength(0);
    expect(titled(again, "## task completed")).toHaveLength(0);
    // The lost worker's task, cancelled by the short id the board shows: cancelled, nothing owed to the lost worker.
    const cancelled = toolCalls(again, "agent_task_cancel");
    expect(cancelled.map((call) => call.isError)).toEqual([false]);
    expect(cancelled[0]!.text).toContain("- delivery to the worker: not required — its worker is lost");
    expect(again.problems()).toEqual([]);
  });
});
