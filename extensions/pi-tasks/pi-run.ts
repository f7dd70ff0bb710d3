/**
 * What one Pi run of pi-tasks is made of, and how it starts and ends: a Pi run lasts from Pi's
 * `session_start` to its `session_shutdown` (its core's lifetimes, src/core/lifetime.ts, happen
 * inside it). Start-up picks the session name (`WOLFPACK_SESSION_NAME`, else a generated one), finds
 * the relay (starting the embedded relay when none answers at the default loopback URL), then builds
 * the configured core (relay session + RAM store), the presenter, the background scheduler and the
 * mail watch. Which Pi run is the current one is lifecycle.ts's concern: every callback here first
 * asks whether its own Pi run went stale.
 */
import { ensureRelay, type RelayInUse } from "../../src/host/embedded-relay.ts";
import { type ConfiguredTaskCore, createConfiguredTaskCore, type RecoveryInfo } from "../../src/core/configured.ts";
import type { PassReport } from "../../src/core/pass.ts";
import type { TrustOptions } from "../../src/core/trust.ts";
import { formatEndpoint } from "../../src/protocol/endpoint.ts";
import { maxActiveOriginTasks } from "../../src/protocol/limits.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import {
  type Env,
  piTasksHome,
  type RelayConfig,
  relayConfigFromEnv,
  type SessionName,
  sessionNameFromEnv,
} from "../../src/relay-client/config.ts";
import { type FooterFailure, passFailure } from "./failures.ts";
import { createRelayRevival, type RelayRevivalWatch } from "./relay-revival.ts";
import { footerLabel } from "./footer.ts";
import { isWorker } from "./gate.ts";
import type { LifecycleDeps, PiContextView } from "./lifecycle-deps.ts";
import { type AgentObserver, createAgentObserver } from "./observer.ts";
import { createSpawnWatch, type SpawnWatch } from "./spawn-watch.ts";
import { createPiPresenter, type PiPresenter } from "./presenter.ts";
import { announceQuestions } from "./questions.ts";
import { announceGrantRequests } from "./grant-requests.ts";
import { sandboxWord } from "./sandbox-bash.ts";
import { createMailWatch, createRefreshScheduler, type MailWatch, type RefreshScheduler } from "./scheduler.ts";
import { resumeDelegated, resumeWanted } from "./resume.ts";
import { createTaskTracer, type TaskTracer } from "./traces.ts";
import { createExtensionTrust } from "./trust.ts";

/** `PI_TASKS_CANCEL_ABORTS=1`: a cancel also aborts this (non-worker) session's running turn. */
export const CANCEL_ABORTS_VARIABLE = "PI_TASKS_CANCEL_ABORTS";
/** `PI_TASKS_AUTO_REASSIGN=1`: an orphaned task moves by itself to its worker's restarted session. */
export const AUTO_REASSIGN_VARIABLE = "PI_TASKS_AUTO_REASSIGN";
/** `PI_TASKS_MAX_DEPTH=2`: no onward delegation from this Pi's tasks (it lowers the cap of 3, never raises it). */
export const MAX_DEPTH_VARIABLE = "PI_TASKS_MAX_DEPTH";
/** `PI_TASKS_MAX_ACTIVE_TASKS=4`: the fan-out cap of this Pi's session (it lowers `maxActiveOriginTasks`, never raises it). */
export const MAX_ACTIVE_TASKS_VARIABLE = "PI_TASKS_MAX_ACTIVE_TASKS";
/** `PI_TASKS_MAX_WORKERS=2`: the most workers this Pi may run spawned at once (it lowers `maxSpawnedWorkers`, never raises it). */
export const MAX_WORKERS_VARIABLE = "PI_TASKS_MAX_WORKERS";

/** Who this session is on which relay (for the footer, `/tasks` and the spawn tool). */
export interface SessionInfo {
  readonly session: SessionName;
  /** This session's signing identity (shared by every Pi with the same PI_TASKS_HOME). */
  readonly identity: { readonly publicKey: string; readonly fingerprint: string };
  readonly relay: RelayInUse;
  readonly env: Env;
  readonly cwd: string;
}

