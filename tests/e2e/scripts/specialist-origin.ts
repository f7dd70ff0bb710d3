/**
 * An origin that delegates to the built-in `scout` specialist by name (no spawn of its own), steers
 * the scout while it works when the person asks, and acknowledges the result; the scout stays warm.
 * The worker runs tests/e2e/scripts/sleepy-worker.ts (set as PI_TASKS_WORKER_SCRIPT by the test).
 */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";
import { called, field, latest } from "../../../src/demo/scenarios/turns.ts";

export const STEER = "keep the output short";
export const DONE = "Delegated to the scout, steered and acknowledged.";

export function respond(turn: ScriptTurn): ScriptReply {
  const last = turn.messages.at(-1);
  if (!called(turn, "agent_task_send")) {
    if (last?.role === "user" && last.text.includes("Delegate"))
      return { tools: [{ name: "agent_task_send", arguments: { to: "scout", task: "Sleep a while, then report." } }] };
    return { text: "Ready." };
  }
  const taskId = field(latest(turn, "## task sent"), "taskId");
  if (taskId === undefined) return { text: "The task was not sent." };
  if (last?.role === "user" && last.text.includes("Steer") && !called(turn, "agent_task_message"))
    return { tools: [{ name: "agent_task_message", arguments: { taskId, type: "steer", message: STEER } }] };
  if (latest(turn, "## task completed") === undefined) return { text: "Waiting for the scout." };
  if (!called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
  return { text: DONE };
}
