/**
 * Pi's events, wired to the lifecycle (lifecycle.ts) and the worker gate (gate.ts): one handler per
 * event Pi sends — the session's start and shutdown, the agent's runs, turns and tool calls (the
 * observer's input), each message's end, and `tool_call`, where the gate and the grants decide.
 * No handler lets an error escape into Pi (`quietly`); shutdown always completes.
 */
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import type { WorkerGate } from "./gate.ts";
import type { Lifecycle } from "./lifecycle.ts";
import type { PiContextView } from "./lifecycle-deps.ts";

/** What the lifecycle sees of Pi's context at `session_start`. */
function contextView(ctx: ExtensionContext): PiContextView {
  return {
    cwd: ctx.cwd,
    isIdle: () => ctx.isIdle(),
    hasPendingMessages: () => ctx.hasPendingMessages(),
    branch: () => ctx.sessionManager.getBranch(),
    setStatus: (key, text) => ctx.ui.setStatus(key, text),
    setWidget: (key, lines) => ctx.ui.setWidget(key, lines),
    notify: (message, level) => ctx.ui.notify(message, level),
    abort: () => ctx.abort(),
    // Pairing asks a person: only the interactive TUI has one (RPC dialogs go to a program).
    ...(ctx.mode === "tui" && ctx.hasUI
      ? { confirm: (title: string, message: string, timeoutMs: number) => ctx.ui.confirm(title, message, { timeout: timeoutMs }) }
      : {}),
  };
}

/** Runs `fn`; neither its throw nor its rejection reaches Pi. */
export function quietly(fn: () => unknown): void {
  try {
    const result = fn();
    if (result instanceof Promise) result.catch(() => undefined);
  } catch {
    // Errors never escape into Pi's event handlers.
  }
}

/**
 * Where the notice of a quit goes (quit-notice.ts): stderr, in the interactive TUI only — Pi has
 * stopped drawing by then, so the lines stand in the shell; in RPC, print and json modes, nowhere.
 */
function quitSpeaker(ctx: { readonly mode?: string }): ((text: string) => void) | undefined {
  try {
    if (ctx.mode !== "tui") return undefined;
  } catch {
    return undefined; // a context gone stale says nothing
  }
  return (text) => {
    process.stderr.write(text);
  };
}

/** Registers the handler of every Pi event pi-tasks listens to. */
export function registerPiEvents(pi: ExtensionAPI, lifecycle: Lifecycle, gate: WorkerGate): void {
  pi.on("session_start", (_event, ctx) => quietly(() => lifecycle.start(contextView(ctx))));
  pi.on("session_shutdown", async (event, ctx) => {
    try {
      await lifecycle.stop(event.reason, quitSpeaker(ctx));
    } catch {
      // Shutdown must always complete.
    }
  });
  pi.on("agent_start", () => quietly(() => lifecycle.observer()?.runStarted()));
  pi.on("tool_execution_start", (event) => quietly(() => lifecycle.observer()?.toolStarted(event.toolName, event.args)));
  pi.on("tool_execution_end", (event) =>
    quietly(() => {
      gate.ended(event.toolCallId, event.isError);
      lifecycle.observer()?.toolEnded();
    }),
  );
  pi.on("turn_end", () =>
    quietly(() => {
      lifecycle.observer()?.turnEnded();
      lifecycle.requestRefresh();
    }),
  );
  pi.on("agent_end", () => quietly(() => lifecycle.requestRefresh()));
  pi.on("agent_settled", () =>
    quietly(() => {
      lifecycle.observer()?.settled();
      lifecycle.requestRefresh();
    }),
  );
  pi.on("message_end", (event) =>
    quietly(() => {
      lifecycle.onMessageEnd(event.message);
      lifecycle.observer()?.messageEnded(event.message);
    }),
  );
  pi.on("tool_call", (event, ctx) => {
    const verdict = gate.check(event.toolName, event.input, event.toolCallId) ?? lifecycle.checkGrant(event.toolName, event.input, ctx.cwd);
    return verdict === undefined ? undefined : { block: true, reason: verdict.reason };
  });
}
