/**
 * Bench specialist scenario (bench/measure/specialists.ts): on its assignment the worker's model
 * reports it completed at once, so the figure is delegation, not the model's work.
 */
import type { ScriptReply, ScriptTurn } from "../../src/demo/scripted-model.ts";
import { called, field, latest } from "../../src/demo/scenarios/turns.ts";

export function respond(turn: ScriptTurn): ScriptReply {
  const taskId = field(latest(turn, "## task assignment"), "taskId");
  if (taskId === undefined || called(turn, "agent_task_done", taskId)) return { text: "Done." };
  return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "done" } }] };
}
