/**
 * TaskCore: one endpoint lifetime's task operations and its phased refresh pass.
 *
 * The operations live with their side (origin-operations.ts, worker-operations.ts, reassign.ts)
 * and share one reserve-and-ship path (ship.ts). Each validates its input once, writes what it
 * creates in one store transaction, ships its own envelope in the foreground and asks for one
 * background refresh. It reports relay acceptance of its own envelope only — never execution.
 * The core never imports Pi: presentation goes through a `PresentationHost`.
 *
 * The `TaskCore` interface answers what callers (the Pi extension, the library) ask and exposes no
 * internals; tests and benchmarks that must look inside use `coreInternals(core)`.
 */
import { TaskError } from "../protocol/errors.ts";
import { maxActiveOriginTasks, maxDelegationDepth, minProgressIntervalMs } from "../protocol/limits.ts";
import {
  AckParams,
  CancelParams,
  DoneParams,
  MessageParams,
  RequestGrantParams,
  ReviseParams,
  SendParams,
  type TaskEndpoint,
  type TaskRecord,
} from "../protocol/schemas.ts";
import { assertValid } from "../protocol/validate.ts";
import type { VolatileTaskSession } from "../relay-client/session.ts";
import type { CoreStore } from "./bookkeeping.ts";
import { assertOpen, type CoreContext, isClosed } from "./context.ts";
import { absentHost, type PresentationHost } from "./host.ts";
import { acknowledge, cancel, createTask, originDone, originMessage } from "./origin-operations.ts";
import { type PassReport, runPhasedPass } from "./pass.ts";
import { hasEvidence, type ReceiveItem, receiveItems } from "./presentation.ts";
import { reassignTask } from "./reassign.ts";
import { type WaitingMail, waitingMail } from "./outbox.ts";
import type {
  AckResult,
  CancelResult,
  CreateOptions,
  CreateResult,
  DoneResult,
  MessageResult,
  OperationOptions,
  ReassignResult,
} from "./results.ts";
import { createTaskWorkScope } from "./scope.ts";
import { askFirst, leasedEndpoint, roleOf } from "./ship.ts";
import { workerDone, workerIntent, workerMessage } from "./worker-operations.ts";
import { type ActivityNotSent, type ActivityReport, sendActivity, type UnreportedReport } from "./activity.ts";
import { orphanWorkerTasks } from "./liveness.ts";
import { systemTimers, type TaskTimers } from "./timers.ts";
import { checkCorrection } from "./corrections.ts";
import { rehome } from "./reconnect.ts";
import { requestRevision, type RevisionResult } from "./revision.ts";
import { decideGrant, type GrantDecisionResult, requestGrant } from "./grant-requests.ts";
import { type AuditReport, auditReport, requestAudit } from "./audit.ts";
import { createTrustState, processLocalTrust, type TrustOptions } from "./trust.ts";
import { ROOT_DEPTH } from "./lineage.ts";
import { createProofBook } from "./proof-book.ts";
import { provenAt } from "./proofs.ts";
import { restoreTasks } from "./resume.ts";
import { createLifetime } from "./lifetime.ts";
import { loweredLimit } from "./lowered.ts";
import { createPacer } from "./pacer.ts";
import { createPeerSearch } from "./peer-search.ts";
import { createRelayHealth } from "./relay-health.ts";
import { createSendRegistry } from "./send-registry.ts";
import { relayState, type TaskView, viewTask } from "./views.ts";

export type {
  AckResult,
  CancelResult,
  CreateOptions,
  CreateResult,
  DoneResult,
  LineageChoice,
  MessageResult,
  OperationOptions,
  ReassignResult,
} from "./results.ts";
export type { EnvelopeDelivery } from "./ship.ts";
export type { DeliveryEvidence, TaskView } from "./views.ts";

export interface TaskCoreOptions {
  readonly store: CoreStore;
  readonly session: VolatileTaskSession;
  /** Stamps task records and envelopes (default `Date.now`). */
  readonly clock?: () => number;
  /** Drives deadlines, slices and cooldowns (default system time). */
  readonly timers?: TaskTimers;
  readonly host?: PresentationHost;
  /** Called when an operation wants a background refresh (the owner schedules it). */
  readonly onRefreshRequested?: () => void;
  /**
   * The identity that signs what this core sends and the peers it trusts (src/core/trust.ts).
   * Default: one in-memory identity per process, trusting only itself.
   */
  readonly trust?: TrustOptions;
  /** Orphaned tasks move by themselves to their lost worker's live successor (default false). */
  readonly autoReassign?: boolean;
  /**
   * The most sessions a delegation chain may hold, sending and receiving: 2 (no onward delegation)
   * up to `maxDelegationDepth` (3), the default. Configuration lowers it, never raises it.
   */
  readonly maxDepth?: number;
  /**
   * The most tasks this core may hold active as their origin: 1 up to `maxActiveOriginTasks`
   * (default: no cap — the Pi extension applies `maxActiveOriginTasks` unless the person lowers it).
   */
  readonly maxActiveTasks?: number;
}

