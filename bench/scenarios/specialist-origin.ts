/**
 * Bench origin scenario for the specialists figures (bench/measure/specialists.ts): on the prompt
 * "send <n>" it delegates to the built-in `scout` specialist by name; on "workflow <n>" it runs a
 * workflow of four steps at once to the scout; every other turn (a result, a workflow's end) is
 * answered with a short text. Nothing is acknowledged: a scout is idle again once its task ended.
 */
import type { ScriptReply, ScriptTurn } from "../../src/demo/scripted-model.ts";

/** Steps of the bench's workflow (all at once). */
export const WORKFLOW_STEPS = 4;

export function respond(turn: ScriptTurn): ScriptReply {
  const last = turn.messages.at(-1);
  if (last?.role !== "user") return { text: "Noted." };
  const send = last.text.match(/^send (\d+)$/);
  if (send !== null) return { tools: [{ name: "agent_task_send", arguments: { to: "scout", task: `bench task ${send[1]}` } }] };
  const workflow = last.text.match(/^workflow (\d+)$/);
  if (workflow !== null) {
    const steps = Array.from({ length: WORKFLOW_STEPS }, (_, index) => ({
      to: "scout",
      task: `bench workflow ${workflow[1]} step ${index + 1}`,
    }));
    return { tools: [{ name: "agent_task_workflow", arguments: { mode: "all", steps } }] };
  }
  return { text: "Noted." };
}
