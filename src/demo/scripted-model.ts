/**
 * A Pi extension for the demo and tests: a faux model provider (`faux/faux-1`) whose every reply comes from the
 * scenario module named by `PI_TASKS_TEST_SCRIPT`. A scenario exports
 * `respond(turn) → {text} | {tools: [{name, arguments}]}`, where `turn.messages` is what the model
 * sees (role + flattened text) and `turn.call` counts LLM calls in this process.
 * Never write to stdout here: it is Pi's RPC stream.
 */
import { fauxAssistantMessage, fauxProvider, fauxToolCall } from "@earendil-works/pi-ai";

export interface ScriptTurn {
  readonly call: number;
  readonly messages: readonly { readonly role: string; readonly text: string }[];
  /** The system prompt's sections (Pi 1.6 keeps them on the leading system message): what `--append-system-prompt` adds is there. */
  readonly system?: string;
}

export type ScriptReply =
  | { readonly text: string }
  | { readonly tools: readonly { readonly name: string; readonly arguments: Record<string, unknown> }[] };

function flatten(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => {
      if (part?.type === "text") return String(part.text);
      if (part?.type === "toolCall") return `[toolCall ${part.name} ${JSON.stringify(part.arguments)}]`;
      return "";
    })
    .join("\n");
}

const MAX_SCRIPTED_CALLS = 500;

export default async function scriptedModel(pi: any): Promise<void> {
  const path = process.env.PI_TASKS_TEST_SCRIPT;
  if (!path) throw new Error("PI_TASKS_TEST_SCRIPT is not set");
  const script = (await import(path)) as { respond(turn: ScriptTurn): ScriptReply | Promise<ScriptReply> };
  const faux = fauxProvider({ provider: "faux", models: [{ id: "faux-1" }] });
  let call = 0;
  const step = async (context: { messages: { role: string; content: unknown; sections?: Record<string, string | null> }[] }) => {
    call += 1;
    const messages = context.messages.map((message) => ({ role: message.role, text: flatten(message.content) }));
    const system = context.messages
      .filter((message) => message.role === "system")
      .flatMap((message) => Object.values(message.sections ?? {}).filter((section): section is string => typeof section === "string"))
      .join("\n");
    const reply = await script.respond({ call, messages, system });
    if ("tools" in reply) {
      return fauxAssistantMessage(
        reply.tools.map((tool, index) => fauxToolCall(tool.name, tool.arguments as never, { id: `call-${call}-${index}` })),
        { stopReason: "toolUse" },
      );
    }
    return fauxAssistantMessage(reply.text);
  };
  faux.setResponses(Array.from({ length: MAX_SCRIPTED_CALLS }, () => step as never));
  pi.registerProvider(faux.provider);
}
