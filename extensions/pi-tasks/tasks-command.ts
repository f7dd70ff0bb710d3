/**
 * The `/tasks` command registered with Pi: its handler (the subcommands are commands.ts's), the
 * dialog it may ask through, and where its output goes — a board entry kept in the TUI's
 * scrollback (drawn by its own renderer, never in the model's context), a notification over RPC,
 * or stdout in print mode.
 */
import type { ExtensionAPI, ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import { Text } from "@earendil-works/pi-tui";
import { type CommandDeps, TASKS_DESCRIPTION, tasksCommand } from "./commands.ts";
import { BOARD_ENTRY } from "./board-entry.ts";
import type { Lifecycle } from "./lifecycle.ts";
import { quietly } from "./pi-events.ts";
import type { PeerDirectory } from "./peers.ts";
import type { WorkflowRunner } from "./workflows.ts";

interface BoardEntryData {
  readonly lines: readonly string[];
}

/**
 * Where `/tasks` output goes: in the TUI a session entry that stays in the scrollback (our
 * renderer draws it; the model never sees it); over RPC a notification to the client; in print
 * mode `process.stdout` (which Pi hands to stderr there: its stdout is the model's answer);
 * elsewhere the entry alone.
 */
function show(pi: ExtensionAPI, lines: string[], ctx: ExtensionCommandContext): void {
  const text = lines.join("\n");
  if (ctx.mode === "print") quietly(() => process.stdout.write(`${text}\n`));
  else if (ctx.hasUI && ctx.mode !== "tui") quietly(() => ctx.ui.notify(text, "info"));
  else quietly(() => pi.appendEntry<BoardEntryData>(BOARD_ENTRY, { lines }));
}

/** Registers `/tasks` and the renderer of its board entries. */
export function registerTasksCommand(pi: ExtensionAPI, lifecycle: Lifecycle, peers: PeerDirectory, workflows: WorkflowRunner): void {
  pi.registerEntryRenderer<BoardEntryData>(BOARD_ENTRY, (entry) => new Text((entry.data?.lines ?? []).join("\n"), 1, 0));

  const commandDeps: CommandDeps = { life: lifecycle, peers, workflows, appendEntry: (type, data) => pi.appendEntry(type, data) };
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
      show(pi, await tasksCommand(args, commandDeps, dialog), ctx);
      lifecycle.requestRefresh();
    },
  });
}
