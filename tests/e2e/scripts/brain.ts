/**
 * Scenario module that asks the test process for every reply: it POSTs the turn to
 * `PI_TASKS_TEST_BRAIN` (served by `tests/helpers/pi-process.ts`) and returns the JSON answer.
 * The test's `brain(turn)` function is the model; it can also see and record every turn.
 */
import type { ScriptReply, ScriptTurn } from "../../../src/demo/scripted-model.ts";

export async function respond(turn: ScriptTurn): Promise<ScriptReply> {
  const url = process.env.PI_TASKS_TEST_BRAIN;
  if (!url) throw new Error("PI_TASKS_TEST_BRAIN is not set");
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(turn) });
  if (!response.ok) return { text: `brain error ${response.status}` };
  return (await response.json()) as ScriptReply;
}
