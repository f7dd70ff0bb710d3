/** Worker: on an assignment, complete it; otherwise say nothing useful. */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";
export function respond(turn: ScriptTurn): ScriptReply {
  const last = turn.messages.at(-1);
  if (last?.role === "toolResult") return { text: "done" };
  const assignment = [...turn.messages].reverse().find((message) => message.text.includes("## task assignment"));
  const taskId = assignment?.text.match(/- taskId: (\S+)/)?.[1];
  if (taskId === undefined) return { text: "idle" };
  return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "did it" } }] };
}