/** One started Pi run: who this session is, and the parts that run until shutdown. */
export interface PiRun {
  readonly info: SessionInfo;
  readonly presenter: PiPresenter;
  readonly configured: ConfiguredTaskCore;
  readonly scheduler: RefreshScheduler;
  readonly watch: MailWatch;
  /** Spans of the tasks this session owns, when OpenTelemetry's environment asks (traces.ts). */
  readonly tracer: TaskTracer;
  /** Pi's agent events for the tasks this session works on: activity reports, reminders (observer.ts). */
  readonly observer: AgentObserver;
  /** Workers this Pi spawned: orphaned at the next pass when their process exits (spawn-watch.ts). */
  readonly spawns: SpawnWatch;
  /** The embedded relay started again when it went away, unless the person stopped it (relay-revival.ts). */
  readonly revival: RelayRevivalWatch;
  /** The failure of the last pass (undefined when healthy): the footer shows it after the counts, `/tasks` with its fix. */
  failure: FooterFailure | undefined;
  /** A pass reached the relay (its lease held): a relay that did not answer at start-up answers now. */
  relayAnswered: boolean;
  /** Questions and grant requests already announced to the person at this Pi (by event id). */
  readonly announced: Set<string>;
}

/** What start-up calls back into: the lifecycle that owns the Pi run. */
export interface StartHooks {
  /** True once this Pi run was replaced or stopped: its callbacks then do nothing. */
  stale(): boolean;
  /** Re-renders the footer from the current Pi run. */
  footer(): void;
  /** Makes the assembled Pi run the current one (before its scheduler and watch start). */
  install(run: PiRun): void;
}

/** What the parts of one Pi run share while it is being assembled and afterwards. */
interface PartHooks extends StartHooks {
  /** This start-up's Pi run, once assembled (callbacks may fire before). */
  run(): PiRun | undefined;
  /** Tells the person at this Pi something; a stale Pi context is ignored. */
  notify(message: string, level: "info" | "warning"): void;
}

/** What start-up found before the parts are built. */
interface Found {
  readonly session: SessionName;
  readonly trust: TrustOptions;
  readonly relay: RelayInUse;
  /** How the relay was chosen at the run's start (the environment then): a revival looks by the same rules. */
  readonly relayConfig: RelayConfig;
  /**
   * Why the relay is not used, when it is not: the footer names it (with its fix) instead of
   * "unreachable" for as long as the relay stays out of reach.
   */
  readonly startProblem: TaskError | undefined;
}

function safe(fn: () => void): void {
  try {
    fn();
  } catch {
    // A stale Pi context throws after reload or replacement; presentation simply stops.
  }
}

/** A number the person set in the environment (checked where it is used: INVALID_CONFIGURATION outside its range). */
export function configuredNumber(env: Env, variable: string): number | undefined {
  const text = env[variable]?.trim();
  return text === undefined || text === "" ? undefined : Number(text);
}

/**
 * Why the relay is not used: pi-tasks could not start one, what answers cannot prove it is the
 * user's, or it did not answer at start-up (not used until it answers and proves itself).
 */
function relayProblem(relay: RelayInUse): TaskError | undefined {
  if (relay.problem === undefined) return undefined;
  if (relay.state === "unanswered") return new TaskError("RELAY_NOT_ANSWERING", { message: relay.problem, details: { url: relay.url } });
  if (relay.state === "untrusted")
    return new TaskError(relay.problemCode ?? "RELAY_NOT_PROVEN", { message: relay.problem, details: { url: relay.url } });
  if (relay.state === "foreign") return new TaskError("RELAY_NOT_VOLATILE", { message: relay.problem, details: { url: relay.url } });
  return relay.state === "absent" ? new TaskError("RELAY_NOT_STARTED", { message: relay.problem }) : undefined;
}

/** A fetch that sends nothing: every request fails with `reason` (an untrusted relay gets nothing). */
function refusing(reason: TaskError): typeof fetch {
  return (() => Promise.reject(reason)) as unknown as typeof fetch;
}

function trustFor(deps: LifecycleDeps, session: SessionName, view: PiContextView, hooks: PartHooks): TrustOptions {
  const confirm = view.confirm;
  return createExtensionTrust({
    env: deps.env,
    home: piTasksHome(deps.env),
    claimedName: session.name,
    dialog: confirm === undefined ? undefined : { confirm, notify: (message, level) => safe(() => view.notify(message, level)) },
    onDecided: () => hooks.run()?.scheduler.request(),
  });
}

function presenterFor(deps: LifecycleDeps, view: PiContextView, hooks: PartHooks): PiPresenter {
  return createPiPresenter({
    abortOnCancel: isWorker(deps.env) || deps.env[CANCEL_ABORTS_VARIABLE] === "1",
    sendMessage: deps.sendMessage,
    appendEntry: deps.appendEntry,
    session: () => {
      if (hooks.stale()) return undefined;
      try {
        view.isIdle();
        return view;
      } catch {
        return undefined;
      }
    },
  });
}

