/**
 * `createConfiguredTaskCore()` (the Wolfpack design's "configured task core"): a TaskCore that owns
 * its relay session and its RAM store, and survives the loss of the relay's state.
 *
 * Only a structured `RELAY_RESET` or `RELAY_REBIND_REQUIRED` triggers recovery: a fresh endpoint is
 * bound (a new generation of the session) and the same lifetime is re-homed on it — its tasks stay
 * in RAM, and each finds its peer again and re-sends what the peer may lack (reconnect.ts).
 * Transient, auth, capacity, abort, profile and malformed failures never trigger it.
 */
import type { TrustOptions } from "./trust.ts";
import { errorSpec, TaskError, toTaskError } from "../protocol/errors.ts";
import { shutdownDisconnectMs } from "../protocol/limits.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import { authFromEnv } from "../relay-client/auth.ts";
import { relayUrlFromEnv } from "../relay-client/config.ts";
import { createVolatileTaskSession, type VolatileTaskSession } from "../relay-client/session.ts";
import { createTaskStore } from "../store/task-store.ts";
import type { CoreBook } from "./bookkeeping.ts";
import { absentHost, type PresentationHost } from "./host.ts";
import type { PassReport } from "./pass.ts";
import { createTaskCore, rehomeCore, type TaskCore } from "./task-core.ts";
import { type TaskTimers } from "./timers.ts";
import { within } from "../platform/waits.ts";

export interface ConfiguredTaskCoreOptions {
  /** Environment read for `WOLFPACK_SESSION_NAME`, `PI_TASKS_RELAY_URL`, `WOLFPACK_PORT`, `WOLFPACK_JWT_*`. */
  readonly env?: Record<string, string | undefined>;
  /** Overrides `WOLFPACK_SESSION_NAME`. */
  readonly callerSession?: string;
  /** Overrides the URL from the environment. */
  readonly url?: string;
  readonly fetch?: typeof fetch;
  readonly requestTimeoutMs?: number;
  readonly host?: PresentationHost;
  readonly clock?: () => number;
  /** Lease clock of the relay session (default `Date.now`; the simulator's runs on virtual time). */
  readonly now?: () => number;
  readonly timers?: TaskTimers;
  readonly onRefreshRequested?: () => void;
  /** Called after the lifetime was re-homed on a fresh endpoint (relay loss). */
  readonly onRecovered?: (info: RecoveryInfo) => void;
  /** The identity and peers the core signs and judges with (see TaskCoreOptions.trust). */
  readonly trust?: TrustOptions;
  /** See TaskCoreOptions.autoReassign. */
  readonly autoReassign?: boolean;
  /** See TaskCoreOptions.maxDepth. */
  readonly maxDepth?: number;
  /** See TaskCoreOptions.maxActiveTasks. */
  readonly maxActiveTasks?: number;
}

export interface RecoveryInfo {
  readonly endpoint: TaskEndpoint;
  readonly previousEndpoint: TaskEndpoint | undefined;
  /** Tasks that now look for their peer's new endpoint. */
  readonly reconnecting: number;
  /** The relay's epoch changed (it restarted and forgot all mail), as opposed to a rebind on the same relay state. */
  readonly relayForgot: boolean;
  readonly cause: TaskError;
}

export interface ConfiguredTaskCore {
  readonly session: VolatileTaskSession;
  /** The core (the same one for the whole run: relay loss re-homes it on a fresh endpoint). */
  current(): TaskCore;
  /** Runs an operation on the core; relay loss schedules recovery and is rethrown. */
  run<T>(operation: (core: TaskCore) => Promise<T>): Promise<T>;
  refresh(): Promise<PassReport>;
  /** Resolves when no recovery is running. */
  settled(): Promise<void>;
  recovering(): boolean;
  close(): Promise<void>;
}

export function isRelayLoss(error: unknown): boolean {
  return error instanceof TaskError && errorSpec(error.code).relayLoss;
}

/** The relay session the options (and the environment) describe. */
function sessionFor(options: ConfiguredTaskCoreOptions): VolatileTaskSession {
  const env = options.env ?? process.env;
  const callerSession = options.callerSession ?? env.WOLFPACK_SESSION_NAME?.trim();
  if (callerSession === undefined || callerSession.length === 0) throw new TaskError("RELAY_SESSION_REQUIRED");
  const url = options.url ?? relayUrlFromEnv(env);
  const auth = authFromEnv(env, url);
  return createVolatileTaskSession({
    url,
    callerSession,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }),
    ...(auth === undefined ? {} : { auth }),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
}

interface LossRecovery {
  current(): TaskCore;
  /**
   * Starts (or joins) the recovery from a relay loss; `seen` is the count of recoveries when the
   * failing operation began (a loss from before the last recovery is already handled).
   */
  schedule(cause: TaskError, seen?: number): Promise<void>;
  /** Recoveries completed so far. */
  recoveries(): number;
  /** The lifetime once no recovery is running (finishing a pending rebind first). */
  ready(): Promise<TaskCore>;
  settled(): Promise<void>;
  recovering(): boolean;
  close(): Promise<void>;
}

