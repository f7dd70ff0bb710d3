/**
 * Origin scenario for the delegation-peer bench (bench/measure/delegation-peers.ts). The bench's
 * prompt is `bench-delegate <json {tool, arguments}>`: the model calls that delegation tool with
 * those arguments, and after the tool result answers with text. Peers whose children share the
 * origin's environment (pi-subagents runs them in the origin's process; Pi's example spawns `pi`
 * with the origin's environment) load this same scenario in the child: any turn whose latest user
 * message is not a bench prompt is a child's, answered by bench/scenarios/peer-child.ts.
 */
import type { ScriptReply, ScriptTurn } from "../../src/demo/scripted-model.ts";
import { respond as childRespond } from "./peer-child.ts";

export const DELEGATE_PREFIX = "bench-delegate ";

export interface DelegationCall {
  readonly tool: string;
  readonly arguments: Record<string, unknown>;
}

/** The prompt that makes the origin call `call.tool` with `call.arguments`. */
export function delegatePrompt(call: DelegationCall): string {
  return `${DELEGATE_PREFIX}${JSON.stringify(call)}`;
}

export function respond(turn: ScriptTurn): ScriptReply {
  const at = turn.messages.findLastIndex((message) => message.role === "user");
  const prompt = turn.messages[at];
  if (prompt === undefined || !prompt.text.startsWith(DELEGATE_PREFIX)) return childRespond(turn);
  const delegated = turn.messages.slice(at + 1).some((message) => message.role === "assistant" && message.text.includes("[toolCall "));
  if (delegated) return { text: "Delegated; the child answered." };
  const call = JSON.parse(prompt.text.slice(DELEGATE_PREFIX.length)) as DelegationCall;
  return { tools: [{ name: call.tool, arguments: call.arguments }] };
}