/** What the person reads when the relay forgot this session (it restarted) or its registration was replaced. */
function recoveryNotice(recovered: RecoveryInfo): string {
  const endpoint = formatEndpoint(recovered.endpoint);
  if (!recovered.relayForgot)
    return `pi-tasks: this session's relay registration was replaced; bound a fresh endpoint ${endpoint}; tasks continue from it.`;
  const count = recovered.reconnecting;
  const reconnecting =
    count === 0
      ? "no task needs to reconnect"
      : `${count} task${count === 1 ? "" : "s"} reconnecting with ${count === 1 ? "its peer" : "their peers"} (nothing is lost: what the peers lack is sent again)`;
  return `pi-tasks: the relay restarted and lost its mail; bound a fresh endpoint ${endpoint}; ${reconnecting}.`;
}

function coreFor(deps: LifecycleDeps, found: Found, presenter: PiPresenter, hooks: PartHooks): ConfiguredTaskCore {
  const { relay, session, startProblem } = found;
  const depth = configuredNumber(deps.env, MAX_DEPTH_VARIABLE);
  const fanOut = configuredNumber(deps.env, MAX_ACTIVE_TASKS_VARIABLE);
  return (deps.createCore ?? createConfiguredTaskCore)({
    trust: found.trust,
    autoReassign: deps.env[AUTO_REASSIGN_VARIABLE] === "1",
    ...(depth === undefined ? {} : { maxDepth: depth }),
    // A Pi session is capped by default (a model can fan out without end); the person may lower it.
    maxActiveTasks: fanOut ?? maxActiveOriginTasks,
    env: deps.env,
    callerSession: session.name,
    url: relay.url,
    // A relay that cannot prove it is the user's is never used: every request fails with that reason.
    ...(relay.state === "untrusted" && startProblem !== undefined ? { fetch: refusing(startProblem) } : {}),
    host: presenter,
    onRefreshRequested: () => hooks.run()?.scheduler.request(),
    onRecovered: (recovered: RecoveryInfo) => {
      const run = hooks.run();
      if (run === undefined || hooks.stale()) return;
      run.failure = undefined;
      hooks.footer();
      hooks.notify(recoveryNotice(recovered), "warning");
      run.scheduler.request();
    },
  });
}

/**
 * The start-up problem that names why the relay is out of reach now: a relay that only did not
 * answer at start-up stops being one once a pass reached it (a later outage is just that).
 */
function problemNow(found: Found, run: PiRun): TaskError | undefined {
  const atStart = found.relay.state === "unanswered" && run.relayAnswered ? undefined : found.startProblem;
  return atStart ?? run.revival.problem();
}

/** The failure of a pass's outcome; a relay out of reach has its port looked at (relay-revival.ts). */
function outcomeFailure(run: PiRun, found: Found, outcome: unknown): FooterFailure | undefined {
  const failure = passFailure(outcome, found.relay.url, problemNow(found, run));
  if (failure?.code === "RELAY_UNAVAILABLE" || failure?.code === "RELAY_STOPPED") run.revival.unreachable();
  else if (failure === undefined) run.revival.reached();
  return failure;
}

function schedulerFor(deps: LifecycleDeps, configured: ConfiguredTaskCore, found: Found, hooks: PartHooks): RefreshScheduler {
  return createRefreshScheduler({
    refresh: () => configured.refresh(),
    busy: () => {
      const core = configured.current();
      return core.hasActiveTasks() || core.hasPendingWork() || deps.gate.waiting();
    },
    watched: () => hooks.run()?.watch.live() === true,
    onPass: (report: PassReport) => {
      const run = hooks.run();
      if (run === undefined) return;
      if (!report.failures.has("lease")) run.relayAnswered = true;
      run.spawns.check();
      run.failure = outcomeFailure(run, found, report);
      hooks.footer();
      const tasks = configured.current().listTasks();
      announceQuestions(tasks, run.announced, (message) => hooks.notify(message, "info"));
      announceGrantRequests(tasks, run.announced, (message) => hooks.notify(message, "warning"));
      // The first pass binds the session: the doorbell need not wait for its next check.
      run.watch.nudge();
      deps.afterPass?.();
    },
    onError: (error: unknown) => {
      const run = hooks.run();
      if (run === undefined) return;
      run.spawns.check();
      run.failure = outcomeFailure(run, found, error);
      hooks.footer();
    },
  });
}

function watchFor(configured: ConfiguredTaskCore, hooks: PartHooks): MailWatch {
  return createMailWatch({
    session: () => (hooks.stale() ? undefined : configured.session),
    cursor: () => configured.current().cursor(),
    // The pass may have made work active: the scheduler then comes at the active cadence.
    onMail: () =>
      configured.refresh().then(
        () => hooks.run()?.scheduler.reconsider(),
        () => hooks.run()?.scheduler.reconsider(),
      ),
    onLost: () => hooks.run()?.scheduler.request(),
  });
}