/**
 * The recovery state machine: after a relay loss the session binds a fresh endpoint and the same
 * lifetime is re-homed on it — its tasks stay, and each looks for its peer again (reconnect.ts).
 * A failed bind is retried by the next call.
 */
function createLossRecovery(
  session: VolatileTaskSession,
  core: TaskCore,
  onRecovered: ((info: RecoveryInfo) => void) | undefined,
): LossRecovery {
  let closed = false;
  let recovery: Promise<void> | undefined;
  /** A loss was seen but the fresh endpoint is not bound yet. */
  let rebindPending = false;
  let lossCause: TaskError | undefined;
  let previousEndpoint: TaskEndpoint | undefined;
  /** Completed recoveries: a loss seen by an operation that began before one is already handled. */
  let recoveries = 0;
  /** The epoch of the last binding this recovery made (the first binding's comes with the loss). */
  let knownEpoch: string | undefined;

  async function recover(cause: TaskError): Promise<void> {
    if (!rebindPending) {
      rebindPending = true;
      lossCause = cause;
      previousEndpoint = core.endpoint();
    }
    if (closed) return;
    const binding = await session.rebind();
    rebindPending = false;
    recoveries += 1;
    const boundEpoch = lossCause!.details.boundEpoch ?? knownEpoch;
    knownEpoch = binding.epoch;
    // Unknown epoch: assume the relay forgot (re-sending to a relay that remembers only risks a conflict).
    const relayForgot = boundEpoch === undefined || boundEpoch !== binding.epoch;
    const reconnecting = rehomeCore(core, binding.endpoint, relayForgot);
    onRecovered?.({ endpoint: binding.endpoint, previousEndpoint, reconnecting, relayForgot, cause: lossCause! });
  }

  function schedule(cause: TaskError, seen = recoveries): Promise<void> {
    if (closed || seen !== recoveries) return Promise.resolve();
    if (recovery === undefined) {
      const attempt = recover(cause).finally(() => {
        if (recovery === attempt) recovery = undefined;
      });
      recovery = attempt;
    }
    return recovery;
  }

  return {
    current: () => core,
    schedule,
    recoveries: () => recoveries,
    async ready() {
      if (closed) throw new TaskError("RELAY_CLOSED");
      if (recovery !== undefined) await recovery.catch(() => undefined);
      if (rebindPending) await schedule(lossCause ?? new TaskError("RELAY_REBIND_REQUIRED"));
      return core;
    },
    async settled() {
      while (recovery !== undefined) await recovery.catch(() => undefined);
    },
    recovering: () => recovery !== undefined || rebindPending,
    /** Stops recovering and closes the lifetime (a running recovery binds nothing more). */
    async close() {
      closed = true;
      await core.close();
    },
  };
}

export function createConfiguredTaskCore(options: ConfiguredTaskCoreOptions = {}): ConfiguredTaskCore {
  const session = sessionFor(options);
  const host = options.host ?? absentHost;
  const core = createTaskCore({
    store: createTaskStore<CoreBook>(),
    session,
    host,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.timers === undefined ? {} : { timers: options.timers }),
    ...(options.onRefreshRequested === undefined ? {} : { onRefreshRequested: options.onRefreshRequested }),
    ...(options.trust === undefined ? {} : { trust: options.trust }),
    ...(options.autoReassign === undefined ? {} : { autoReassign: options.autoReassign }),
    ...(options.maxDepth === undefined ? {} : { maxDepth: options.maxDepth }),
    ...(options.maxActiveTasks === undefined ? {} : { maxActiveTasks: options.maxActiveTasks }),
  });
  const recovery = createLossRecovery(session, core, options.onRecovered);
  let closed = false;
  // Fire and forget: the retiring call rethrows its own error to its caller.
  session.onRetire((error) => void recovery.schedule(error).catch(() => undefined));

  async function run<T>(operation: (current: TaskCore) => Promise<T>): Promise<T> {
    const current = await recovery.ready();
    const seen = recovery.recoveries();
    try {
      return await operation(current);
    } catch (raw) {
      const error = toTaskError(raw);
      if (isRelayLoss(error)) recovery.schedule(error, seen).catch(() => undefined);
      throw raw;
    }
  }

  return {
    session,
    current: () => recovery.current(),
    run,
    refresh: () => run((current) => current.refresh()),
    settled: () => recovery.settled(),
    recovering: () => recovery.recovering(),
    async close() {
      if (closed) return;
      closed = true;
      await recovery.close();
      // Best effort, bounded: senders see TARGET_NOT_REGISTERED at once instead of after the lease.
      if (session.status() === "ready") await within(session.disconnect(), shutdownDisconnectMs).catch(() => undefined);
      session.close();
      await recovery.settled();
    },
  };
}
