/**
 * One pi-tasks lifetime per Pi session: started on `session_start`, fenced and discarded on
 * `session_shutdown`. Start-up picks the session name (`WOLFPACK_SESSION_NAME`, else a generated
 * one), finds the relay (starting the embedded relay when none answers at the default loopback
 * URL), then builds the configured core (relay session + RAM store), the presenter, the background
 * scheduler and the mail watch. Nothing here throws into Pi's event handlers.
 */
import { ensureRelay, type RelayInUse } from "../../src/cli/embedded-relay.ts";
import { stopOwnedWorkers } from "../../src/cli/stop.ts";
import { type RecoveringTaskCore, createRecoveringTaskCore, type RecoveryInfo } from "../../src/core/recovering.ts";
import type { PassReport } from "../../src/core/pass.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import { formatEndpoint } from "../../src/protocol/endpoint.ts";
import { TaskError, toTaskError } from "../../src/protocol/errors.ts";
import { type Env, piTasksHome, relayConfigFromEnv, type SessionName, sessionNameFromEnv } from "../../src/relay-client/config.ts";
import { failureLabel, healthyLabel, STARTING_LABEL, STATUS_KEY } from "./footer.ts";
import { createWorkerGate, isWorker, type WorkerGate } from "./gate.ts";
import { createPiPresenter, type PiPresenter, type PresenterDeps } from "./presenter.ts";
import { createMailWatch, createRefreshScheduler, type MailWatch, type RefreshScheduler } from "./scheduler.ts";
import { announceQuestions } from "./questions.ts";
import { createExtensionTrust } from "./trust.ts";

/** What the lifecycle needs from Pi's context (captured fresh at each session_start). */
export interface PiContextView {
  readonly cwd: string;
  isIdle(): boolean;
  hasPendingMessages(): boolean;
  branch(): readonly unknown[];
  setStatus(key: string, text: string | undefined): void;
  notify(message: string, level: "info" | "warning" | "error"): void;
  /** Aborts the running turn. */
  abort(): void;
  /** The interactive TUI's confirm dialog; undefined in RPC, print and json modes. */
  readonly confirm?: (title: string, message: string, timeoutMs: number) => Promise<boolean>;
}

/** `PI_TASKS_CANCEL_ABORTS=1`: a cancel also aborts this (non-worker) session's running turn. */
export const CANCEL_ABORTS_VARIABLE = "PI_TASKS_CANCEL_ABORTS";
/** `PI_TASKS_AUTO_REASSIGN=1`: an orphaned task moves by itself to its worker's restarted session. */
export const AUTO_REASSIGN_VARIABLE = "PI_TASKS_AUTO_REASSIGN";
/** `PI_TASKS_MAX_DEPTH=2`: no onward delegation from this Pi's tasks (it lowers the cap of 3, never raises it). */
export const MAX_DEPTH_VARIABLE = "PI_TASKS_MAX_DEPTH";

/** The configured depth cap (checked by the core: INVALID_CONFIGURATION above 3 or below 2). */
function configuredDepth(env: Env): number | undefined {
  const text = env[MAX_DEPTH_VARIABLE]?.trim();
  return text === undefined || text === "" ? undefined : Number(text);
}

export interface LifecycleDeps {
  readonly env: Env;
  readonly sendMessage: PresenterDeps["sendMessage"];
  readonly appendEntry: PresenterDeps["appendEntry"];
  readonly gate: WorkerGate;
  /** Test seam: how the configured core is built. */
  readonly createCore?: typeof createRecoveringTaskCore;
  /** Test seam: how the relay is found (or started). */
  readonly findRelay?: typeof ensureRelay;
}

/** Who this session is on which relay (for the footer, `/tasks` and the spawn tool). */
export interface SessionInfo {
  readonly session: SessionName;
  /** This session's signing identity (shared by every Pi with the same PI_TASKS_HOME). */
  readonly identity: { readonly publicKey: string; readonly fingerprint: string };
  readonly relay: RelayInUse;
  readonly env: Env;
  readonly cwd: string;
}