export interface TaskCore {
  /** This lifetime's endpoint once bound. */
  endpoint(): TaskEndpoint | undefined;
  connect(options?: OperationOptions): Promise<TaskEndpoint>;
  createTask(input: unknown, options?: CreateOptions): Promise<CreateResult>;
  message(input: unknown, options?: OperationOptions): Promise<MessageResult>;
  done(input: unknown, options?: OperationOptions): Promise<DoneResult>;
  cancel(input: unknown, options?: OperationOptions): Promise<CancelResult>;
  /**
   * The origin sends a completed, unacknowledged result back to its worker with a reason
   * (`{taskId, reason}`): the task is active again for one more round (revision.ts).
   */
  requestRevision(input: unknown, options?: OperationOptions): Promise<RevisionResult>;
  /** The worker asks its origin's person for more than its grant, once per task (`{taskId, request, reason}`; grant-requests.ts). */
  requestGrant(input: unknown, options?: OperationOptions): Promise<MessageResult>;
  /** The origin's person decides an open grant request (`request`: its event id); approved widens the task's grant. */
  decideGrant(
    decision: { readonly taskId: string; readonly request: string; readonly approved: boolean; readonly note?: string },
    options?: OperationOptions,
  ): Promise<GrantDecisionResult>;
  /** The origin's acknowledgement of a terminal task (`{taskId}`). */
  acknowledge(input: unknown, options?: OperationOptions): Promise<AckResult>;
  /** Moves an orphaned task (or one whose target is gone) to `to`, else to its target's live successor. */
  reassignTask(taskId: string, options?: OperationOptions & { readonly to?: TaskEndpoint }): Promise<ReassignResult>;
  /**
   * Asks an endpoint which key holds it (a content-free hello, sent now; proofs.ts) so that a first
   * assignment to it can leave at once once it answered. Resolves with the key already proven there,
   * else undefined (its answer arrives with a later pass). `TARGET_NOT_REGISTERED` when nothing is there.
   */
  prove(endpoint: TaskEndpoint, options?: OperationOptions): Promise<string | undefined>;
  /**
   * Origin, opt-in resume (resume.ts): takes back tasks a previous lifetime of this session delegated,
   * as its session history knows them; each waits for its worker to confirm it still holds it, else
   * is orphaned. Resolves with the ids restored (RESUME_LIMIT past `maxResumeTasks`: nothing changes).
   */
  resume(tasks: readonly unknown[], options?: OperationOptions): Promise<string[]>;
  /**
   * Worker: reports what its model is doing to the origin of an active task (activity.ts): sent at
   * once, never stored or retried; resolves `true` once the relay took it, else why it was not sent.
   */
  reportActivity(taskId: string, report: ActivityReport, options?: OperationOptions): Promise<true | ActivityNotSent>;
  /** Worker: tells the origin its model ended its turns without reporting the task, with what it last said. */
  reportUnreported(taskId: string, report: UnreportedReport, options?: OperationOptions): Promise<MessageResult>;
  /** Origin: the worker at `endpoint` is known gone (its process exited); its active tasks are orphaned now. Returns how many. */
  workerGone(endpoint: TaskEndpoint): number;
  /**
   * The origin asks the task's worker for its view (sent by the next pass; the worker answers at
   * once). Returns the request's event id. See audit.ts.
   */
  requestAudit(taskId: string): string;
  /** One timeline of the task joining this side's log with the worker's newest view, gaps named. */
  audit(taskId: string): AuditReport;
  getTask(taskId: string): TaskView;
  findTask(taskId: string): TaskView | undefined;
  listTasks(): TaskView[];
  /** Items waiting for presentation (relay deliveries and local items, in intake order). */
  receive(): ReceiveItem[];
  completeLocalPresentation(eventId: string): boolean;
  /** The task's mail that has not left yet, each with what it waits for (outbox.ts `waitingMail`). */
  waitingMail(taskId: string): WaitingMail[];
  /** Where one of this lifetime's envelopes stands at the relay (`not_applicable`: no such envelope). */
  envelopeDelivery(envelopeId: string): "accepted" | "pending" | "blocked" | "not_applicable";
  /** Something is pending locally: outbox mail, unacknowledged deliveries or local presentations. */
  hasPendingWork(): boolean;
  hasActiveTasks(): boolean;
  activeTaskIds(): string[];
  /** The highest relay cursor this lifetime tracked (new mail is mail after it). */
  cursor(): string;
  /** Whether this lifetime recorded the model-visible insertion of an event. */
  insertionRecorded(eventId: string): boolean;
  /** Mail this lifetime rejected (the trust gate's and intake's), counted by code. */
  rejections(): Readonly<Record<string, number>>;
  onChange(listener: () => void): () => void;
  /** Runs a phased pass; concurrent calls share it and requests during it coalesce into one trailing pass. */
  refresh(options?: OperationOptions): Promise<PassReport>;
  closed(): boolean;
  /** Fences new work, aborts requests, drains active calls and discards state. */
  close(): Promise<void>;
}

