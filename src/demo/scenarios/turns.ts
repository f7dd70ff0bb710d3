/** Small readers over what a scripted model sees (shared by the demo scenarios). */
import type { ScriptTurn } from "../scripted-model.ts";

export type Message = ScriptTurn["messages"][number];

/** The newest message containing `marker`, or undefined. */
export function latest(turn: ScriptTurn, marker: string): Message | undefined {
  return [...turn.messages].reverse().find((message) => message.text.includes(marker));
}

/** A `- name: value` field of rendered task text. */
export function field(message: Message | undefined, name: string): string | undefined {
  return message?.text.match(new RegExp(`^- ${name}: (.+)$`, "m"))?.[1]?.trim();
}

/** The free text of a rendered task event (after its field block). */
export function body(message: Message | undefined): string {
  const text = message?.text ?? "";
  const start = text.indexOf("\n\n");
  const rest = start < 0 ? "" : text.slice(start + 2);
  const end = rest.indexOf("\n\n");
  return (end < 0 ? rest : rest.slice(0, end)).trim();
}

/** Whether the model already called `tool` (optionally with arguments containing `fragment`). */
export function called(turn: ScriptTurn, tool: string, fragment = ""): boolean {
  return turn.messages.some((message) => message.role === "assistant" && message.text.includes(`[toolCall ${tool} `) && message.text.includes(fragment));
}
