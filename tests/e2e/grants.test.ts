/**
 * Grants in the real Pi 1.6 CLI (`--mode rpc`), on each host: the person's default grant
 * (`PI_TASKS_GRANT`) goes with the task into the signed assignment; the worker's model calls `bash`,
 * which the grant refuses — the model reads `PI_TASK_GRANT_DENIED` and why; it keeps calling tools
 * without reporting until its turn budget runs out, and the task ends `failed` with
 * `BUDGET_EXHAUSTED`, reported to the origin. The worker ran only what the grant allowed.
 *
 * Before that, its first `agent_task_done` names a changed file outside its project and is refused
 * (`INVALID_RESULT_PATH`): it submitted nothing, so the worker's tools stay open to fix the result
 * or ask — its next call is judged by the grant, not locked by the gate.
 */
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { GRANT_VARIABLE } from "../../extensions/pi-tasks/grants.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { called, EVENT_MESSAGE, field, isCustom, lastSeen, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import type { RpcRecord } from "../helpers/pi-process.ts";

setDefaultTimeout(60_000);

const fx = usePiFixture();
const GRANT = { bash: false, maxTurns: 3 };

const isFailed = (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith("## task failed");

async function granted(host: PiHost) {
  const worker = fx.pi({
    host,
    session: `granted-worker-${host}`,
    worker: true,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId === undefined) return { text: "nothing assigned" };
      if (!called(turn, "agent_task_done")) {
        const result = { changedFiles: ["../outside-the-project.txt"] };
        return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "tidied", result } }] };
      }
      if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command: "echo outside-the-grant > escaped.txt" } }] };
      // Its tools closed (the task ended): stop.
      if (turn.messages.at(-1)?.text.includes("PI_TASK_WORKER_ASSIGNMENT_REQUIRED")) return { text: "stopped" };
      // Keeps working without reporting: its turns run out.
      return { tools: [{ name: "ls", arguments: { path: "." } }] };
    },
  });
  const to = await waitForEndpoint(fx.relay.url, `granted-worker-${host}`);
  const origin = fx.pi({
    host,
    session: `granted-origin-${host}`,
    env: { [GRANT_VARIABLE]: JSON.stringify(GRANT) },
    brain: (turn) =>
      called(turn, "agent_task_send")
        ? { text: "waiting" }
        : { tools: [{ name: "agent_task_send", arguments: { to, task: "Tidy the project." } }] },
  });
  origin.prompt("Delegate the tidying.");
  const failed = await origin.waitFor(isFailed, 40_000).catch(() => undefined);
  return { worker, origin, failed };
}

describeOnHosts("grants that only narrow", (host) => {
  let run: ReturnType<typeof granted>;
  beforeAll(() => {
    run = granted(host);
    run.catch(() => undefined);
  });

  test("the assignment carries the person's grant; bash outside it is refused with the reason the model reads", async () => {
    const { worker } = await run;
    const bash = toolCalls(worker, "bash");
    expect(bash.length).toBeGreaterThan(0);
    expect(bash.every((call) => call.isError)).toBe(true);
    expect(bash[0]!.text).toContain("PI_TASK_GRANT_DENIED");
    expect(bash[0]!.text).toContain("bash is not granted for this task");
    expect(await Bun.file(`${worker.cwd}/escaped.txt`).exists()).toBe(false);
  });

  test("a refused agent_task_done (INVALID_RESULT_PATH) submitted nothing and leaves the worker's tools open", async () => {
    const { worker } = await run;
    const done = toolCalls(worker, "agent_task_done");
    expect(done.map((call) => call.isError)).toEqual([true]);
    expect(done[0]!.text).toContain("INVALID_RESULT_PATH");
    // The next call is the grant's to judge, not locked by the gate as if the task were closing.
    const next = toolCalls(worker).find((call) => call.index > done[0]!.index);
    expect(next?.name).toBe("bash");
    expect(next?.text).not.toContain("PI_TASK_WORKER_ASSIGNMENT_REQUIRED");
  });

  test("the turn budget runs out: the task ends failed with BUDGET_EXHAUSTED at the origin", async () => {
    const { worker, failed } = await run;
    expect(failed).toBeDefined();
    const text = String((failed!.message as { content?: unknown }).content);
    expect(text).toContain("BUDGET_EXHAUSTED");
    expect(text).toContain(`turns: ${GRANT.maxTurns} of ${GRANT.maxTurns}`);
    // The worker did not report by itself: its one agent_task_done was refused.
    expect(toolCalls(worker, "agent_task_done").map((call) => call.isError)).toEqual([true]);
  });
});
