/**
 * One pi-tasks lifetime per Pi session: built on `session_start`, fenced and discarded on
 * `session_shutdown`. It owns the configured core (relay session + RAM store), the presenter, the
 * background scheduler and the mail watch. Nothing here throws into Pi's event handlers.
 */
import { type ConfiguredTaskCore, createConfiguredTaskCore, type RecoveryInfo } from "../../src/core/configured.ts";
import type { PassReport } from "../../src/core/pass.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import { formatEndpoint } from "../../src/protocol/endpoint.ts";
import { TaskError, toTaskError } from "../../src/protocol/errors.ts";
import { createWorkerGate, isWorker, type WorkerGate } from "./gate.ts";
import { createPiPresenter, type PiPresenter, type PresenterDeps } from "./presenter.ts";
import { createMailWatch, createRefreshScheduler, type MailWatch, type RefreshScheduler } from "./scheduler.ts";
import { errorLabel, passLabel, STATUS_KEY } from "./status.ts";

/** What the lifecycle needs from Pi's context (captured fresh at each session_start). */
export interface PiContextView {
  isIdle(): boolean;
  hasPendingMessages(): boolean;
  branch(): readonly unknown[];
  setStatus(key: string, text: string | undefined): void;
  notify(message: string, level: "info" | "warning" | "error"): void;
}

export interface LifecycleDeps {
  readonly env: Record<string, string | undefined>;
  readonly sendMessage: PresenterDeps["sendMessage"];
  readonly appendEntry: PresenterDeps["appendEntry"];
  readonly gate: WorkerGate;
  /** Test seam: how the configured core is built. */
  readonly createCore?: typeof createConfiguredTaskCore;
}

export interface Lifecycle {
  start(context: PiContextView): void;
  stop(): Promise<void>;
  requestRefresh(): void;
  /** The current lifetime's core, or the typed reason there is none. */
  current(): TaskCore;
  run<T>(operation: (core: TaskCore) => Promise<T>): Promise<T>;
  presenter(): PiPresenter | undefined;
  onMessageEnd(message: unknown): void;
}

interface Running {
  readonly context: PiContextView;
  readonly presenter: PiPresenter;
  readonly configured: ConfiguredTaskCore;
  readonly scheduler: RefreshScheduler;
  readonly watch: MailWatch;
  lastLabel: string | undefined;
}

export function createLifecycle(deps: LifecycleDeps): Lifecycle {
  let running: Running | undefined;
  let startError: TaskError | undefined;
  let generation = 0;

  function safe(fn: () => void): void {
    try {
      fn();
    } catch {
      // A stale Pi context throws after reload or replacement; presentation simply stops.
    }
  }

  function setStatus(state: Running, label: string | undefined): void {
    if (state.lastLabel === label) return;
    state.lastLabel = label;
    safe(() => state.context.setStatus(STATUS_KEY, label));
  }

  function start(context: PiContextView): void {
    const token = (generation += 1);
    startError = undefined;
    deps.gate.reset();
    const presenter = createPiPresenter({
      sendMessage: deps.sendMessage,
      appendEntry: deps.appendEntry,
      session: () => {
        if (token !== generation) return undefined;
        try {
          context.isIdle();
          return context;
        } catch {
          return undefined;
        }
      },
    });
    let state: Running | undefined;
    let configured: ConfiguredTaskCore;
    try {
      configured = (deps.createCore ?? createConfiguredTaskCore)({
        env: deps.env,
        host: presenter,
        onRefreshRequested: () => state?.scheduler.request(),
        onRecovered: (info: RecoveryInfo) => {
          if (state === undefined || token !== generation) return;
          deps.gate.reset();
          setStatus(state, undefined);
          safe(() =>
            context.notify(
              `pi-tasks: relay state was lost; bound a fresh endpoint ${formatEndpoint(info.endpoint)}; ${info.failedTasks} active task${info.failedTasks === 1 ? "" : "s"} marked failed locally (remote outcome unknown).`,
              "warning",
            ),
          );
          state.scheduler.request();
        },
      });
    } catch (error) {
      startError = toTaskError(error);
      safe(() => context.setStatus(STATUS_KEY, `tasks: ${startError!.spec.class} (${startError!.code})`));
      return;
    }
    const scheduler = createRefreshScheduler({
      refresh: () => configured.refresh(),
      busy: () => {
        const core = configured.current();
        return core.store.hasActiveTasks() || core.hasPendingWork() || deps.gate.waiting();
      },
      onPass: (report: PassReport) => {
        if (state === undefined) return;
        setStatus(state, passLabel(report));
        // The first pass binds the session: the doorbell need not wait for its next check.
        state.watch.nudge();
      },
      onError: (error: unknown) => state !== undefined && setStatus(state, errorLabel(error)),
    });
    const watch = createMailWatch({
      session: () => (token === generation ? configured.session : undefined),
      cursor: () => configured.current().store.checkpoint().highWater,
      onMail: () => configured.refresh().then(
        () => undefined,
        () => undefined,
      ),
    });
    state = { context, presenter, configured, scheduler, watch, lastLabel: undefined };
    running = state;
    scheduler.start();
    watch.start();
  }

  async function stop(): Promise<void> {
    generation += 1;
    const state = running;
    running = undefined;
    deps.gate.reset();
    if (state === undefined) return;
    state.scheduler.stop();
    state.watch.stop();
    state.presenter.dispose();
    await state.configured.close().catch(() => undefined);
  }

  function current(): TaskCore {
    if (running !== undefined) return running.configured.current();
    throw startError ?? new TaskError("RELAY_SESSION_REQUIRED", { message: "pi-tasks is not running in this session (no session_start yet, or it was shut down)." });
  }

  return {
    start(context) {
      try {
        if (running !== undefined) void stop();
        start(context);
      } catch (error) {
        startError = toTaskError(error);
      }
    },
    stop,
    requestRefresh: () => running?.scheduler.request(),
    current,
    async run(operation) {
      if (running === undefined) current();
      return running!.configured.run(operation);
    },
    presenter: () => running?.presenter,
    onMessageEnd(message) {
      running?.presenter.onMessageEnd(message);
    },
  };
}

/** The lifecycle and the worker gate wired to it (the gate reads the lifecycle's current core). */
export function createExtensionRuntime(deps: Omit<LifecycleDeps, "gate">): { readonly lifecycle: Lifecycle; readonly gate: WorkerGate } {
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
