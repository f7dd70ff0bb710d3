/**
 * Child scenario for the delegation-peer bench (bench/measure/delegation-peers.ts): a delegated
 * child answers its task at once with `done: <task>` (the bench task tag found in the task text),
 * calls no tool, so the figure is the peer's delegation machinery, not the model.
 */
import type { ScriptReply, ScriptTurn } from "../../src/demo/scripted-model.ts";

/** Every bench task names itself with this tag and a number, e.g. `bench-peer-task-3`. */
export const PEER_TASK_TAG = "bench-peer-task-";
const TASK_PATTERN = new RegExp(`${PEER_TASK_TAG}\\d+`);

/** What a child answers for `task` (the bench checks the parent's tool result for it). */
export function childAnswer(task: string): string {
  return `done: ${task}`;
}

export function respond(turn: ScriptTurn): ScriptReply {
  const user = [...turn.messages].reverse().find((message) => message.role === "user");
  const task = user?.text.match(TASK_PATTERN)?.[0];
  return { text: task === undefined ? "done: (no bench task found)" : childAnswer(task) };
}
