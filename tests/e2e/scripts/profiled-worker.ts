/**
 * Worker for the profile test: reports, for each task it is assigned, whether its system prompt
 * carries its profile's instructions (PROFILE_MARKER) and whether the task's grant let `bash` run.
 */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";
import { called, field, latest } from "../../../src/demo/scenarios/turns.ts";

export const PROFILE_MARKER = "CHECKER-PROFILE-7f3a";

export function respond(whole: ScriptTurn): ScriptReply {
  const taskId = field(latest(whole, "## task assignment"), "taskId");
  if (taskId === undefined) return { text: "No task yet." };
  // Each task on its own: only what came after its assignment counts.
  const from = whole.messages.findLastIndex((message) => message.text.includes("## task assignment"));
  const turn = { ...whole, messages: whole.messages.slice(from) };
  if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command: "echo ran" } }] };
  if (!called(turn, "agent_task_done")) {
    const refused = turn.messages.some((message) => message.role === "toolResult" && message.text.includes("PI_TASK_GRANT_DENIED"));
    const seen = turn.system?.includes(PROFILE_MARKER) === true;
    const summary = `instructions ${seen ? "seen" : "missing"}; bash ${refused ? "refused by the grant" : "ran"}`;
    return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary } }] };
  }
  return { text: "Task reported." };
}
