/**
 * `createRecoveringTaskCore()` (the Wolfpack design's "configured task core"): a TaskCore that owns its relay
 * session and a fresh RAM store per lifetime, and replaces its lifetime after relay loss.
 *
 * Only a structured `RELAY_RESET` or `RELAY_REBIND_REQUIRED` triggers replacement: the old
 * lifetime is fenced and discarded, every active task is reported to the host as locally failed
 * with `RELAY_STATE_LOST` (remote outcome unknown, no wake), and a fresh endpoint is bound with a
 * new generation and an empty store. Transient, auth, capacity, abort, profile and malformed
 * failures never trigger it. Old tasks are not adopted by the successor.
 */
import type { TrustOptions } from "./trust.ts";
import { errorSpec, TaskError, toTaskError } from "../protocol/errors.ts";
import { shutdownDisconnectMs } from "../protocol/limits.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import { authFromEnv } from "../relay-client/auth.ts";
import { relayUrlFromEnv } from "../relay-client/config.ts";
import { createRelaySession, type RelaySession } from "../relay-client/session.ts";
import { createTaskStore } from "../store/task-store.ts";
import type { CoreBook } from "./bookkeeping.ts";
import { holdingHost, type LossRecord, type PresentationHost } from "./host.ts";
import type { PassReport } from "./pass.ts";
import { createTaskCore, type TaskCore } from "./task-core.ts";
import { type TaskTimers, within } from "./timers.ts";

export interface RecoveringTaskCoreOptions {
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
  readonly timers?: TaskTimers;
  readonly onRefreshRequested?: () => void;
  /** Called after a lost lifetime was replaced by a fresh endpoint. */
  readonly onRecovered?: (info: RecoveryInfo) => void;
  /** The identity and peers every lifetime signs and judges with (see TaskCoreOptions.trust). */
  readonly trust?: TrustOptions;
  /** See TaskCoreOptions.autoReassign. */
  readonly autoReassign?: boolean;
}

export interface RecoveryInfo {
  readonly endpoint: TaskEndpoint;
  readonly previousEndpoint: TaskEndpoint | undefined;
  readonly failedTasks: number;
  readonly cause: TaskError;
}

export interface RecoveringTaskCore {
  readonly session: RelaySession;
  /** The current lifetime (replaced after relay loss). */
  current(): TaskCore;
  /** Runs an operation on the current lifetime; relay loss schedules recovery and is rethrown. */
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
function sessionFor(options: RecoveringTaskCoreOptions): RelaySession {
  const env = options.env ?? process.env;
  const callerSession = options.callerSession ?? env.WOLFPACK_SESSION_NAME?.trim();
  if (callerSession === undefined || callerSession.length === 0) throw new TaskError("RELAY_SESSION_REQUIRED");
  const auth = authFromEnv(env);
  return createRelaySession({
    url: options.url ?? relayUrlFromEnv(env),
    callerSession,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }),
    ...(auth === undefined ? {} : { auth }),
  });
}

/** One non-waking loss record per active task of a lost lifetime: failed locally, remote outcome unknown. */
function lossRecords(lost: TaskCore, cause: TaskError): LossRecord[] {
  const error = new TaskError("RELAY_STATE_LOST", { details: { cause: cause.code, remoteOutcome: "unknown" } });
  return lost
    .listTasks()
    .filter((task) => task.status === "active")
    .map((task) => ({ task: { ...task, status: "failed" }, error: error.withDetails({ taskId: task.taskId }) }));
}

interface LossRecovery {
  current(): TaskCore;
  /** Starts (or joins) the recovery from a relay loss. */
  schedule(cause: TaskError): Promise<void>;
  /** The current lifetime once no recovery is running (finishing a pending rebind first). */
  ready(): Promise<TaskCore>;
  settled(): Promise<void>;
  recovering(): boolean;
  close(): Promise<void>;
}

/**
 * The recovery state machine: a lost lifetime is fenced and discarded, its active tasks recorded
 * lost, a fresh lifetime made, then bound (a failed bind is retried by the next call, without
 * recording the loss again).
 */
function createLossRecovery(session: RelaySession, host: PresentationHost, lifetime: () => TaskCore, onRecovered: ((info: RecoveryInfo) => void) | undefined): LossRecovery {
  let core = lifetime();
  let closed = false;
  let recovery: Promise<void> | undefined;
  /** A lost lifetime was discarded but the fresh endpoint is not bound yet. */
  let rebindPending = false;
  let lossCause: TaskError | undefined;
  let lostEndpoint: TaskEndpoint | undefined;
  let failedCount = 0;

  async function recover(cause: TaskError): Promise<void> {
    const lost = core;
    if (!rebindPending && !lost.closed()) {
      lostEndpoint = lost.endpoint();
      const records = lossRecords(lost, cause);
      failedCount = records.length;
      lossCause = cause;
      await lost.close();
      core = lifetime();
      rebindPending = true;
      await host.recordLoss(records);
    }
    if (closed) return;
    const binding = await session.rebind();
    rebindPending = false;
    onRecovered?.({ endpoint: binding.endpoint, previousEndpoint: lostEndpoint, failedTasks: failedCount, cause: lossCause! });
  }

  function schedule(cause: TaskError): Promise<void> {
    if (closed) return Promise.resolve();
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
    /** Stops recovering and closes the current lifetime (a running recovery binds nothing more). */
    async close() {
      closed = true;
      await core.close();
    },
  };
}

export function createRecoveringTaskCore(options: RecoveringTaskCoreOptions = {}): RecoveringTaskCore {
  const session = sessionFor(options);
  const host = options.host ?? holdingHost;
  const lifetime = () =>
    createTaskCore({
      store: createTaskStore<CoreBook>(),
      session,
      host,
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.timers === undefined ? {} : { timers: options.timers }),
      ...(options.onRefreshRequested === undefined ? {} : { onRefreshRequested: options.onRefreshRequested }),
      ...(options.trust === undefined ? {} : { trust: options.trust }),
      ...(options.autoReassign === undefined ? {} : { autoReassign: options.autoReassign }),
    });
  const recovery = createLossRecovery(session, host, lifetime, options.onRecovered);
  let closed = false;
  // Fire and forget: the retiring call rethrows its own error to its caller.
  session.onRetire((error) => void recovery.schedule(error).catch(() => undefined));

  async function run<T>(operation: (current: TaskCore) => Promise<T>): Promise<T> {
    const current = await recovery.ready();
    try {
      return await operation(current);
    } catch (raw) {
      const error = toTaskError(raw);
      if (isRelayLoss(error)) recovery.schedule(error).catch(() => undefined);
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
