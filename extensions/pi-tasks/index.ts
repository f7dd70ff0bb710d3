/**
 * pi-tasks for Pi: delegate tasks between Pi sessions through a memory-only relay.
 *
 * What Pi loads: the extension (extension.ts) as `npm run build` made it, `dist/extension.js`,
 * loaded by the runtime's own module loader (one file, parsed once), not module by module through
 * Pi's jiti — issue 41's start-up figure (docs/performance.md). The few things it takes from Pi's
 * own modules at run time are handed to it (pi-host.ts). From the sources instead (extension.ts
 * through jiti) when `PI_TASKS_FROM_SOURCE=1`, or when there is no build.
 *
 * Files:
 * - extension.ts  the factory: registers the tools, `/tasks` and the handlers of Pi's events; starts nothing
 * - pi-host.ts    what the built extension takes from Pi's modules, handed over by this loader
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
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import * as piCodingAgent from "@earendil-works/pi-coding-agent";
import * as piTui from "@earendil-works/pi-tui";
import { leavePiHost } from "./pi-host.ts";

export { BOARD_ENTRY } from "./board-entry.ts";

/** The extension as `npm run build` made it. */
const BUILT = fileURLToPath(new URL("../../dist/extension.js", import.meta.url));

type Factory = (pi: ExtensionAPI) => void;

export default async function piTasks(pi: ExtensionAPI): Promise<void> {
  if (process.env.PI_TASKS_FROM_SOURCE === "1" || !existsSync(BUILT)) {
    const fromSource = (await import("./extension.ts")) as { default: Factory };
    fromSource.default(pi);
    return;
  }
  leavePiHost({ "@earendil-works/pi-coding-agent": piCodingAgent, "@earendil-works/pi-tui": piTui });
  // The runtime's own `require` of an ES module (Node ≥ 22.12, Bun): one parse, no jiti.
  const built = createRequire(import.meta.url)(BUILT) as { default: Factory };
  built.default(pi);
}
