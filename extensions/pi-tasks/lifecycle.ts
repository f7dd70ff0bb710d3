/**
 * Which Pi run is the current one: one per Pi session, started on `session_start`, fenced and
 * discarded on `session_shutdown` (pi-run.ts says what a Pi run is made of; lifecycle-deps.ts what
 * both are given). Tools and commands reach the current Pi run through here; the worker gate is
 * wired to it. Nothing here throws into Pi's event handlers.
 */
import { stopOwnedWorkers } from "../../src/host/stop.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import { TaskError, toTaskError } from "../../src/protocol/errors.ts";
import { failureLabel, type FooterFailure } from "./failures.ts";
import { createStatusLine, STARTING_LABEL } from "./footer.ts";
import { createWorkerGate, isWorker, type WorkerGate } from "./gate.ts";
import { grantVerdict } from "./grants.ts";
import type { AgentObserver } from "./observer.ts";
import { createWorkerWidget, workerWidgetLines } from "./widget.ts";
import type { PiPresenter } from "./presenter.ts";
import type { LifecycleDeps, PiContextView } from "./lifecycle-deps.ts";
import { closePiRun, type PiRun, piRunLabel, type SessionInfo, startPiRun } from "./pi-run.ts";

export type { LifecycleDeps, PiContextView } from "./lifecycle-deps.ts";
export { AUTO_REASSIGN_VARIABLE, CANCEL_ABORTS_VARIABLE, MAX_DEPTH_VARIABLE, type SessionInfo } from "./pi-run.ts";

export interface Lifecycle {
  start(context: PiContextView): void;
  /** Ends the Pi run; when Pi quits, also stops the workers this Pi spawned without keeping them. */
  stop(reason?: string): Promise<void>;
  requestRefresh(): void;
  /** The current Pi run's core, or the typed reason there is none. */
  current(): TaskCore;
  /** Runs an operation on the current Pi run once start-up finished. */
  run<T>(operation: (core: TaskCore) => Promise<T>): Promise<T>;
  /** Resolves when start-up finished (successfully or not). */
  ready(): Promise<void>;
  /** The session name and relay, once start-up found them. */
  info(): SessionInfo | undefined;
  /** The failure the footer shows now (after the counts), for `/tasks` to name with its fix. */
  failure(): FooterFailure | undefined;
  presenter(): PiPresenter | undefined;
  onMessageEnd(message: unknown): void;
  /** A block reason when a model's tool call is outside the grant of a task this session works on (fail-closed). */
  checkGrant(toolName: string, input: unknown, cwd: string): { readonly code: string; readonly reason: string } | undefined;
  /** Pi's agent events for the tasks this session works on (activity, reminders), while a Pi run runs. */
  observer(): AgentObserver | undefined;
  /** Re-renders the footer (after something changed outside a pass). */
  refreshFooter(): void;
}

export function createLifecycle(deps: LifecycleDeps): Lifecycle {
  const status = createStatusLine();
  const widget = createWorkerWidget();
  let running: PiRun | undefined;
  let starting: Promise<void> | undefined;
  let startError: TaskError | undefined;
  let startCount = 0;

  function footer(): void {
    if (running === undefined) return;
    status.show(piRunLabel(running));
    widget.show(workerWidgetLines(running.configured.current().listTasks(), Date.now()));
  }

  function start(view: PiContextView): void {
    const token = (startCount += 1);
    status.bind(view);
    widget.bind(view);
    startError = undefined;
    deps.gate.reset();
    status.show(STARTING_LABEL);
    const stale = () => token !== startCount;
    const install = (run: PiRun) => {
      running = run;
      footer();
    };
    starting = startPiRun(deps, view, { stale, footer, install }).catch((error: unknown) => {
      if (stale()) return;
      startError = toTaskError(error);
      status.show(failureLabel(startError, undefined));
    });
  }

  async function stop(reason?: string): Promise<void> {
    startCount += 1;
    const state = running;
    // Workers spawned to stop with this Pi: their holders also notice the Pi is gone, this is sooner.
    // Best effort: Pi is exiting and has nowhere left to show a failure; a holder whose Pi is gone
    // stops its worker by itself.
    const workers = reason === "quit" ? stopOwnedWorkers(deps.env, process.pid).catch(() => []) : Promise.resolve([]);
    running = undefined;
    starting = undefined;
    deps.gate.reset();
    await Promise.all([state === undefined ? undefined : closePiRun(state), workers]);
  }

  function current(): TaskCore {
    if (running !== undefined) return running.configured.current();
    if (startError !== undefined) throw startError;
    if (starting !== undefined) throw new TaskError("TASKS_STARTING");
    throw new TaskError("TASKS_NOT_RUNNING");
  }

  return {
    start(view) {
      try {
        if (running !== undefined) void stop();
        start(view);
      } catch (error) {
        startError = toTaskError(error);
      }
    },
    stop,
    requestRefresh: () => running?.scheduler.request(),
    current,
    async run(operation) {
      await starting;
      if (running === undefined) current();
      return running!.configured.run(operation);
    },
    ready: async () => {
      await starting;
    },
    info: () => running?.info,
    failure: () => running?.failure,
    presenter: () => running?.presenter,
    onMessageEnd(message) {
      running?.presenter.onMessageEnd(message);
    },
    observer: () => running?.observer,
    checkGrant(toolName, input, cwd) {
      try {
        return grantVerdict(running?.configured.current(), toolName, input, cwd);
      } catch {
        return { code: "PI_TASK_GRANT_DENIED", reason: "PI_TASK_GRANT_DENIED: the grant of this session's task could not be checked." };
      }
    },
    refreshFooter: footer,
  };
}

/** The lifecycle and the worker gate wired to it (the gate reads the lifecycle's current core). */
export function createTasksRuntime(deps: Omit<LifecycleDeps, "gate">): { readonly lifecycle: Lifecycle; readonly gate: WorkerGate } {
  let lifecycle: Lifecycle | undefined;
  const gate = createWorkerGate(isWorker(deps.env), {
    core: () => {
      try {
        return lifecycle?.current();
      } catch {
        return undefined;
      }
    },
    inSession: (eventId) => lifecycle?.presenter()?.inserted(eventId) === true,
  });
  lifecycle = createLifecycle({ ...deps, gate });
  return { lifecycle, gate };
}
