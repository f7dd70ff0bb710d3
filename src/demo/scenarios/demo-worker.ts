/**
 * Demo worker: asks which greeting to write, writes hello.txt with the real `write` tool, tests it
 * with the real `bash` tool, and reports completion with the changed file.
 */
import type { ScriptReply, ScriptTurn } from "../scripted-model.ts";
import { body, called, field, latest } from "./turns.ts";

export const GREETING_QUESTION = "Which greeting should hello.txt contain?";

export function respond(turn: ScriptTurn): ScriptReply {
  const assignment = latest(turn, "## task assignment");
  const taskId = field(assignment, "taskId");
  if (taskId === undefined) return { text: "No task yet." };
  if (!called(turn, "agent_task_message", GREETING_QUESTION)) {
    return { tools: [{ name: "agent_task_message", arguments: { taskId, type: "question", message: GREETING_QUESTION } }] };
  }
  const answer = latest(turn, "## task answer");
  if (answer === undefined) return { text: "Waiting for the origin's answer." };
  const greeting = body(answer);
  if (!called(turn, "write")) return { tools: [{ name: "write", arguments: { path: "hello.txt", content: `${greeting}\n` } }] };
  if (!called(turn, "bash")) {
    return {
      tools: [{ name: "bash", arguments: { command: `test "$(cat hello.txt)" = ${JSON.stringify(greeting)} && echo hello.txt-ok` } }],
    };
  }
  if (!called(turn, "agent_task_done")) {
    const tested = turn.messages.some((message) => message.role === "toolResult" && message.text.includes("hello.txt-ok"));
    return {
      tools: [
        {
          name: "agent_task_done",
          arguments: tested
            ? {
                taskId,
                status: "completed",
                summary: `hello.txt contains "${greeting}" and its test passed.`,
                result: { changedFiles: ["hello.txt"], test: "passed" },
              }
            : {
                taskId,
                status: "failed",
                summary: "hello.txt did not pass its test.",
                error: { code: "TEST_FAILED", message: "content check failed", retryable: false },
              },
        },
      ],
    };
  }
  return { text: "Task reported." };
}
