/**
 * Sending back for revision in the real Pi 1.6 CLI (`--mode rpc`), on each host: the worker's model
 * completes; the origin's model sends the result back with agent_task_revise and a reason; the
 * worker's model is woken with `## task revision requested` (its gate open again for the task),
 * completes a second time; the origin acknowledges the second result. Both rounds stay in the history.
 */
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { eventually } from "../../testkit/async.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { called, EVENT_MESSAGE, field, lastSeen, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import type { RpcRecord } from "../helpers/pi-process.ts";

setDefaultTimeout(60_000);

const fx = usePiFixture();
const REASON = "The report has no summary section.";
/** The worker's second done ending after the origin acknowledged its result (a loaded 2-core machine). */
const DONE_ENDED_MS = 10_000;

const isAcked = (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack";
const eventsTitled = (messages: Record<string, unknown>[], title: string) =>
  messages.filter((message) => String(message.content).startsWith(title));

async function revise(host: PiHost) {
  const worker = fx.pi({
    host,
    session: `revising-worker-${host}`,
    worker: true,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId === undefined) return { text: "nothing assigned" };
      const revision = lastSeen(turn, "## task revision requested");
      const dones = turn.messages.filter((message) => message.text.includes("[toolCall agent_task_done")).length;
      if (dones === 0) return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "report v1" } }] };
      if (revision !== undefined && dones === 1)
        return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "report v2 with a summary" } }] };
      return { text: "reported" };
    },
  });
  const to = await waitForEndpoint(fx.relay.url, `revising-worker-${host}`);
  const origin = fx.pi({
    host,
    session: `revising-origin-${host}`,
    brain: (turn) => {
      if (!called(turn, "agent_task_send")) return { tools: [{ name: "agent_task_send", arguments: { to, task: "Write the report." } }] };
      const completed = lastSeen(turn, "## task completed");
      const taskId = field(completed, "taskId");
      if (completed === undefined || taskId === undefined) return { text: "waiting" };
      if (!called(turn, "agent_task_revise")) return { tools: [{ name: "agent_task_revise", arguments: { taskId, reason: REASON } }] };
      if (completed.includes("report v2") && !called(turn, "agent_task_ack"))
        return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
      return { text: "waiting" };
    },
  });
  origin.prompt("Delegate the report.");
  const acked = await origin.waitFor(isAcked, 45_000).catch(() => undefined);
  // The result reaches the origin while the worker's done still runs (it sends, then returns): its
  // end may reach the worker's RPC stream after the origin acknowledged — on a loaded machine, it did.
  await eventually(() => toolCalls(worker, "agent_task_done").length >= 2, DONE_ENDED_MS);
  return { worker, origin, acked };
}

describeOnHosts("send back for revision", (host) => {
  let run: ReturnType<typeof revise>;
  beforeAll(() => {
    run = revise(host);
    run.catch(() => undefined);
  });

  test("the worker is woken with the reason, works again and completes; the origin acknowledges the second result", async () => {
    const { worker, origin, acked } = await run;
    const atWorker = eventsTitled(worker.customMessages(EVENT_MESSAGE), "## task revision requested");
    expect(atWorker).toHaveLength(1);
    expect(String(atWorker[0]!.content)).toContain(REASON);
    expect(toolCalls(worker, "agent_task_done").map((call) => call.isError)).toEqual([false, false]);
    expect(toolCalls(origin, "agent_task_revise").map((call) => call.isError)).toEqual([false]);
    expect(acked).toBeDefined();
    expect(toolCalls(origin, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
    const completions = eventsTitled(origin.customMessages(EVENT_MESSAGE), "## task completed").map((message) => String(message.content));
    expect(completions).toHaveLength(2);
    expect(completions[0]).toContain("report v1");
    expect(completions[1]).toContain("report v2 with a summary");
  });
});
