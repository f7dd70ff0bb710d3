/**
 * Bench worker scenario for the scripted model: every turn answers with a short text and calls no
 * tool, so the worker is idle again right after each wake and the next assignment can be inserted
 * at once. The bench measures insertion, not the model.
 */
import type { ScriptReply, ScriptTurn } from "../../src/demo/scripted-model.ts";

export function respond(_turn: ScriptTurn): ScriptReply {
  return { text: "Noted." };
}
