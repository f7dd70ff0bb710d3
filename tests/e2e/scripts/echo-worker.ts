/**
 * Worker: completes each assignment at once with a summary that echoes its task's first line and
 * whether the task carried a previous workflow step's completed result (`+previous`).
 */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";

export function respond(turn: ScriptTurn): ScriptReply {
  if (turn.messages.at(-1)?.role === "toolResult") return { text: "done" };
  const assignment = [...turn.messages].reverse().find((message) => message.text.includes("## task assignment"));
  const taskId = assignment?.text.match(/- taskId: (\S+)/)?.[1];
  if (taskId === undefined) return { text: "idle" };
  const first = assignment!.text.match(/│ ([^\n]*)/)?.[1] ?? "?";
  const previous = assignment!.text.includes("The previous step's result: completed") ? " +previous" : "";
  return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: `saw: ${first}${previous}` } }] };
}
