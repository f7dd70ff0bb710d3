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

/** What pi-tasks puts before every quoted line of peer text (extensions/pi-tasks/quote.ts). */
const QUOTED_LINE = "│ ";

/** The free text of a rendered task event: its first quoted block, without the quote marks. */
export function body(message: Message | undefined): string {
  const lines = (message?.text ?? "").split("\n");
  const start = lines.findIndex((line) => line.startsWith(QUOTED_LINE));
  if (start < 0) return "";
  const end = lines.findIndex((line, index) => index > start && !line.startsWith(QUOTED_LINE));
  return lines
    .slice(start, end < 0 ? undefined : end)
    .map((line) => line.slice(QUOTED_LINE.length))
    .join("\n")
    .trim();
}

/** Whether the model already called `tool` (optionally with arguments containing `fragment`). */
export function called(turn: ScriptTurn, tool: string, fragment = ""): boolean {
  return turn.messages.some(
    (message) => message.role === "assistant" && message.text.includes(`[toolCall ${tool} `) && message.text.includes(fragment),
  );
}
