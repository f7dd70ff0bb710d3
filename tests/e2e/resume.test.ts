/**
 * Resume after a restart in the real Pi 1.6 CLI (`--mode rpc`), on each host, with
 * `PI_TASKS_RESUME=1`: the origin delegates two tasks; one worker asks a question; the origin's Pi
 * quits, and so does the other worker. A new origin Pi continues the same session (`--continue`):
 * it reads from its history which tasks it delegated and to whom, asks each worker, signed, whether
 * it still holds its task. The worker that does continues — the origin's model answers the question
 * it saw before the restart (not shown again), the worker completes, the origin acknowledges once —
 * and the task whose worker is gone is shown orphaned.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { waitForEndpoint } from "../../kit/session-control.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { bannerWorkerBrain, called, EVENT_MESSAGE, field, isCustom, lastSeen, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import type { PiProcess, RpcRecord, ScriptReply, ScriptTurn } from "../helpers/pi-process.ts";

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

async function restart(host: PiHost) {
  const sessionDir = mkdtempSync(join(tmpdir(), "pi-tasks-sessions-"));
  const cwd = mkdtempSync(join(tmpdir(), "pi-tasks-project-"));
  fx.defer(() => rmSync(sessionDir, { recursive: true, force: true }));
  fx.defer(() => rmSync(cwd, { recursive: true, force: true }));
  const worker = fx.pi({ host, session: `resume-worker-${host}`, worker: true, brain: bannerWorkerBrain() });
  const gone = fx.pi({ host, session: `resume-gone-${host}`, worker: true, brain: () => ({ text: "holding it" }) });
  const paint = await waitForEndpoint(fx.relay.url, `resume-worker-${host}`);
  const hold = await waitForEndpoint(fx.relay.url, `resume-gone-${host}`);
  const originOptions = { host, session: `resume-origin-${host}`, cwd, sessionDir, env: { PI_TASKS_RESUME: "1" } };
  const before = fx.pi({
    ...originOptions,
    brain: (turn) =>
      called(turn, "agent_task_send")
        ? { text: "waiting for the workers" }
        : {
            tools: [
              { name: "agent_task_send", arguments: { to: paint, task: "Paint the banner." } },
              { name: "agent_task_send", arguments: { to: hold, task: "Hold this for me." } },
            ],
          },
  });
  before.prompt("Delegate both.");
  await before.waitFor(shows("## task question"), 30_000);
  await gone.waitFor(shows("## task assignment"), 30_000);
  await Promise.all([before.stop(), gone.stop()]);
  const after = fx.pi({ ...originOptions, extraArgs: ["--continue"], brain: resumedBrain });
  after.prompt("Carry on.");
  const acked = await after.waitFor(isAcked, 45_000).catch(() => undefined);
  const orphaned = await after.waitFor(shows("## task orphaned"), 10_000).catch(() => undefined);
  return { before, after, worker, acked, orphaned };
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
});
