/**
 * An origin that starts its own worker with agent_task_spawn (no endpoint handed to it), delegates
 * the hello.txt task, answers the worker's question, applies the result the worker made in its own
 * workspace, acknowledges the completion and stops the worker — what the delegation skill tells a model to do. The worker runs
 * src/demo/scenarios/demo-worker.ts (set as PI_TASKS_WORKER_SCRIPT by the test).
 */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";
import { answerQuestion, DEMO_TASK } from "../../../src/demo/scenarios/demo-origin.ts";
import { called, field, latest } from "../../../src/demo/scenarios/turns.ts";

export const WORKER_NAME = "helper";

export function respond(turn: ScriptTurn): ScriptReply {
  const last = turn.messages.at(-1);
  if (!called(turn, "agent_task_spawn")) {
    if (last?.role === "user" && last.text.includes("Delegate"))
      return { tools: [{ name: "agent_task_spawn", arguments: { name: WORKER_NAME } }] };
    return { text: "Ready." };
  }
  const started = latest(turn, "## worker started");
  const endpoint = field(started, "taskEndpoint");
  if (endpoint === undefined) return { text: "The worker did not start." };
  if (!called(turn, "agent_task_send"))
    return { tools: [{ name: "agent_task_send", arguments: { to: JSON.parse(endpoint), task: DEMO_TASK } }] };
  const answer = answerQuestion(turn);
  if (answer !== undefined) return answer;
  const completed = latest(turn, "## task completed");
  const taskId = field(completed, "taskId");
  if (completed === undefined || taskId === undefined) return { text: "Waiting for the worker." };
  // The worker wrote in its own workspace: its files reach this checkout when applied.
  if (!called(turn, "agent_task_apply")) return { tools: [{ name: "agent_task_apply", arguments: { taskId } }] };
  if (!called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
  if (!called(turn, "agent_task_stop")) return { tools: [{ name: "agent_task_stop", arguments: { name: WORKER_NAME } }] };
  return { text: "Delegated, verified, acknowledged and cleaned up." };
}
