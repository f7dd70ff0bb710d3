/**
 * Worker: on its assignment runs a real `bash sleep` (long enough to be seen working, and steered
 * while it runs), then completes, saying whether the origin steered it meanwhile.
 */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";
import { called, field, latest } from "../../../src/demo/scenarios/turns.ts";

export const SLEEP_COMMAND = "sleep 8";

export function respond(turn: ScriptTurn): ScriptReply {
  const taskId = field(latest(turn, "## task assignment"), "taskId");
  if (taskId === undefined) return { text: "No task yet." };
  if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command: SLEEP_COMMAND } }] };
  const steered = latest(turn, "## task steer") === undefined ? "slept as asked, not steered" : "slept as asked, steered";
  if (!called(turn, "agent_task_done"))
    return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: steered } }] };
  return { text: "Task reported." };
}
