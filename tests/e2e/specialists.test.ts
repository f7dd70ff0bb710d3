/**
 * Specialists by name (issue 39) in the real Pi 1.6 CLI (`--mode rpc`), on each host: the origin's
 * model sends `agent_task_send {to: "reviewer", task}` with no spawn of its own. The extension starts
 * a worker of the built-in `reviewer` profile for it (cold), and the task completes; a second task
 * to "reviewer" after the first ended goes to the same worker, already running and idle (warm: no
 * second start). A name that is no profile is `INVALID_PROFILE`, naming the profiles there are;
 * nothing is started. `/tasks <id>` shows what the worker did (its transcript), inside Pi; `/tasks`
 * lists the specialist as kept warm, and `/tasks stop` stops it.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { listSpawned } from "../../src/host/spawned.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { called, callCount, field, nextBoard, taskDetail, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import { sharedTestHome } from "../helpers/pi-process.ts";
import type { ScriptReply, ScriptTurn } from "../helpers/tui-kit.ts";

setDefaultTimeout(90_000);

const fx = usePiFixture();
const WORKER_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "worker-completes.ts");

/** Sends to "nobody" (refused), then two tasks to the reviewer, one after the other, acknowledging each. */
function delegating(turn: ScriptTurn): ScriptReply {
  if (!called(turn, "agent_task_send", "nobody"))
    return { tools: [{ name: "agent_task_send", arguments: { to: "nobody", task: "Review nothing." } }] };
  const sends = callCount(turn, "agent_task_send");
  const completed = turn.messages.filter((message) => message.text.startsWith("## task completed"));
  if (sends === 1) return { tools: [{ name: "agent_task_send", arguments: { to: "reviewer", task: "Review the first change." } }] };
  if (completed.length < sends - 1) return { text: "waiting for the reviewer" };
  const taskId = field(completed.at(-1)!.text, "taskId")!;
  if (callCount(turn, "agent_task_ack") < completed.length) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
  if (sends === 2) return { tools: [{ name: "agent_task_send", arguments: { to: "reviewer", task: "Review the second change." } }] };
  return { text: "both reviews are in" };
}

describeOnHosts("a specialist by name", (host) => {
  test("the first send starts a reviewer, the second reuses it while idle; an unknown name is INVALID_PROFILE", async () => {
    const origin = fx.pi({ host, session: `specialists-${host}`, env: { PI_TASKS_WORKER_SCRIPT: WORKER_SCRIPT }, brain: delegating });
    origin.prompt("Have the reviewer look at both changes.");
    await origin.waitFor((record) => record.type === "message_end" && JSON.stringify(record).includes("both reviews are in"), 60_000);
    const sends = toolCalls(origin, "agent_task_send");
    expect(sends.map((call) => call.isError)).toEqual([true, false, false]);
    expect(sends[0]!.text).toContain("INVALID_PROFILE");
    expect(sends[0]!.text).toContain("reviewer");
    const first = sends[1]!.text.match(/- specialist: reviewer — worker (\S+), started for this task/)?.[1];
    const second = sends[2]!.text.match(/- specialist: reviewer — worker (\S+), already running and idle/)?.[1];
    expect(first).toMatch(/^reviewer-[0-9a-z]{4}$/);
    expect(second).toBe(first);
    // One worker of the profile, started by this Pi (no spawn of the model's own).
    expect(toolCalls(origin, "agent_task_spawn")).toEqual([]);
    const reviewers = listSpawned({ PI_TASKS_HOME: sharedTestHome() }).filter((worker) => worker.session === first);
    expect(reviewers.map((worker) => worker.profile)).toEqual(["reviewer"]);
    expect(toolCalls(origin, "agent_task_ack").map((call) => call.isError)).toEqual([false, false]);
    // What the worker did, inside Pi: `/tasks <id>` ends with its transcript (no log file to open).
    const taskId = String(sends[2]!.details.taskId);
    const detail = await taskDetail(origin, taskId);
    expect(detail).toContain(`worker transcript (${first}, newest`);
    expect(detail).toContain("agent_task_done");
    // The person sees the warm specialist on /tasks, and stops it there.
    const before = origin.records.length;
    origin.prompt("/tasks");
    const board = (await nextBoard(origin, before)).join("\n");
    expect(board).toMatch(new RegExp(`${first} — pid \\d+, a specialist kept warm: stops after 10m without a task, or when this Pi exits`));
    const stopAt = origin.records.length;
    origin.prompt(`/tasks stop ${first}`);
    const stopped = await origin.waitFor(
      (record) =>
        record.type === "extension_ui_request" && record.method === "notify" && String(record.message).includes(`stopped ${first}`),
      20_000,
      stopAt,
    );
    expect(String(stopped.message)).toContain("confirmed gone");
  });
});
