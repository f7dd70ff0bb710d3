/**
 * pi-tasks for Pi: delegate tasks between Pi sessions through a memory-only relay.
 *
 * This factory only registers — the tools, `/tasks` and the handlers of Pi's events; it starts
 * nothing. A Pi run starts on `session_start` and ends on `session_shutdown`. No handler lets an
 * error escape into Pi, and nothing writes to stdout in RPC mode (that would corrupt Pi's RPC stream).
 *
 * Files:
 * - pi-events.ts  the handler of each Pi event (session start and shutdown, agent runs, turns, tool
 *                 calls, message ends, the `tool_call` gate), none letting an error into Pi
 * - tasks-command.ts  `/tasks` registered with Pi, and where its output goes (the board entry)
 * - lifecycle.ts  which Pi run is current (one per Pi session); the worker gate wired to it;
 *                 lifecycle-deps.ts: what it and each Pi run are given (Pi's context view, deps)
 * - pi-run.ts     what a Pi run is made of: session name, relay (embedded when none runs),
 *                 configured core, presenter, scheduler, mail watch; its start and close
 * - gate.ts       the worker tool gate (`PI_TASK_WORKER=1`), fail-closed in `tool_call`
 * - sandbox-bash.ts  a worker's bash: its commands in an OS sandbox (bubblewrap) under a grant
 * - profiles.ts   worker profiles (model, grant, instructions) from the home and a trusted project
 * - grants.ts     the person's default grant for sent tasks; every call checked against the grants
 *                 of the tasks this session works on; grant-budgets.ts ends a task whose budget ran out
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
 * - commands.ts   `/tasks` and its subcommands (board, answer, grant, reassign, audit, identity, pairing, relay)
 * - board.ts      the `/tasks` board and `/tasks <id>` details; describe.ts: states in plain words
 * - peers.ts      session names of peer endpoints (display only)
 * - trust.ts      identity, paired peers, PI_TASKS_TRUST and the pairing dialog (the human decides)
 * - questions.ts  questions for the person: announced, listed on /tasks, answered with /tasks answer
 * - grant-requests.ts  a worker's request for more: announced, listed on /tasks, decided by the person with /tasks grant
 * - reassign.ts   /tasks reassign: the person moves an orphaned task to another worker
 * - audit.ts      /tasks audit: one timeline joining both sides' views, gaps named
 * - delegate.ts   one task delegated as send and workflows do (to an endpoint, or a specialist: specialists.ts)
 * - workflows.ts  agent_task_workflow's runner: all at once, or a chain, one wake at the end
 * - start-worker.ts  starting a worker Pi (spawn, specialists): model, workspace, spawn cap
 * - render.ts     the text the model reads
 * - traces.ts     OpenTelemetry spans of the tasks this session owns, linked across hops (off unless OTEL_* asks)
 * - tools/        one file per `agent_task_*` tool, typed with Pi's `ToolDefinition` (tools/index.ts
 *                 lists them; tools/shared.ts holds the one error boundary of tool execution)
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

export { BOARD_ENTRY } from "./tasks-command.ts";

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
