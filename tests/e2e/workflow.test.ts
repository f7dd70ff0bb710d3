/**
 * Workflows in one call (issue 39) in the real Pi 1.6 CLI (`--mode rpc`), on each host: the origin's
 * model calls `agent_task_workflow` twice — four steps at once to the `scout` specialist, then a
 * chain of three — and is woken exactly once per workflow, with every step's outcome: no turn of
 * its own between steps, none for each step's result. In the chain each step's task carries the
 * previous step's completed result.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { callCount, isCustom, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import type { RpcRecord } from "../helpers/pi-process.ts";
import type { ScriptReply, ScriptTurn } from "../helpers/tui-kit.ts";
import { WORKFLOW_MESSAGE } from "../../extensions/pi-tasks/workflows.ts";

setDefaultTimeout(120_000);

const fx = usePiFixture();
const WORKER_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "echo-worker.ts");
const FAN = Array.from({ length: 4 }, (_, index) => ({ to: "scout", task: `Look at part ${index + 1}.` }));
const CHAIN = ["Find the bug.", "Fix the bug.", "Check the fix."].map((task) => ({ to: "scout", task }));

function orchestrating(turn: ScriptTurn): ScriptReply {
  const ended = turn.messages.filter((message) => message.text.startsWith("## workflow ended")).length;
  const started = callCount(turn, "agent_task_workflow");
  if (started === 0) return { tools: [{ name: "agent_task_workflow", arguments: { mode: "all", steps: FAN } }] };
  if (ended === 1 && started === 1) return { tools: [{ name: "agent_task_workflow", arguments: { mode: "chain", steps: CHAIN } }] };
  return { text: ended === 2 ? "both workflows ended" : "waiting for the workflow" };
}

const isWorkflowEnd = (record: RpcRecord) => isCustom(record, WORKFLOW_MESSAGE);
const contentOf = (record: RpcRecord) => String((record.message as { content?: unknown }).content);

describeOnHosts("a workflow in one call", (host) => {
  test("four steps at once, then a chain of three: one wake each, every outcome in it, the chain handing results on", async () => {
    // Skills discovered as a user's Pi discovers them (not -ns): the installed package's delegation skill is offered.
    const origin = fx.pi({
      host,
      session: `workflows-${host}`,
      skills: true,
      env: { PI_TASKS_WORKER_SCRIPT: WORKER_SCRIPT },
      brain: orchestrating,
    });
    origin.prompt("Look at the four parts, then find, fix and check the bug.");
    await origin.waitFor((record) => record.type === "message_end" && JSON.stringify(record).includes("both workflows ended"), 90_000);
    expect(toolCalls(origin, "agent_task_workflow").map((call) => call.isError)).toEqual([false, false]);
    const ends = origin.records.filter((record) => record.type === "message_end" && isWorkflowEnd(record)).map(contentOf);
    expect(ends).toHaveLength(2);
    for (const index of [1, 2, 3, 4]) expect(ends[0]).toContain(`completed — "saw: Look at part ${index}."`);
    expect(ends[1]).toContain('completed — "saw: Find the bug."');
    expect(ends[1]).toContain('completed — "saw: Fix the bug. +previous"');
    expect(ends[1]).toContain('completed — "saw: Check the fix. +previous"');
    // The package's delegation skill is offered to the model (on the Node host, from the packed install).
    expect(origin.turns[0]?.system).toContain("<name>pi-task-delegation</name>");
    // The prompt, then one wake per workflow: three runs of the origin's model, no more.
    expect(origin.records.filter((record) => record.type === "agent_start")).toHaveLength(3);
  });
});