/** What a core is made of, for tests and benchmarks that must look inside (not part of `TaskCore`). */
export interface TaskCoreInternals {
  readonly store: CoreStore;
  readonly session: VolatileTaskSession;
}

const internals = new WeakMap<TaskCore, TaskCoreInternals>();
const contexts = new WeakMap<TaskCore, CoreContext>();

/**
 * After a relay loss (the session rebound to `endpoint`), keeps this core's tasks and moves them
 * to the new endpoint; after a restart (`relayForgot`) each looks for its peer again
 * (reconnect.ts). Returns how many look.
 */
export function rehomeCore(core: TaskCore, endpoint: TaskEndpoint, relayForgot = true): number {
  const context = contexts.get(core);
  if (context === undefined) throw new TaskError("TASK_ERROR", { message: "not a TaskCore made by createTaskCore" });
  return isClosed(context) ? 0 : rehome(context, endpoint, relayForgot);
}

export function coreInternals(core: TaskCore): TaskCoreInternals {
  const found = internals.get(core);
  if (found === undefined) throw new TaskError("TASK_ERROR", { message: "not a TaskCore made by createTaskCore" });
  return found;
}

/** An answer names its question; a reply names an event of this task. */
function checkReply(context: CoreContext, task: TaskRecord, params: MessageParams): void {
  const { type, inReplyTo } = params;
  if (type === "answer" && inReplyTo === undefined) {
    throw new TaskError("INVALID_REQUEST", {
      message: "an answer must name the question it answers (inReplyTo)",
      details: { path: "/inReplyTo", problem: "missing" },
    });
  }
  if (inReplyTo === undefined) return;
  const referenced = context.store.getEvent(inReplyTo);
  const valid = referenced !== undefined && referenced.taskId === task.taskId && (type !== "answer" || referenced.type === "task.question");
  if (!valid) {
    throw new TaskError("INVALID_REQUEST", {
      message: type === "answer" ? "inReplyTo must name a task.question event of this task" : "inReplyTo must name an event of this task",
      details: { path: "/inReplyTo", inReplyTo },
    });
  }
}

/**
 * Single flight: concurrent calls share the running run; calls made while it runs coalesce into
 * one trailing run (which sees everything they asked for).
 */
function singleFlightWithTrailing<T>(run: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined;
  let trailing: Promise<T> | undefined;
  const start = (): Promise<T> => {
    if (running === undefined) {
      const current = run().finally(() => {
        if (running === current) running = undefined;
      });
      running = current;
      return current;
    }
    trailing ??= running
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        trailing = undefined;
        return start();
      });
    return trailing;
  };
  return start;
}

function terminalPayload(params: DoneParams): Record<string, unknown> {
  return {
    summary: params.summary,
    ...(params.result === undefined ? {} : { result: params.result }),
    ...(params.error === undefined ? {} : { error: params.error }),
    ...(params.artifacts === undefined ? {} : { artifacts: params.artifacts }),
  };
}

/**
 * The trust a core runs with. Its signatures claim its relay session name unless told otherwise:
 * after a relay restart peers look that name up to find it again (reconnect.ts).
 */
function trustFor(options: TaskCoreOptions): TrustOptions {
  const trust = options.trust ?? processLocalTrust();
  return trust.claimedName === undefined ? { ...trust, claimedName: options.session.callerSession } : trust;
}

