/**
 * Demo origin: delegates the hello.txt task to the worker in PI_TASKS_DEMO_TARGET, answers the
 * worker's question, verifies the file itself with `bash`, acknowledges, then reads the status.
 */
import type { ScriptReply, ScriptTurn } from "../scripted-model.ts";
import { called, field, latest } from "./turns.ts";

export const DEMO_GREETING = "Hello from pi-tasks";
export const DEMO_TASK =
  "Create hello.txt in your project directory containing the greeting I will give you when you ask, test that the file holds exactly that greeting, and report completion with result.changedFiles.";

/** Answers the worker's newest question with the greeting, once; undefined when there is none to answer. */
export function answerQuestion(turn: ScriptTurn): ScriptReply | undefined {
  const question = latest(turn, "## task question");
  const questionId = field(question, "eventId");
  if (question === undefined || questionId === undefined || called(turn, "agent_task_message", questionId)) return undefined;
  return {
    tools: [
      {
        name: "agent_task_message",
        arguments: { taskId: field(question, "taskId"), type: "answer", message: DEMO_GREETING, inReplyTo: questionId },
      },
    ],
  };
}

/** The origin's first moves: the task sent to the worker in PI_TASKS_DEMO_TARGET, then its question answered; undefined after. */
export function delegateAndAnswer(turn: ScriptTurn): ScriptReply | undefined {
  if (!called(turn, "agent_task_send")) {
    const to = JSON.parse(process.env.PI_TASKS_DEMO_TARGET ?? "{}");
    return { tools: [{ name: "agent_task_send", arguments: { to, task: DEMO_TASK } }] };
  }
  return answerQuestion(turn);
}

export function respond(turn: ScriptTurn): ScriptReply {
  const first = delegateAndAnswer(turn);
  if (first !== undefined) return first;
  const completed = latest(turn, "## task completed");
  const taskId = field(completed, "taskId");
  if (completed === undefined || taskId === undefined) return { text: "Waiting for the worker." };
  if (!called(turn, "bash")) return { tools: [{ name: "bash", arguments: { command: "cat hello.txt" } }] };
  const verified = turn.messages.some((message) => message.role === "toolResult" && message.text.includes(DEMO_GREETING));
  if (!verified) return { text: "Verification failed: hello.txt does not hold the greeting; not acknowledging." };
  if (!called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
  if (!called(turn, "agent_task_status")) return { tools: [{ name: "agent_task_status", arguments: { taskId } }] };
  return { text: "Verified and acknowledged." };
}
