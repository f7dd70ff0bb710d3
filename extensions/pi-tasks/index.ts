/**
 * The pi-tasks Pi extension factory. It only registers tools, the `/tasks` command and event
 * handlers; it starts nothing. The lifetime starts on `session_start` and ends on
 * `session_shutdown`. No handler lets an error escape into Pi, and nothing writes to stdout
 * (that would corrupt Pi's RPC stream).
 */
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { formatEndpoint } from "../../src/protocol/endpoint.ts";
import { createExtensionRuntime, type PiContextView } from "./lifecycle.ts";
import { boardLines, STATUS_KEY } from "./status.ts";
import { createTaskTools, errorResult } from "./tools.ts";

const BOARD_MESSAGE = "pi-tasks-board";

function contextView(ctx: ExtensionContext): PiContextView {
  return {
    isIdle: () => ctx.isIdle(),
    hasPendingMessages: () => ctx.hasPendingMessages(),
    branch: () => ctx.sessionManager.getBranch(),
    setStatus: (key, text) => ctx.ui.setStatus(key, text),
    notify: (message, level) => ctx.ui.notify(message, level),
  };
}

function quietly(fn: () => unknown): void {
  try {
    const result = fn();
    if (result instanceof Promise) result.catch(() => undefined);
  } catch {
    // Errors never escape into Pi's event handlers.
  }
}

export default function piTasks(pi: ExtensionAPI): void {
  const { lifecycle: life, gate } = createExtensionRuntime({
    env: process.env,
    sendMessage: (message, options) => pi.sendMessage(message, options),
    appendEntry: (customType, data) => pi.appendEntry(customType, data),
  });

  for (const tool of createTaskTools({ run: (operation) => life.run(operation), current: () => life.current(), requestRefresh: () => life.requestRefresh() })) {
    pi.registerTool({
      name: tool.name,
      label: tool.label,
      description: tool.description,
      promptSnippet: tool.promptSnippet,
      promptGuidelines: tool.promptGuidelines,
      parameters: tool.parameters as never,
      async execute(toolCallId, params, signal) {
        try {
          return await tool.execute(toolCallId, params, signal);
        } catch (error) {
          return errorResult(error);
        }
      },
    });
  }

  pi.registerCommand("tasks", {
    description: "Show every pi-tasks task with role, status, last event, receipts and terminal delivery",
    handler: async (_args, ctx) => {
      let lines: string[];
      try {
        const core = life.current();
        const endpoint = core.endpoint();
        lines = boardLines(core.listTasks(), endpoint === undefined ? undefined : formatEndpoint(endpoint));
      } catch (error) {
        lines = [`pi-tasks: ${error instanceof Error ? error.message : String(error)}`];
      }
      if (ctx.hasUI) {
        quietly(() => ctx.ui.setWidget(STATUS_KEY, lines));
        quietly(() => ctx.ui.notify(lines.join("\n"), "info"));
      } else if (ctx.mode === "print") {
        // Print mode owns stdout for plain text (unlike RPC mode, whose stdout is the JSONL stream).
        quietly(() => process.stdout.write(`${lines.join("\n")}\n`));
      } else {
        quietly(() => pi.sendMessage({ customType: BOARD_MESSAGE, content: lines.join("\n"), display: true }, { triggerTurn: false }));
      }
    },
  });

  pi.on("session_start", (_event, ctx) => quietly(() => life.start(contextView(ctx))));
  pi.on("session_shutdown", async () => {
    try {
      await life.stop();
    } catch {
      // Shutdown must always complete.
    }
  });
  pi.on("turn_end", () => quietly(() => life.requestRefresh()));
  pi.on("agent_end", () => quietly(() => life.requestRefresh()));
  pi.on("agent_settled", () => quietly(() => life.requestRefresh()));
  pi.on("message_end", (event) => quietly(() => life.onMessageEnd(event.message)));
  pi.on("tool_call", (event) => {
    const verdict = gate.check(event.toolName, event.input);
    return verdict === undefined ? undefined : { block: true, reason: verdict.reason };
  });
}
