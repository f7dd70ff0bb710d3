/**
 * pi-tasks for Pi: delegate tasks between Pi sessions through a memory-only relay.
 *
 * This factory only registers; it starts nothing. A Pi run starts on `session_start` and ends on
 * `session_shutdown`. No handler lets an error escape into Pi, and nothing writes to stdout in
 * RPC mode (that would corrupt Pi's RPC stream).
 *
 * Files:
 * - lifecycle.ts  which Pi run is current (one per Pi session); the worker gate wired to it;
 *                 lifecycle-deps.ts: what it and each Pi run are given (Pi's context view, deps)
 * - pi-run.ts     what a Pi run is made of: session name, relay (embedded when none runs),
 *                 configured core, presenter, scheduler, mail watch; its start and close
 * - gate.ts       the worker tool gate (`PI_TASK_WORKER=1`), fail-closed in `tool_call`
 * - profiles.ts   worker profiles (model, grant, instructions) from the home and a trusted project
 * - grants.ts     the person's default grant for sent tasks; every call checked against the grants
 *                 of the tasks this session works on; budgets.ts ends a task whose budget ran out
 * - work.ts       the tasks this session works on whose result is not submitted (reminders, grants, budgets)
 * - presenter.ts  task events into the Pi session (insert, wake, archive, loss records)
 * - observer.ts   Pi's agent events for the tasks this session works on: activity.ts (what the
 *                 model is doing, reported to the origin; the heartbeat), reminders.ts (a task
 *                 ended without a report: one reminder, then the origin is told)
 * - scheduler.ts  background refresh cadence and the `watch-v1` doorbell
 * - footer.ts     the status line: the counts first, then a failure's true label (failures.ts: its
 *                 words, and its fix on /tasks)
 * - short-ids.ts  the short ids people read; a typed id (full or a unique prefix) resolved once for
 *                 the tools, the gate and every /tasks command
 * - waits.ts      mail recorded but not taken at once: a short wait for it to leave (a peer's proof),
 *                 and what it waits for, in words (describe.ts `waitWords`)
 * - widget.ts     the live workers widget: one line per reporting worker, rewritten after each pass
 * - spawn-watch.ts  workers this Pi spawned are orphaned at once when their process exits
 * - commands.ts   `/tasks` and its subcommands (board, answer, reassign, audit, identity, pairing, relay)
 * - board.ts      the `/tasks` board and `/tasks <id>` details; describe.ts: states in plain words
 * - peers.ts      session names of peer endpoints (display only)
 * - trust.ts      identity, paired peers, PI_TASKS_TRUST and the pairing dialog (the human decides)
 * - questions.ts  questions for the person: announced, listed on /tasks, answered with /tasks answer
 * - reassign.ts   /tasks reassign: the person moves an orphaned task to another worker
 * - audit.ts      /tasks audit: one timeline joining both sides' views, gaps named
 * - render.ts     the text the model reads
 * - traces.ts     OpenTelemetry spans of the tasks this session owns, linked across hops (off unless OTEL_* asks)
 * - tools/        one file per `agent_task_*` tool, typed with Pi's `ToolDefinition` (tools/index.ts
 *                 lists them; tools/shared.ts holds the one error boundary of tool execution)
 */
