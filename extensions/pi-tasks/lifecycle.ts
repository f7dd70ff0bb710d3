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
import { openAtQuit, quitNotice } from "./quit-notice.ts";
import { resumeWanted } from "./resume.ts";
import type { LifecycleDeps, PiContextView } from "./lifecycle-deps.ts";
import { closePiRun, type PiRun, piRunLabel, type SessionInfo, startPiRun } from "./pi-run.ts";

export type { LifecycleDeps, PiContextView } from "./lifecycle-deps.ts";
export { AUTO_REASSIGN_VARIABLE, CANCEL_ABORTS_VARIABLE, MAX_DEPTH_VARIABLE, type SessionInfo } from "./pi-run.ts";

export interface Lifecycle {
  start(context: PiContextView): void;
  /**
   * Ends the Pi run; when Pi quits, also stops the workers this Pi spawned without keeping them,
   * and hands `say` the notice of what the quit leaves open (quit-notice.ts), when anything is.
   */
  stop(reason?: string, say?: (text: string) => void): Promise<void>;
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

/** What the person sees of the current Pi run: the status line and the workers widget. */
interface RunDisplay {
  bind(view: PiContextView): void;
  /** A label instead of a Pi run's counts (starting, a failed start). */
  label(text: string | undefined): void;
  show(run: PiRun): void;
}

function createRunDisplay(): RunDisplay {
  const status = createStatusLine();
  const widget = createWorkerWidget();
  return {
    bind(view) {
      status.bind(view);
      widget.bind(view);
    },
    label: (text) => status.show(text),
    show(run) {
      status.show(piRunLabel(run));
      widget.show(workerWidgetLines(run.configured.current().listTasks(), Date.now()));
    },
  };
}

/** The tasks a quit leaves open (quit-notice.ts); none when the core cannot say (the quit goes on). */
function openTasksOf(run: PiRun): ReturnType<typeof openAtQuit> {
  try {
    return openAtQuit(run.configured.current().listTasks());
  } catch {
    return [];
  }
}

/** The current Pi run, the start-up in progress and why the last start failed; a start fences the runs before it. */
interface RunSlot {
  running(): PiRun | undefined;
  starting(): Promise<void> | undefined;
  /** Stops the running Pi run (not waiting for it), then starts a new one; never throws. */
  start(view: PiContextView): void;
  stop(reason?: string, say?: (text: string) => void): Promise<void>;
  current(): TaskCore;
  footer(): void;
}

function createRunSlot(deps: LifecycleDeps): RunSlot {
  const display = createRunDisplay();
  let running: PiRun | undefined;
  let starting: Promise<void> | undefined;
  let startError: TaskError | undefined;
  let startCount = 0;

  function footer(): void {
    if (running !== undefined) display.show(running);
  }

  function launch(view: PiContextView): void {
    const token = (startCount += 1);
    display.bind(view);
    startError = undefined;
    deps.gate.reset();
    display.label(STARTING_LABEL);
    const stale = () => token !== startCount;
    const install = (run: PiRun) => {
      running = run;
      footer();
    };
    starting = startPiRun(deps, view, { stale, footer, install }).catch((error: unknown) => {
      if (stale()) return;
      startError = toTaskError(error);
      display.label(failureLabel(startError, undefined));
    });
  }

  async function stop(reason?: string, say?: (text: string) => void): Promise<void> {
    startCount += 1;
    const run = running;
    // What a quit leaves open, read before the run closes (said after: quit-notice.ts).
    const open = reason === "quit" && run !== undefined ? openTasksOf(run) : [];
    // Workers spawned to stop with this Pi: their holders also notice the Pi is gone, this is sooner.
    // Best effort: Pi is exiting and has nowhere left to show a failure; a holder whose Pi is gone
    // stops its worker by itself.
    const workers = reason === "quit" ? stopOwnedWorkers(deps.env, process.pid).catch(() => []) : Promise.resolve([]);
    running = undefined;
    starting = undefined;
    deps.gate.reset();
    const [, stopped] = await Promise.all([run === undefined ? undefined : closePiRun(run), workers]);
    const notice = run === undefined ? undefined : quitNotice(run.info.session.name, open, stopped.length, resumeWanted(deps.env));
    if (notice !== undefined) say?.(notice);
  }

  function current(): TaskCore {
    if (running !== undefined) return running.configured.current();
    if (startError !== undefined) throw startError;
    if (starting !== undefined) throw new TaskError("TASKS_STARTING");
    throw new TaskError("TASKS_NOT_RUNNING");
  }

  function start(view: PiContextView): void {
    try {
      if (running !== undefined) void stop();
      launch(view);
    } catch (error) {
      startError = toTaskError(error);
    }
  }

  return { running: () => running, starting: () => starting, start, stop, current, footer };
}

/** The lifecycle's face: tools, commands and Pi's events reach the current Pi run through the slot. */
export function createLifecycle(deps: LifecycleDeps): Lifecycle {
  const slot = createRunSlot(deps);
  const running = () => slot.running();
  return {
    start: (view) => slot.start(view),
    stop: (reason, say) => slot.stop(reason, say),
    requestRefresh: () => running()?.scheduler.request(),
    current: () => slot.current(),
    async run(operation) {
      await slot.starting();
      if (running() === undefined) slot.current();
      return running()!.configured.run(operation);
    },
    ready: async () => {
      await slot.starting();
    },
    info: () => running()?.info,
    failure: () => running()?.failure,
    presenter: () => running()?.presenter,
    onMessageEnd(message) {
      running()?.presenter.onMessageEnd(message);
    },
    observer: () => running()?.observer,
    checkGrant(toolName, input, cwd) {
      try {
        return grantVerdict(running()?.configured.current(), toolName, input, cwd);
      } catch {
        return { code: "PI_TASK_GRANT_DENIED", reason: "PI_TASK_GRANT_DENIED: the grant of this session's task could not be checked." };
      }
    },
    refreshFooter: () => slot.footer(),
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