/** Builds the parts of a Pi run once the relay is found; nothing runs yet. */
function assemble(deps: LifecycleDeps, view: PiContextView, found: Found, hooks: PartHooks): PiRun {
  const { session, trust, relay } = found;
  const identity = { publicKey: trust.identity.publicKey, fingerprint: trust.identity.fingerprint };
  const info: SessionInfo = { session, identity, relay, env: deps.env, cwd: view.cwd };
  const presenter = presenterFor(deps, view, hooks);
  const configured = coreFor(deps, found, presenter, hooks);
  const scheduler = schedulerFor(deps, configured, found, hooks);
  const watch = watchFor(configured, hooks);
  const tracer = createTaskTracer(deps.env, configured.current(), { session: session.name });
  // Traces asked for but not possible (OpenTelemetry is not in the default install): said once, with the fix.
  void tracer.ready().then((live) => {
    const problem = tracer.problem();
    if (!live && problem !== undefined && !hooks.stale()) hooks.notify(problem, "warning");
  });
  const failure = passFailure(found.startProblem, relay.url);
  const observer = createAgentObserver({
    core: () => (hooks.stale() ? undefined : configured.current()),
    now: Date.now,
    sendMessage: deps.sendMessage,
  });
  const spawns = createSpawnWatch(deps.env, () => (hooks.stale() ? undefined : configured.current()));
  const revival = createRelayRevival({
    env: deps.env,
    config: found.relayConfig,
    url: relay.url,
    now: Date.now,
    onStarted: (url) => {
      if (hooks.stale()) return;
      hooks.notify(
        `pi-tasks: the relay at ${url} had gone away; this Pi started it again. Tasks go on; what it lost is sent again.`,
        "warning",
      );
      scheduler.request();
    },
  });
  const parts = { info, presenter, configured, scheduler, watch, tracer, observer, spawns, revival };
  return { ...parts, failure, relayAnswered: false, announced: new Set() };
}

/** Starts one Pi run for a Pi session; a start-up that went stale while finding the relay builds nothing. */
export async function startPiRun(deps: LifecycleDeps, view: PiContextView, hooks: StartHooks): Promise<void> {
  let run: PiRun | undefined;
  const parts: PartHooks = {
    ...hooks,
    run: () => run,
    notify: (message, level) => safe(() => view.notify(message, level)),
  };
  const session = keptSessionName(deps.env, view.cwd);
  const trust = trustFor(deps, session, view, parts);
  const relayConfig = relayConfigFromEnv(deps.env);
  const relay = await (deps.findRelay ?? ensureRelay)({ env: deps.env, config: relayConfig });
  if (hooks.stale()) return;
  run = assemble(deps, view, { session, trust, relay, relayConfig, startProblem: relayProblem(relay) }, parts);
  hooks.install(run);
  run.scheduler.start();
  run.watch.start();
  run.observer.start();
  run.spawns.check();
  // Start-up (what tools wait for) ends once a resumed session's workers answered, or resumeWaitMs passed.
  if (resumeWanted(deps.env)) await resumeDelegated(run.configured, view.branch(), parts.notify);
}

/** The names this Pi process generated, by project directory (kept across extension instances: a `/reload`). */
const GENERATED_NAMES = Symbol.for("pi-tasks.generated-session-names");

/**
 * This session's name: `WOLFPACK_SESSION_NAME`, else the one this Pi process generated for the
 * project before — a `/reload` or a new Pi session in the same process keeps it (the person and the
 * workers know it) — else a new one.
 */
function keptSessionName(env: Env, cwd: string): SessionName {
  const named = sessionNameFromEnv(env, cwd);
  if (named.source !== "generated") return named;
  const global = globalThis as { [GENERATED_NAMES]?: Map<string, string> };
  const kept = (global[GENERATED_NAMES] ??= new Map());
  const earlier = kept.get(cwd);
  if (earlier !== undefined) return { name: earlier, source: "generated" };
  kept.set(cwd, named.name);
  return named;
}

/** The footer label of a Pi run: its counts, then its last pass's failure (if any). */
export function piRunLabel(run: PiRun): string {
  const core = run.configured.current();
  const tasks = core.listTasks();
  return footerLabel(run.info.session.name, tasks, core.rejections(), run.failure, sandboxWord(run.info.env, tasks));
}

/** Stops a Pi run's background work at once, then closes its core (never rejects). */
export function closePiRun(run: PiRun): Promise<void> {
  run.scheduler.stop();
  run.watch.stop();
  run.observer.stop();
  run.presenter.dispose();
  // The tracer ends its spans while the core still holds their tasks; its flush is bounded.
  const traced = run.tracer.stop();
  return Promise.all([run.configured.close().catch(() => undefined), traced]).then(() => undefined);
}
