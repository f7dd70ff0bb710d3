/**
 * Scenario module for an origin on another machine (tests/netns/pi-across-hosts.test.ts): delegates
 * the demo's hello.txt task to the worker in PI_TASKS_DEMO_TARGET, answers its question, brings the
 * worker's change into its own checkout with agent_task_apply (the worker's files are on the other
 * host), checks hello.txt itself with `bash`, then acknowledges.
 */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";
import { DEMO_GREETING, delegateAndAnswer } from "../../../src/demo/scenarios/demo-origin.ts";
import { called, field, latest } from "../../../src/demo/scenarios/turns.ts";

export function respond(turn: ScriptTurn): ScriptReply {
  const first = delegateAndAnswer(turn);
  if (first !== undefined) return first;
  const taskId = field(latest(turn, "## task completed"), "taskId");
  if (taskId === undefined) return { text: "Waiting for the worker." };
  if (!called(turn, "agent_task_apply")) return { tools: [{ name: "agent_task_apply", arguments: { taskId } }] };
  if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command: "cat hello.txt" } }] };
  const verified = turn.messages.some((message) => message.role === "toolResult" && message.text.includes(DEMO_GREETING));
  if (!verified) return { text: "hello.txt does not hold the greeting; not acknowledging." };
  if (!called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
  return { text: "Applied, verified and acknowledged." };
}