import type { ExtensionAPI, ExtensionCommandContext, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { Text } from "@earendil-works/pi-tui";
import { type CommandDeps, TASKS_DESCRIPTION, tasksCommand } from "./commands.ts";
import { createTasksRuntime, type PiContextView } from "./lifecycle.ts";
import { createPeerDirectory } from "./peers.ts";
import { createTaskTools } from "./tools/index.ts";

/** The session entry that keeps a `/tasks` output in the TUI's scrollback (never in the model's context). */
export const BOARD_ENTRY = "pi-tasks-board";

interface BoardEntryData {
  readonly lines: readonly string[];
}

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

function quietly(fn: () => unknown): void {
  try {
    const result = fn();
    if (result instanceof Promise) result.catch(() => undefined);
  } catch {
    // Errors never escape into Pi's event handlers.
  }
}

export default function piTasks(pi: ExtensionAPI): void {
  const peers = createPeerDirectory();
  const { lifecycle: life, gate } = createTasksRuntime({
    env: process.env,
    sendMessage: (message, options) => pi.sendMessage(message, options),
    appendEntry: (customType, data) => pi.appendEntry(customType, data),
  });

  const tools = createTaskTools({
    run: (operation) => life.run(operation),
    current: () => life.current(),
    ready: () => life.ready(),
    info: () => life.info(),
    requestRefresh: () => life.requestRefresh(),
    rememberPeer: (session, endpoint) => peers.remember(session, endpoint),
  });
  for (const tool of tools) pi.registerTool(tool);

  /**
   * Where `/tasks` output goes: in the TUI a session entry that stays in the scrollback (our
   * renderer draws it; the model never sees it); over RPC a notification to the client; in print
   * mode `process.stdout` (which Pi hands to stderr there: its stdout is the model's answer);
   * elsewhere the entry alone.
   */
  function show(lines: string[], ctx: ExtensionCommandContext): void {
    const text = lines.join("\n");
    if (ctx.mode === "print") quietly(() => process.stdout.write(`${text}\n`));
    else if (ctx.hasUI && ctx.mode !== "tui") quietly(() => ctx.ui.notify(text, "info"));
    else quietly(() => pi.appendEntry<BoardEntryData>(BOARD_ENTRY, { lines }));
  }

  pi.registerEntryRenderer<BoardEntryData>(BOARD_ENTRY, (entry) => new Text((entry.data?.lines ?? []).join("\n"), 1, 0));

  const commandDeps: CommandDeps = { life, peers, appendEntry: (type, data) => pi.appendEntry(type, data) };
  pi.registerCommand("tasks", {
    description: TASKS_DESCRIPTION,
    handler: async (args, ctx) => {
      // Where Pi has a UI, a dialog asks for a missing choice or answer text.
      const dialog = ctx.hasUI
        ? {
            select: (title: string, options: string[]) => ctx.ui.select(title, options),
            input: (title: string, placeholder: string) => ctx.ui.input(title, placeholder),
          }
        : undefined;
      show(await tasksCommand(args, commandDeps, dialog), ctx);
      life.requestRefresh();
    },
  });

  pi.on("session_start", (_event, ctx) => quietly(() => life.start(contextView(ctx))));
  pi.on("session_shutdown", async (event) => {
    try {
      await life.stop(event.reason);
    } catch {
      // Shutdown must always complete.
    }
  });
  pi.on("agent_start", () => quietly(() => life.observer()?.runStarted()));
  pi.on("tool_execution_start", (event) => quietly(() => life.observer()?.toolStarted(event.toolName, event.args)));
  pi.on("tool_execution_end", (event) =>
    quietly(() => {
      gate.ended(event.toolCallId, event.isError);
      life.observer()?.toolEnded();
    }),
  );
  pi.on("turn_end", () =>
    quietly(() => {
      life.observer()?.turnEnded();
      life.requestRefresh();
    }),
  );
  pi.on("agent_end", () => quietly(() => life.requestRefresh()));
  pi.on("agent_settled", () =>
    quietly(() => {
      life.observer()?.settled();
      life.requestRefresh();
    }),
  );
  pi.on("message_end", (event) =>
    quietly(() => {
      life.onMessageEnd(event.message);
      life.observer()?.messageEnded(event.message);
    }),
  );
  pi.on("tool_call", (event, ctx) => {
    const verdict = gate.check(event.toolName, event.input, event.toolCallId) ?? life.checkGrant(event.toolName, event.input, ctx.cwd);
    return verdict === undefined ? undefined : { block: true, reason: verdict.reason };
  });
}
