/**
 * Worker for the profile test: reports whether its system prompt carries its profile's
 * instructions (PROFILE_MARKER) and whether its grant let `bash` run.
 */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";
import { called, field, latest } from "../../../src/demo/scenarios/turns.ts";

export const PROFILE_MARKER = "CHECKER-PROFILE-7f3a";

export function respond(turn: ScriptTurn): ScriptReply {
  const taskId = field(latest(turn, "## task assignment"), "taskId");
  if (taskId === undefined) return { text: "No task yet." };
  if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command: "echo ran" } }] };
  if (!called(turn, "agent_task_done")) {
    const refused = turn.messages.some((message) => message.role === "toolResult" && message.text.includes("PI_TASK_GRANT_DENIED"));
    const seen = turn.system?.includes(PROFILE_MARKER) === true;
    const summary = `instructions ${seen ? "seen" : "missing"}; bash ${refused ? "refused by the grant" : "ran"}`;
    return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary } }] };
  }
  return { text: "Task reported." };
}