export interface Lifecycle {
  start(context: PiContextView): void;
  /** Ends the lifetime; when Pi quits, also stops the workers this Pi spawned without keeping them. */
  stop(reason?: string): Promise<void>;
  requestRefresh(): void;
  /** The current lifetime's core, or the typed reason there is none. */
  current(): TaskCore;
  /** Runs an operation on the current lifetime once start-up finished. */
  run<T>(operation: (core: TaskCore) => Promise<T>): Promise<T>;
  /** Resolves when start-up finished (successfully or not). */
  ready(): Promise<void>;
  /** The session name and relay, once start-up found them. */
  info(): SessionInfo | undefined;
  presenter(): PiPresenter | undefined;
  onMessageEnd(message: unknown): void;
  /** Re-renders the footer (after something changed outside a pass). */
  refreshFooter(): void;
}

interface Running {
  readonly info: SessionInfo;
  readonly presenter: PiPresenter;
  readonly configured: RecoveringTaskCore;
  readonly scheduler: RefreshScheduler;
  readonly watch: MailWatch;
  /** The failure label of the last pass (undefined when healthy). */
  failure: string | undefined;
  /** Questions already announced to the person at this Pi (by event id). */
  readonly announced: Set<string>;
}

/** Why the relay is not used: pi-tasks could not start one, or what answers cannot prove it is the user's. */
function relayProblem(relay: RelayInUse): TaskError | undefined {
  if (relay.problem === undefined) return undefined;
  if (relay.state === "untrusted")
    return new TaskError(relay.problemCode ?? "RELAY_NOT_PROVEN", { message: relay.problem, details: { url: relay.url } });
  return relay.state === "absent" ? new TaskError("RELAY_NOT_STARTED", { message: relay.problem }) : undefined;
}

/** A fetch that sends nothing: every request fails with `reason` (an untrusted relay gets nothing). */
function refusing(reason: TaskError): typeof fetch {
  return (() => Promise.reject(reason)) as unknown as typeof fetch;
}