/** A core's shared state, fresh (a core makes one; unit tests make one to drive a phase alone). */
export function createCoreContext(options: TaskCoreOptions): CoreContext {
  const clock = options.clock ?? Date.now;
  const timers = options.timers ?? systemTimers;
  return {
    store: options.store,
    session: options.session,
    clock,
    timers,
    host: options.host ?? absentHost,
    requestRefresh: () => options.onRefreshRequested?.(),
    settings: {
      autoReassign: options.autoReassign === true,
      maxDepth: loweredLimit(options.maxDepth, maxDelegationDepth, ROOT_DEPTH, "the delegation depth cap", "maxDepth"),
      ...(options.maxActiveTasks === undefined
        ? {}
        : { maxActiveTasks: loweredLimit(options.maxActiveTasks, maxActiveOriginTasks, 1, "the fan-out cap", "maxActiveTasks") }),
    },
    lifetime: createLifetime(),
    health: createRelayHealth(timers),
    sends: createSendRegistry(),
    search: createPeerSearch(timers),
    progressPacing: createPacer(timers, minProgressIntervalMs),
    trust: createTrustState(trustFor(options), clock()),
    proofs: createProofBook(),
  };
}

type Track = <T>(operation: string, run: () => Promise<T>) => Promise<T>;

/** The operations, validated once, each tracked so close() can drain it. */
function operations(context: CoreContext, track: Track) {
  async function message(input: unknown, signal: AbortSignal | undefined): Promise<MessageResult> {
    const params = assertValid(MessageParams, input, { subject: "agent_task_message" });
    const self = await leasedEndpoint(context, signal);
    const { task, role } = roleOf(context, params.taskId, self);
    checkReply(context, task, params);
    checkCorrection(context.store, task.taskId, role, params);
    return role === "origin" ? originMessage(context, task, params, signal) : workerMessage(context, self, task, params, signal);
  }

  async function done(input: unknown, signal: AbortSignal | undefined): Promise<DoneResult> {
    const params = assertValid(DoneParams, input, { subject: "agent_task_done" });
    const self = await leasedEndpoint(context, signal);
    const { task, role } = roleOf(context, params.taskId, self);
    const payload = terminalPayload(params);
    return role === "origin"
      ? originDone(context, task, params.status, payload, signal)
      : workerDone(context, self, task, params.status, payload, signal);
  }

  return {
    connect: (opts: OperationOptions = {}) => track("connect", () => leasedEndpoint(context, opts.signal)),
    createTask: (input: unknown, opts: CreateOptions = {}) =>
      track("createTask", async () => {
        const params = assertValid(SendParams, input, { subject: "agent_task_send" });
        return createTask(context, await leasedEndpoint(context, opts.signal), params, opts);
      }),
    message: (input: unknown, opts: OperationOptions = {}) => track("message", () => message(input, opts.signal)),
    done: (input: unknown, opts: OperationOptions = {}) => track("done", () => done(input, opts.signal)),
    cancel: (input: unknown, opts: OperationOptions = {}) =>
      track("cancel", async () => {
        const params = assertValid(CancelParams, input, { subject: "agent_task_cancel" });
        return cancel(context, await leasedEndpoint(context, opts.signal), params, opts.signal);
      }),
    acknowledge: (input: unknown, opts: OperationOptions = {}) =>
      track("acknowledge", async () => {
        const params = assertValid(AckParams, input, { subject: "agent_task_ack" });
        return acknowledge(context, await leasedEndpoint(context, opts.signal), params.taskId, opts.signal);
      }),
    reassignTask: (taskId: string, opts: OperationOptions & { readonly to?: TaskEndpoint } = {}) =>
      track("reassignTask", async () => reassignTask(context, await leasedEndpoint(context, opts.signal), taskId, opts.to, opts.signal)),
    requestRevision: (input: unknown, opts: OperationOptions = {}) =>
      track("requestRevision", async () => {
        const params = assertValid(ReviseParams, input, { subject: "agent_task_revise" });
        return requestRevision(context, await leasedEndpoint(context, opts.signal), params.taskId, params.reason, opts.signal);
      }),
    requestGrant: (input: unknown, opts: OperationOptions = {}) =>
      track("requestGrant", async () => {
        const params = assertValid(RequestGrantParams, input, { subject: "agent_task_request_grant" });
        return requestGrant(context, await leasedEndpoint(context, opts.signal), params, opts.signal);
      }),
    decideGrant: (decision: Parameters<TaskCore["decideGrant"]>[0], opts: OperationOptions = {}) =>
      track("decideGrant", async () => decideGrant(context, await leasedEndpoint(context, opts.signal), decision, opts.signal)),
    reportActivity: (taskId: string, report: ActivityReport, opts: OperationOptions = {}) =>
      track("reportActivity", async () => sendActivity(context, await leasedEndpoint(context, opts.signal), taskId, report, opts.signal)),
    reportUnreported: (taskId: string, report: UnreportedReport, opts: OperationOptions = {}) =>
      track("reportUnreported", async () => {
        const self = await leasedEndpoint(context, opts.signal);
        const { task, role } = roleOf(context, taskId, self);
        if (role !== "worker" || task.status !== "active") throw new TaskError("NOT_PARTICIPANT", { details: { taskId } });
        return workerIntent(context, self, task, "task.unreported", { ...report }, opts.signal);
      }),
    resume: (tasks: readonly unknown[], opts: OperationOptions = {}) =>
      track("resume", async () => {
        await leasedEndpoint(context, opts.signal);
        const restored = restoreTasks(context, tasks);
        if (restored.length > 0) context.requestRefresh();
        return restored;
      }),
    prove: (endpoint: TaskEndpoint, opts: OperationOptions = {}) =>
      track("prove", async () => {
        await leasedEndpoint(context, opts.signal);
        const proven = provenAt(context, endpoint);
        if (proven !== undefined) return proven.key;
        await askFirst(context, opts.signal, endpoint);
        return undefined;
      }),
  };
}

