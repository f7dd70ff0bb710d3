/** Origin: send a task to PI_TASKS_TEST_TARGET on the first prompt; ack completions. */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";
export function respond(turn: ScriptTurn): ScriptReply {
  const last = turn.messages.at(-1);
  if (last?.role === "toolResult") return { text: "ok" };
  const completed = [...turn.messages].reverse().find((message) => message.text.includes("## task completed"));
  const acked = turn.messages.some((message) => message.text.includes("[toolCall agent_task_ack"));
  if (completed && !acked) {
    const taskId = completed.text.match(/- taskId: (\S+)/)?.[1]!;
    return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
  }
  if (!turn.messages.some((message) => message.text.includes("[toolCall agent_task_send"))) {
    const to = JSON.parse(process.env.PI_TASKS_TEST_TARGET ?? "{}");
    return { tools: [{ name: "agent_task_send", arguments: { to, task: "write hello.txt" } }] };
  }
  return { text: "waiting" };
}
