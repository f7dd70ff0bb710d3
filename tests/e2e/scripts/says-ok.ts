/**
 * Answers every turn with one fixed line (print and json mode runs), after
 * `PI_TASKS_TEST_REPLY_DELAY_MS` (default 0) so the extension's background work is under way.
 * With `PI_TASKS_TEST_REPLY_MARK` set, writes the reply time (ms since the epoch) to that file, so
 * a test can measure how long Pi takes to exit after its last reply.
 */
import { writeFileSync } from "node:fs";
import type { ScriptReply } from "../../../src/demo/scripted-model.ts";

export const REPLY = "pi-tasks print-mode reply";

export async function respond(): Promise<ScriptReply> {
  const delay = Number(process.env.PI_TASKS_TEST_REPLY_DELAY_MS ?? 0);
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  const mark = process.env.PI_TASKS_TEST_REPLY_MARK;
  if (mark) writeFileSync(mark, String(Date.now()));
  return { text: REPLY };
}
