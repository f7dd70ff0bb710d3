/**
 * Steering a running worker (issue 39) in the real Pi 1.6 CLI (`--mode rpc`), on each host. Before,
 * mail to a busy worker waited until its turn ended (only a cancel cut in). The worker's model runs
 * a `bash` that lasts until the test lets it end; meanwhile the origin's model sends
 * `agent_task_message {type: "steer"}`, and the origin's `/tasks <id>` shows it inserted into the
 * worker's running turn while that command still runs (then the test lets it end). The worker's
 * model reads it inside the same run — after the running tool call, before its next model call —
 * and reports with it, without a turn of its own for it; the origin sees the steer inserted (its
 * `/tasks <id>` names the steer "inserted into the worker's running turn", from the worker's receipt).
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../testkit/async.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { called, EVENT_MESSAGE, field, isCustom, lastSeen, taskDetail, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import type { RpcRecord } from "../helpers/pi-process.ts";
import type { ScriptReply, ScriptTurn } from "../helpers/tui-kit.ts";

setDefaultTimeout(90_000);

const fx = usePiFixture();
const STEER = "make it teal, not red";

/** Tenths of a second the worker's command waits for the test's go-ahead at most. */
const MOST_WAIT_TENTHS = 900;

/**
 * The worker: a command that runs until the test lets it end (a file appears; the test makes it
 * once the origin saw the steer inserted, so no timing decides the outcome); then it reports what
 * it was steered to, if anything.
 */
const slowWorker =
  (flag: string) =>
  (turn: ScriptTurn): ScriptReply => {
    const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
    if (taskId === undefined) return { text: "nothing assigned" };
    const command = `t=0; while [ ! -f '${flag}' ] && [ $t -lt ${MOST_WAIT_TENTHS} ]; do sleep 0.1; t=$((t+1)); done; echo painted`;
    if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command } }] };
    if (called(turn, "agent_task_done")) return { text: "finished" };
    const steered = lastSeen(turn, "## task steer") === undefined ? "not steered" : `steered: ${STEER}`;
    return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: steered } }] };
  };

const isEvent = (title: string) => (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith(title);

describeOnHosts("steering a running worker", (host) => {
  test("a steer reaches the worker's model inside its running turn, after its tool call", async () => {
    const flag = join(tmpdir(), `pi-tasks-steer-${crypto.randomUUID()}`);
    fx.defer(() => rmSync(flag, { force: true }));
    const worker = fx.pi({ host, session: `steered-${host}`, worker: true, brain: slowWorker(flag) });
    const to = await waitForEndpoint(fx.relay.url, `steered-${host}`);
    const origin = fx.pi({
      host,
      session: `steering-${host}`,
      brain: (turn) => {
        if (!called(turn, "agent_task_send"))
          return { tools: [{ name: "agent_task_send", arguments: { to, task: "Paint the banner red." } }] };
        const taskId = field(lastSeen(turn, "## task sent"), "taskId");
        if (turn.messages.at(-1)?.text.includes("Steer it") && taskId !== undefined && !called(turn, "agent_task_message"))
          return { tools: [{ name: "agent_task_message", arguments: { taskId, type: "steer", message: STEER } }] };
        return { text: "ok" };
      },
    });
    origin.prompt("Delegate the banner.");
    // The worker's model is running its slow command, and the origin's run that sent the task has
    // ended (Pi refuses a prompt while its agent runs: on a loaded machine the worker's command
    // could start before the origin's last model call was done): steer now.
    await worker.waitFor((record) => record.type === "tool_execution_start" && record.toolName === "bash", 30_000);
    await origin.waitFor((record) => record.type === "agent_end", 30_000);
    origin.prompt("Steer it: teal.");
    // While the worker's command still runs, the origin sees the steer inserted into its running turn
    // (the worker's receipt); only then may the command end.
    const taskId = String(toolCalls(origin, "agent_task_send")[0]!.details.taskId);
    const inserted = await eventually(
      async () => (await taskDetail(origin, taskId)).includes("steer (inserted into the worker's running turn)"),
      40_000,
      500,
    );
    expect(inserted).toBe(true);
    writeFileSync(flag, "go");
    const completed = await origin.waitFor(isEvent("## task completed"), 40_000);
    expect(String((completed.message as { content?: unknown }).content)).toContain(`steered: ${STEER}`);
    // One run: the steer was read before the run ended (no run of its own), after the bash call.
    // (The origin may hear of the result before the worker's run has ended: wait for that end.)
    const doneStart = worker.records.findIndex((record) => record.type === "tool_execution_start" && record.toolName === "agent_task_done");
    await worker.waitFor((record) => record.type === "agent_end", 20_000, doneStart);
    const records = worker.records;
    const bashStart = records.findIndex((record) => record.type === "tool_execution_start" && record.toolName === "bash");
    const runEnd = records.findIndex((record, index) => index > bashStart && record.type === "agent_end");
    const steerAt = records.findIndex((record, index) => index > bashStart && isEvent("## task steer")(record));
    const doneAt = records.findIndex((record) => record.type === "tool_execution_start" && record.toolName === "agent_task_done");
    expect(steerAt).toBeGreaterThan(bashStart);
    expect(doneAt).toBeGreaterThan(steerAt);
    expect(runEnd).toBeGreaterThan(doneAt);
    expect(toolCalls(origin, "agent_task_message").map((call) => call.isError)).toEqual([false]);
    // And after the run, `/tasks <id>` still says so.
    expect(await taskDetail(origin, taskId)).toContain(`steer (inserted into the worker's running turn) — "${STEER}"`);
  });
});
