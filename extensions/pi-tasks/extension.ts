/**
 * The pi-tasks extension's factory: it only registers — the tools, `/tasks` and the handlers of
 * Pi's events; it starts nothing. A Pi run starts on `session_start` and ends on
 * `session_shutdown`. No handler lets an error escape into Pi, and nothing writes to stdout in RPC
 * mode (that would corrupt Pi's RPC stream). Pi loads it through index.ts (its header maps the files).
 */
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { isWorker } from "./gate.ts";
import { createTasksRuntime } from "./lifecycle.ts";
import { createPeerDirectory } from "./peers.ts";
import { registerPiEvents } from "./pi-events.ts";
import { registerSandboxedBash } from "./sandbox-bash.ts";
import { keepPool } from "./specialists.ts";
import { registerTasksCommand } from "./tasks-command.ts";
import { createTaskTools, type ToolDeps, workflowRunnerOf } from "./tools/index.ts";
import type { WorkflowRunner } from "./workflows.ts";

export default function piTasks(pi: ExtensionAPI): void {
  const peers = createPeerDirectory();
  // Bound below: the workflows' runner needs the tools' deps, which need the lifecycle.
  let workflows: WorkflowRunner | undefined;
  const { lifecycle, gate } = createTasksRuntime({
    env: process.env,
    afterPass: () => workflows?.nudge(),
    sendMessage: (message, options) => pi.sendMessage(message, options),
    appendEntry: (customType, data) => pi.appendEntry(customType, data),
  });
  const toolDeps: ToolDeps = {
    run: (operation) => lifecycle.run(operation),
    current: () => lifecycle.current(),
    ready: () => lifecycle.ready(),
    info: () => lifecycle.info(),
    requestRefresh: () => lifecycle.requestRefresh(),
    rememberPeer: (session, endpoint) => peers.remember(session, endpoint),
    spentOn: (taskId) => lifecycle.observer()?.spentOn(taskId),
    wakeModel: (customType, content) =>
      pi.sendMessage({ customType, content, display: true }, { triggerTurn: true, deliverAs: "followUp" }),
  };
  workflows = workflowRunnerOf(toolDeps);
  keepPool(toolDeps);
  for (const tool of createTaskTools(toolDeps, workflows)) pi.registerTool(tool);
  if (isWorker(process.env)) registerSandboxedBash(pi, { core: () => lifecycle.current(), env: process.env });
  registerTasksCommand(pi, lifecycle, peers, workflows);
  registerPiEvents(pi, lifecycle, gate);
}
