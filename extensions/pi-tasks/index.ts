/**
 * pi-tasks for Pi: delegate tasks between Pi sessions through a memory-only relay.
 *
 * This factory only registers; it starts nothing. The lifetime starts on `session_start` and ends
 * on `session_shutdown`. No handler lets an error escape into Pi, and nothing writes to stdout in
 * RPC mode (that would corrupt Pi's RPC stream).
 *
 * Files:
 * - lifecycle.ts  one lifetime per Pi session: session name, relay (embedded when none runs),
 *                 configured core, presenter, scheduler, footer; the worker gate wired to it
 * - gate.ts       the worker tool gate (`PI_TASK_WORKER=1`), fail-closed in `tool_call`
 * - presenter.ts  task events into the Pi session (insert, wake, archive, loss records)
 * - scheduler.ts  background refresh cadence and the `watch-v1` doorbell
 * - footer.ts     the status line: counts when healthy, true failure labels
 * - board.ts      the `/tasks` board and `/tasks <id>` details; describe.ts: states in plain words
 * - peers.ts      session names of peer endpoints (display only)
 * - trust.ts      identity, paired peers, PI_TASKS_TRUST and the pairing dialog (the human decides)
 * - questions.ts  questions for the person: announced, listed on /tasks, answered with /tasks answer
 * - reassign.ts   /tasks reassign: the person moves an orphaned task to another worker
 * - audit.ts      /tasks audit: one timeline joining both sides' views, gaps named
 * - render.ts     the text the model reads
 * - tools/        one file per `agent_task_*` tool (tools/index.ts lists them)
 */
import type { ExtensionAPI, ExtensionCommandContext, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { boardLines, detailLines, findByPrefix } from "./board.ts";
import { createTasksRuntime, type PiContextView } from "./lifecycle.ts";
import { createPeerDirectory } from "./peers.ts";
import { answerCommand } from "./questions.ts";
import { reassignCommand } from "./reassign.ts";
import { auditCommand } from "./audit.ts";
import { createTaskTools, errorResult } from "./tools/index.ts";

const BOARD_MESSAGE = "pi-tasks-board";

function contextView(ctx: ExtensionContext): PiContextView {
  return {
    cwd: ctx.cwd,
    isIdle: () => ctx.isIdle(),
    hasPendingMessages: () => ctx.hasPendingMessages(),
    branch: () => ctx.sessionManager.getBranch(),
    setStatus: (key, text) => ctx.ui.setStatus(key, text),
    notify: (message, level) => ctx.ui.notify(message, level),
    abort: () => ctx.abort(),
    // Pairing asks a person: only the interactive TUI has one (RPC dialogs go to a program).
    ...(ctx.mode === "tui" && ctx.hasUI ? { confirm: (title: string, message: string, timeoutMs: number) => ctx.ui.confirm(title, message, { timeout: timeoutMs }) } : {}),
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
  for (const tool of tools) {
    pi.registerTool({
      name: tool.name,
      label: tool.label,
      description: tool.description,
      promptSnippet: tool.promptSnippet,
      promptGuidelines: tool.promptGuidelines,
      parameters: tool.parameters as never,
      async execute(toolCallId, params, signal, _onUpdate, ctx) {
        try {
          const model = ctx?.model;
          return await tool.execute(toolCallId, params, signal, { cwd: ctx?.cwd, ...(model === undefined ? {} : { model: { provider: model.provider, id: model.id } }) });
        } catch (error) {
          return errorResult(error);
        }
      },
    });
  }

  async function board(args: string): Promise<string[]> {
    await life.ready();
    const info = life.info();
    let core;
    try {
      core = life.current();
    } catch (error) {
      return [`pi-tasks: ${error instanceof Error ? error.message : String(error)}`];
    }
    if (info !== undefined) await peers.refresh(info);
    const tasks = core.listTasks();
    const wanted = args.trim();
    if (wanted === "") return boardLines(info, core.endpoint(), tasks, peers.names(), Date.now(), core.rejections());
    const found = findByPrefix(tasks, wanted);
    if (!Array.isArray(found)) return detailLines(found, peers.names(), Date.now());
    return found.length === 0 ? [`pi-tasks: no task ${wanted}`] : [`pi-tasks: ${wanted} matches ${found.length} tasks; give more of the id`];
  }

  function show(lines: string[], ctx: ExtensionCommandContext): void {
    const text = lines.join("\n");
    if (ctx.hasUI) quietly(() => ctx.ui.notify(text, "info"));
    // Print mode owns stdout for plain text (unlike RPC mode, whose stdout is the JSONL stream).
    else if (ctx.mode === "print") quietly(() => process.stdout.write(`${text}\n`));
    else quietly(() => pi.sendMessage({ customType: BOARD_MESSAGE, content: text, display: true }, { triggerTurn: false }));
  }

  /** `/tasks answer …`: the person answers a waiting question (dialogs where Pi has a UI). */
  async function answer(words: string[], ctx: ExtensionCommandContext): Promise<string[]> {
    await life.ready();
    const dialog = ctx.hasUI
      ? { select: (title: string, options: string[]) => ctx.ui.select(title, options), input: (title: string, placeholder: string) => ctx.ui.input(title, placeholder) }
      : undefined;
    const lines = await answerCommand(words, { current: () => life.current(), run: (operation) => life.run(operation), dialog });
    life.requestRefresh();
    return lines;
  }

  pi.registerCommand("tasks", {
    description:
      "pi-tasks board: this session, its relay, questions waiting for you and every task in plain words; /tasks <id> for one task; /tasks answer [<question id>] [<text>] to answer a question; /tasks reassign <task id> [<session>] to move an orphaned task; /tasks audit <task id> [--json] for one timeline of both sides' views",
    handler: async (args, ctx) => {
      let lines: string[];
      try {
        const words = args.trim().split(/\s+/).filter((word) => word !== "");
        if (words[0] === "answer") lines = await answer(words.slice(1), ctx);
        else if (words[0] === "reassign") lines = await reassignCommand(words.slice(1), { current: () => life.current(), run: (operation) => life.run(operation), info: () => life.info() });
        else if (words[0] === "audit") {
          await life.ready();
          lines = await auditCommand(words.slice(1), { current: () => life.current(), requestRefresh: () => life.requestRefresh(), appendEntry: (type, data) => pi.appendEntry(type, data) });
        }
        else lines = await board(args);
      } catch (error) {
        lines = [`pi-tasks: ${error instanceof Error ? error.message : String(error)}`];
      }
      show(lines, ctx);
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