/** What callers read: task views, the presentation queue and the questions the extension asks. */
function reads(context: CoreContext) {
  const { store } = context;
  const view = (taskId: string): TaskView | undefined => {
    const task = store.getTask(taskId);
    return task === undefined ? undefined : viewTask(store, task, context.trust);
  };
  return {
    getTask(taskId: string): TaskView {
      const found = view(taskId);
      if (found === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId } });
      return found;
    },
    findTask: view,
    audit: (taskId: string) => auditReport(context, taskId),
    workerGone: (endpoint: TaskEndpoint) => {
      if (isClosed(context)) throw new TaskError("RELAY_CLOSED");
      return orphanWorkerTasks(context, endpoint);
    },
    requestAudit: (taskId: string) => {
      if (isClosed(context)) throw new TaskError("RELAY_CLOSED");
      return requestAudit(context, taskId);
    },
    listTasks: () => store.listTasks().map((task) => viewTask(store, task, context.trust)),
    receive: () => receiveItems(store),
    completeLocalPresentation: (eventId: string) => store.completeLocalPresentation(eventId),
    waitingMail: (taskId: string) => waitingMail(context, taskId),
    envelopeDelivery: (envelopeId: string) =>
      store.getOutbox(envelopeId) === undefined ? "not_applicable" : relayState(store, envelopeId),
    hasPendingWork: () => store.pendingOutboxCount() > 0 || store.pendingDeliveryCount() > 0 || store.stats().localPresentations > 0,
    hasActiveTasks: () => store.hasActiveTasks(),
    activeTaskIds: () => store.activeTaskIds(),
    cursor: () => store.checkpoint().highWater,
    insertionRecorded: (eventId: string) => hasEvidence(store, eventId, "inserted"),
    rejections: () => Object.fromEntries(context.trust.rejections),
    onChange: (listener: () => void) => store.onChange(listener),
  };
}

export function createTaskCore(options: TaskCoreOptions): TaskCore {
  const context = createCoreContext(options);
  const active = new Set<Promise<unknown>>();
  const track: Track = (operation, run) => {
    assertOpen(context, operation);
    const promise = run();
    active.add(promise);
    const forget = () => active.delete(promise);
    promise.then(forget, forget);
    return promise;
  };
  const pass = singleFlightWithTrailing(() =>
    track("refresh", () =>
      runPhasedPass(context, createTaskWorkScope({ timers: context.timers, mode: "phased", signals: [context.lifetime.signal] })),
    ),
  );
  const core: TaskCore = {
    endpoint: () => context.session.binding()?.endpoint,
    ...operations(context, track),
    ...reads(context),
    refresh() {
      assertOpen(context, "refresh");
      return pass();
    },
    closed: () => isClosed(context),
    async close() {
      if (isClosed(context)) return;
      context.lifetime.close();
      await Promise.allSettled([...active]);
      context.store.clear();
    },
  };
  internals.set(core, { store: context.store, session: context.session });
  contexts.set(core, context);
  return core;
}