export function createLifecycle(deps: LifecycleDeps): Lifecycle {
  let context: PiContextView | undefined;
  let running: Running | undefined;
  let starting: Promise<void> | undefined;
  let startError: TaskError | undefined;
  let generation = 0;
  let lastLabel: string | undefined;

  function safe(fn: () => void): void {
    try {
      fn();
    } catch {
      // A stale Pi context throws after reload or replacement; presentation simply stops.
    }
  }

  function setStatus(label: string | undefined): void {
    if (lastLabel === label || context === undefined) return;
    lastLabel = label;
    const view = context;
    safe(() => view.setStatus(STATUS_KEY, label));
  }

  function footer(): void {
    const state = running;
    if (state === undefined) return;
    if (state.failure !== undefined) return setStatus(state.failure);
    const core = state.configured.current();
    setStatus(healthyLabel(state.info.session.name, core.listTasks(), core.rejections()));
  }

  async function boot(view: PiContextView, token: number): Promise<void> {
    const stale = () => token !== generation;
    const session = sessionNameFromEnv(deps.env, view.cwd);
    let state: Running | undefined;
    const confirm = view.confirm;
    const trust = createExtensionTrust({
      env: deps.env,
      home: piTasksHome(deps.env),
      claimedName: session.name,
      dialog: confirm === undefined ? undefined : { confirm, notify: (message, level) => safe(() => view.notify(message, level)) },
      onDecided: () => state?.scheduler.request(),
    });
    const relay = await (deps.findRelay ?? ensureRelay)({ env: deps.env, config: relayConfigFromEnv(deps.env) });
    if (stale()) return;
    const identity = { publicKey: trust.identity.publicKey, fingerprint: trust.identity.fingerprint };
    const info: SessionInfo = { session, identity, relay, env: deps.env, cwd: view.cwd };
    // Why no relay runs, when pi-tasks could not start one: the footer says it (with its fix)
    // instead of "unreachable" for as long as the relay stays out of reach. A relay that cannot
    // prove it is the user's is never used: the core's every request fails with that reason.
    const startProblem = relayProblem(relay);
    const presenter = createPiPresenter({
      abortOnCancel: isWorker(deps.env) || deps.env[CANCEL_ABORTS_VARIABLE] === "1",
      sendMessage: deps.sendMessage,
      appendEntry: deps.appendEntry,
      session: () => {
        if (stale()) return undefined;
        try {
          view.isIdle();
          return view;
        } catch {
          return undefined;
        }
      },
    });
    const configured = (deps.createCore ?? createRecoveringTaskCore)({
      trust,
      autoReassign: deps.env[AUTO_REASSIGN_VARIABLE] === "1",
      ...(configuredDepth(deps.env) === undefined ? {} : { maxDepth: configuredDepth(deps.env) }),
      env: deps.env,
      callerSession: session.name,
      url: relay.url,
      ...(relay.state === "untrusted" && startProblem !== undefined ? { fetch: refusing(startProblem) } : {}),
      host: presenter,
      onRefreshRequested: () => state?.scheduler.request(),
      onRecovered: (recovered: RecoveryInfo) => {
        if (state === undefined || stale()) return;
        state.failure = undefined;
        footer();
        const count = recovered.reconnecting;
        safe(() =>
          view.notify(
            recovered.relayForgot
              ? `pi-tasks: the relay restarted and lost its mail; bound a fresh endpoint ${formatEndpoint(recovered.endpoint)}; ${count === 0 ? "no task needs to reconnect" : `${count} task${count === 1 ? "" : "s"} reconnecting with ${count === 1 ? "its peer" : "their peers"} (nothing is lost: what the peers lack is sent again)`}.`
              : `pi-tasks: this session's relay registration was replaced; bound a fresh endpoint ${formatEndpoint(recovered.endpoint)}; tasks continue from it.`,
            "warning",
          ),
        );
        state.scheduler.request();
      },
    });
    const scheduler = createRefreshScheduler({
      refresh: () => configured.refresh(),
      busy: () => {
        const core = configured.current();
        return core.hasActiveTasks() || core.hasPendingWork() || deps.gate.waiting();
      },
      onPass: (report: PassReport) => {
        if (state === undefined) return;
        state.failure = failureLabel(report, info.relay.url, startProblem);
        footer();
        announceQuestions(configured.current().listTasks(), state.announced, (message) => safe(() => view.notify(message, "info")));
        // The first pass binds the session: the doorbell need not wait for its next check.
        state.watch.nudge();
      },
      onError: (error: unknown) => {
        if (state === undefined) return;
        state.failure = failureLabel(error, info.relay.url, startProblem);
        footer();
      },
    });
    const watch = createMailWatch({
      session: () => (stale() ? undefined : configured.session),
      cursor: () => configured.current().cursor(),
      onMail: () =>
        configured.refresh().then(
          () => undefined,
          () => undefined,
        ),
    });
    state = { info, presenter, configured, scheduler, watch, failure: undefined, announced: new Set() };
    state.failure = failureLabel(startProblem, relay.url);
    running = state;
    footer();
    scheduler.start();
    watch.start();
  }

  function start(view: PiContextView): void {
    const token = (generation += 1);
    context = view;
    lastLabel = undefined;
    startError = undefined;
    deps.gate.reset();
    setStatus(STARTING_LABEL);
    starting = boot(view, token).catch((error: unknown) => {
      if (token !== generation) return;
      startError = toTaskError(error);
      setStatus(failureLabel(startError, undefined));
    });
  }

  async function stop(reason?: string): Promise<void> {
    generation += 1;
    const state = running;
    // Workers spawned to stop with this Pi: their holders also notice the Pi is gone, this is sooner.
    // Best effort: Pi is exiting and has nowhere left to show a failure; a holder whose Pi is gone
    // stops its worker by itself.
    const workers = reason === "quit" ? stopOwnedWorkers(deps.env, process.pid).catch(() => []) : Promise.resolve([]);
    running = undefined;
    starting = undefined;
    deps.gate.reset();
    if (state === undefined) {
      await workers;
      return;
    }
    state.scheduler.stop();
    state.watch.stop();
    state.presenter.dispose();
    await Promise.all([state.configured.close().catch(() => undefined), workers]);
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
    presenter: () => running?.presenter,
    onMessageEnd(message) {
      running?.presenter.onMessageEnd(message);
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
