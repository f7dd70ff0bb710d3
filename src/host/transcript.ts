/**
 * A spawned worker's log as a person reads it: one Pi RPC record (a JSONL line) in, a few lines of
 * transcript out — what arrived, what the model said, which tool it called with what, what the
 * tool answered, when it went idle. Everything else in the RPC stream (streaming deltas, the
 * whole-transcript `agent_end`) is left to the raw `.rpc.jsonl` beside it.
 */
import { maxTranscriptLineChars } from "../protocol/limits.ts";
import { isRecord } from "../protocol/validate.ts";

function clip(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > maxTranscriptLineChars ? `${flat.slice(0, maxTranscriptLineChars - 1)}…` : flat;
}

function clock(): string {
  return new Date().toISOString().slice(11, 19);
}

/** The text parts of a message's content (a string, or parts with `text`). */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (isRecord(part) && typeof part.text === "string" ? part.text : ""))
    .filter(Boolean)
    .join("\n");
}

/**
 * A pi-tasks message as a person reads it in the transcript: without the trust frame that opens peer
 * mail (its `> ` lines, the same for every message), its event id and expiry, and the quoting around
 * what the peer wrote (its fences, the `│ ` that starts each quoted line), so the task text and the
 * answers are what show.
 */
function withoutFraming(text: string): string {
  return text
    .split("\n")
    .filter((line) => !line.startsWith("> ") && !/^`{3,}$/.test(line.trim()) && !/^- (eventId|expiresAt): /.test(line))
    .map((line) => line.replace(/^│ ?/, "").replace(/ \(quoted; every line of it starts with "[^"]*"\):$/, ":"))
    .join("\n");
}

function assistantLines(message: Record<string, unknown>): string[] {
  const content = Array.isArray(message.content) ? message.content : [];
  const lines: string[] = [];
  for (const part of content) {
    if (!isRecord(part)) continue;
    if (part.type === "text" && typeof part.text === "string" && part.text.trim() !== "") lines.push(`assistant: ${clip(part.text)}`);
    if (part.type === "toolCall" && typeof part.name === "string")
      lines.push(`→ ${part.name} ${clip(JSON.stringify(part.arguments ?? {}))}`);
  }
  if (message.stopReason === "error" && typeof message.errorMessage === "string")
    lines.push(`assistant error: ${clip(message.errorMessage)}`);
  return lines;
}

function messageLines(message: Record<string, unknown>): string[] {
  switch (message.role) {
    case "user":
      return [`user: ${clip(textOf(message.content))}`];
    case "custom":
      return [
        `[${typeof message.customType === "string" ? message.customType : "custom"}] ${clip(withoutFraming(textOf(message.content)))}`,
      ];
    case "assistant":
      return assistantLines(message);
    case "toolResult": {
      const name = typeof message.toolName === "string" ? message.toolName : "tool";
      return [`← ${name} ${message.isError === true ? "error" : "ok"}: ${clip(textOf(message.content))}`];
    }
    default:
      return [];
  }
}

function uiLines(record: Record<string, unknown>): string[] {
  if (record.method === "notify" && typeof record.message === "string") return [`[notify] ${clip(record.message)}`];
  return [];
}

/** The transcript lines of one RPC line (none for records a person need not read). */
export function transcriptLines(line: string): string[] {
  let record: unknown;
  try {
    record = JSON.parse(line);
  } catch {
    return line.trim() === "" ? [] : [`${clock()} ${clip(line)}`];
  }
  if (!isRecord(record)) return [];
  let lines: string[] = [];
  if (record.type === "message_end" && isRecord(record.message)) lines = messageLines(record.message);
  else if (record.type === "extension_ui_request") lines = uiLines(record);
  else if (record.type === "agent_settled") lines = ["— idle —"];
  else if (record.type === "response" && record.success === false) lines = [`rpc error: ${clip(String(record.error ?? ""))}`];
  return lines.map((text) => `${clock()} ${text}`);
}
