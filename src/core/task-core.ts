/**
 * TaskCore: one endpoint lifetime's task operations and its phased refresh pass.
 *
 * Each operation validates its input, writes everything it creates in one store transaction,
 * ships its own envelope in the foreground (after older mail to the same target), then requests
 * a background refresh. It reports relay acceptance of its own envelope only — never execution.
 * The core never imports Pi: presentation goes through a `PresentationHost`.
 */
import { endpointKey, sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { eventTypeRow, isTerminalStatus } from "../protocol/events.ts";
import { maxRelayPayloadBytes, TASK_PROTOCOL_VERSION, taskTimeoutDefaultMs } from "../protocol/limits.ts";
import {
  CancelParams,
  DoneParams,
  MessageParams,
  SendParams,
  type TaskEndpoint,
  type TaskEvent,
  type TaskRecord,
  type TerminalDelivery,
} from "../protocol/schemas.ts";
import { assertValid } from "../protocol/validate.ts";
import type { RelaySession } from "../relay-client/session.ts";
import type { TaskSnapshot, TaskStore } from "../store/task-store.ts";
import { assertOpen, checkEndpoint, type CoreContext, isClosed } from "./context.ts";
import { assignmentBytes, makeEnvelope, makeEvent, makeIntent, nextSequence } from "./envelopes.ts";
import { type DeliveryEvidence, deliveryEvidence } from "./evidence.ts";
import { holdingHost, type PresentationHost } from "./host.ts";
import { fanOut } from "./intake.ts";
import { type SendOutcome, sendInOrder } from "./outbox.ts";
import { intakeInbox, type PassReport, repairAcknowledgements, runPhasedPass, shipRequired } from "./pass.ts";
import { hasEvidence, type ReceiveItem, receiveItems } from "./presentation.ts";
import { createWorkScope, type ScopeMode, type WorkScope } from "./scope.ts";
import { systemTimers, type TaskTimers } from "./timers.ts";

export interface TaskCoreOptions {
  readonly store: TaskStore;
  readonly session: RelaySession;
  /** Stamps task records and envelopes (default `Date.now`). */
  readonly clock?: () => number;
  /** Drives deadlines, slices and cooldowns (default system time). */
  readonly timers?: TaskTimers;
  readonly host?: PresentationHost;
  /** Called when an operation wants a background refresh (the owner schedules it). */
  readonly onRefreshRequested?: () => void;
}

export interface TaskView extends TaskSnapshot {
  readonly deliveryEvidence: DeliveryEvidence;
}

export type Delivery = "accepted" | "pending" | "blocked";

export interface OperationOptions {
  readonly signal?: AbortSignal;
}

export interface CreateResult {
  readonly taskId: string;
  readonly envelopeId: string;
  readonly target: TaskEndpoint;
}

export interface MessageResult {
  readonly taskId: string;
  readonly eventId?: string;
  readonly intentId?: string;
  readonly envelopeId: string;
  readonly authority: "origin" | "receiver";
}

export interface DoneResult {
  readonly taskId: string;
  readonly requestedStatus: string;
  readonly observedCanonicalStatus: string;
  readonly terminalDelivery: TerminalDelivery;
  readonly authority: "origin" | "receiver";
  readonly canonicalEvent?: { readonly type: string; readonly eventId: string };
}

export interface CancelResult {
  readonly taskId: string;
  readonly status: "cancelled";
  readonly eventId: string;
  readonly delivery: Delivery;
  readonly warnings: readonly { code: string; message: string; retryable: false; delivery: "blocked"; target: TaskEndpoint }[];
}

export interface AckResult {
  readonly taskId: string;
  readonly eventId: string;
  readonly delivery: Delivery;
}

export interface ReassignResult {
  readonly taskId: string;
  readonly previousTarget: TaskEndpoint;
  readonly target: TaskEndpoint;
  readonly eventId: string;
  readonly envelopeId: string;
  readonly historyTruncated: boolean;
}

export interface TaskCore {
  /** This lifetime's endpoint once bound. */
  endpoint(): TaskEndpoint | undefined;
  connect(options?: OperationOptions): Promise<TaskEndpoint>;
  createTask(input: unknown, options?: OperationOptions): Promise<CreateResult>;
  message(input: unknown, options?: OperationOptions): Promise<MessageResult>;
  done(input: unknown, options?: OperationOptions): Promise<DoneResult>;
  cancel(input: unknown, options?: OperationOptions): Promise<CancelResult>;
  acknowledgeParent(taskId: string, options?: OperationOptions): Promise<AckResult>;
  reassignTask(taskId: string, options?: OperationOptions): Promise<ReassignResult>;
  getTask(taskId: string): TaskView;
  findTask(taskId: string): TaskView | undefined;
  listTasks(): TaskView[];
  receive(): ReceiveItem[];
  completeLocalPresentation(eventId: string): boolean;
  hasPendingWork(): boolean;
  hasActiveTasks(): boolean;
  activeTaskIds(): string[];
  /** The highest relay cursor this lifetime tracked (new mail is mail after it). */
  cursor(): string;
  /** Whether this lifetime recorded the model-visible insertion of an event. */
  insertionRecorded(eventId: string): boolean;
  onChange(listener: () => void): () => void;
  /** Runs a phased pass; concurrent calls share it and requests during it coalesce into one trailing pass. */
  refresh(options?: OperationOptions): Promise<PassReport>;
  createWorkScope(signal?: AbortSignal, mode?: ScopeMode): WorkScope;
  intakeInbox(scope: WorkScope): Promise<PassReport["intake"]>;
  shipRequired(scope: WorkScope): Promise<number>;
  repairAcknowledgements(scope: WorkScope): Promise<{ acked: number; exhausted: boolean }>;
  readonly store: TaskStore;
  readonly session: RelaySession;
  closed(): boolean;
  /** Fences new work, aborts requests, drains active calls and discards state. */
  close(): Promise<void>;
}

function unknownTask(taskId: string): TaskError {
  return new TaskError("UNKNOWN_TASK", { details: { taskId } });
}

function deliveryOf(outcome: SendOutcome): Delivery {
  return outcome.state === "accepted" ? "accepted" : outcome.state === "quarantined" ? "blocked" : "pending";
}

/** Throws the outcome's error (with the task id) unless the envelope was accepted. */
function requireAccepted(outcome: SendOutcome, taskId: string): void {
  if (outcome.state === "accepted") return;
  throw outcome.error.withDetails({ taskId, envelopeId: outcome.envelopeId, delivery: deliveryOf(outcome) });
}

export function createTaskCore(options: TaskCoreOptions): TaskCore {
  const store = options.store;
  const session = options.session;
  const timers = options.timers ?? systemTimers;
  const clock = options.clock ?? Date.now;
  const active = new Set<Promise<unknown>>();
  const context: CoreContext = {
    store,
    session,
    clock,
    timers,
    host: options.host ?? holdingHost,
    lifetime: new AbortController(),
    sending: new Map(),
    withheld: new Map(),
    requestRefresh: () => options.onRefreshRequested?.(),
    boundEndpoint: undefined,
    hold: undefined,
  };

  /** Tracks an active call so close() can drain it. */
  function track<T>(operation: string, run: () => Promise<T>): Promise<T> {
    assertOpen(context, operation);
    const promise = run();
    active.add(promise);
    const forget = () => active.delete(promise);
    promise.then(forget, forget);
    return promise;
  }

  function foreground(signal: AbortSignal | undefined): WorkScope {
    return createWorkScope({ timers, mode: "foreground", signals: [context.lifetime.signal, signal] });
  }

  async function shipOwn(scope: WorkScope, envelopeId: string): Promise<SendOutcome> {
    try {
      return await sendInOrder(context, scope, envelopeId, "scoped");
    } finally {
      scope.dispose();
      if (!isClosed(context)) context.requestRefresh();
    }
  }

  function requireTask(taskId: string) {
    const stored = store.getStoredTask(taskId);
    if (stored === undefined) throw unknownTask(taskId);
    return stored;
  }

  function view(task: TaskSnapshot): TaskView {
    return { ...task, deliveryEvidence: deliveryEvidence(store, task) };
  }

  async function bound(signal: AbortSignal | undefined): Promise<TaskEndpoint> {
    // A caller that gave up before the operation started gets ABORTED, and nothing is committed.
    if (signal?.aborted) throw new TaskError("ABORTED", { details: { sent: false } });
    const binding = await session.lease(signal === undefined ? context.lifetime.signal : AbortSignal.any([signal, context.lifetime.signal]));
    assertOpen(context, "connect");
    checkEndpoint(context, binding.endpoint);
    return binding.endpoint;
  }

  /** Appends an origin-authored canonical event and fans it out (no local echo). */
  function originEvent(task: TaskRecord, type: TaskEvent["type"], payload: Record<string, unknown>): { event: TaskEvent; envelopeId: string } {
    const event = makeEvent(task, type, nextSequence(store, task.taskId), clock(), payload);
    store.appendEvent(event);
    const terminal = eventTypeRow(type).terminalStatus;
    if (terminal !== null) store.setStatus(task.taskId, terminal);
    const envelopeId = fanOut(context, undefined, task, event, false);
    return { event, envelopeId };
  }

  // -- create --------------------------------------------------------------------------------------

  async function createTask(input: unknown, signal: AbortSignal | undefined): Promise<CreateResult> {
    const params = assertValid(SendParams, input, { subject: "agent_task_send" });
    const self = await bound(signal);
    // A definitive refusal here means no task is created.
    const { endpoint: target } = await session.resolve(params.to, { signal: AbortSignal.any([context.lifetime.signal, ...(signal ? [signal] : [])]) });
    assertOpen(context, "createTask");
    if (sameEndpoint(target, self)) throw new TaskError("INVALID_TARGET", { message: "a task cannot be sent to this endpoint itself", details: { target } });
    const createdAt = clock();
    const task: TaskRecord = {
      taskId: crypto.randomUUID(),
      protocolVersion: TASK_PROTOCOL_VERSION,
      origin: self,
      target,
      task: params.task,
      createdAt,
      expiresAt: createdAt + (params.timeoutMs ?? taskTimeoutDefaultMs),
      status: "active",
    };
    const created = makeEvent(task, "task.created", "1", createdAt, { task: task.task });
    const envelope = makeEnvelope(self, target, task.taskId, "assignment", { task, event: created }, createdAt);
    store.transaction(() => {
      store.putTask(task, "origin");
      store.appendEvent(created);
      store.putOutbox({ envelopeId: envelope.envelopeId, taskId: task.taskId, target, kind: "assignment", purpose: "assignment", envelope });
      store.reserveOperation(task.taskId, `assignment:${created.eventId}`, () => ({
        logicalId: created.eventId,
        logicalType: created.type,
        envelopeIds: [envelope.envelopeId],
        createdAt,
      }));
    });
    const outcome = await shipOwn(foreground(signal), envelope.envelopeId);
    if (outcome.state === "quarantined" && !isClosed(context)) {
      // Definitively undeliverable: the task exists, and fails locally with the relay's reason.
      store.transaction(() => {
        if (store.getStoredTask(task.taskId)?.record.status !== "active") return;
        const failed = makeEvent(task, "task.failed", nextSequence(store, task.taskId), clock(), {
          summary: "The assignment could not be delivered.",
          error: { code: outcome.error.code, message: outcome.error.message, retryable: false },
        });
        store.appendEvent(failed);
        store.setStatus(task.taskId, "failed");
      });
    }
    requireAccepted(outcome, task.taskId);
    return { taskId: task.taskId, envelopeId: envelope.envelopeId, target };
  }

  // -- message -------------------------------------------------------------------------------------

  function checkReply(task: TaskRecord, type: string, inReplyTo: string | undefined): void {
    if (type === "answer" && inReplyTo === undefined) {
      throw new TaskError("INVALID_REQUEST", { message: "an answer must name the question it answers (inReplyTo)", details: { path: "/inReplyTo", problem: "missing" } });
    }
    if (inReplyTo === undefined) return;
    const referenced = store.getEvent(inReplyTo);
    const valid = referenced !== undefined && referenced.taskId === task.taskId && (type !== "answer" || referenced.type === "task.question");
    if (!valid) {
      throw new TaskError("INVALID_REQUEST", {
        message: type === "answer" ? "inReplyTo must name a task.question event of this task" : "inReplyTo must name an event of this task",
        details: { path: "/inReplyTo", inReplyTo },
      });
    }
  }

  async function message(input: unknown, signal: AbortSignal | undefined): Promise<MessageResult> {
    const params = assertValid(MessageParams, input, { subject: "agent_task_message" });
    const self = await bound(signal);
    const stored = requireTask(params.taskId);
    const task = stored.record;
    const isOrigin = stored.role === "origin" && sameEndpoint(task.origin, self);
    const isTarget = stored.role === "target" && sameEndpoint(task.target, self);
    if (!isOrigin && !isTarget) throw new TaskError("NOT_PARTICIPANT", { details: { taskId: params.taskId } });
    checkReply(task, params.type, params.inReplyTo);
    const type = `task.${params.type}` as const;
    const payload = { message: params.message, ...(params.inReplyTo === undefined ? {} : { inReplyTo: params.inReplyTo }) };
    if (isOrigin) {
      const { event, envelopeId } = store.transaction(() => originEvent(task, type, payload));
      requireAccepted(await shipOwn(foreground(signal), envelopeId), task.taskId);
      return { taskId: task.taskId, eventId: event.eventId, envelopeId, authority: "origin" };
    }
    const intent = makeIntent(task.taskId, type, payload);
    const envelope = makeEnvelope(self, task.origin, task.taskId, "intent", intent, clock());
    store.transaction(() => {
      store.putIntent(intent, envelope.envelopeId);
      store.putOutbox({ envelopeId: envelope.envelopeId, taskId: task.taskId, target: task.origin, kind: "intent", purpose: "intent", envelope });
    });
    requireAccepted(await shipOwn(foreground(signal), envelope.envelopeId), task.taskId);
    return { taskId: task.taskId, intentId: intent.intentId, envelopeId: envelope.envelopeId, authority: "receiver" };
  }

  // -- done ----------------------------------------------------------------------------------------

  async function done(input: unknown, signal: AbortSignal | undefined): Promise<DoneResult> {
    const params = assertValid(DoneParams, input, { subject: "agent_task_done" });
    const self = await bound(signal);
    const stored = requireTask(params.taskId);
    const task = stored.record;
    const type = `task.${params.status}` as const;
    const payload = {
      summary: params.summary,
      ...(params.result === undefined ? {} : { result: params.result }),
      ...(params.error === undefined ? {} : { error: params.error }),
      ...(params.artifacts === undefined ? {} : { artifacts: params.artifacts }),
    };
    if (stored.role === "origin" && sameEndpoint(task.origin, self)) return originDone(task, type, payload, signal);
    if (!(stored.role === "target" && sameEndpoint(task.target, self))) throw new TaskError("NOT_PARTICIPANT", { details: { taskId: task.taskId } });
    const existing = store.getOperation(task.taskId, "terminal_intent");
    if (existing !== undefined && existing.logicalType !== type) {
      throw new TaskError("TERMINAL_INTENT_CONFLICT", { details: { taskId: task.taskId, existingType: existing.logicalType, requestedType: type } });
    }
    let envelopeId = existing?.envelopeIds[0];
    if (envelopeId === undefined) {
      const intent = makeIntent(task.taskId, type, payload);
      const envelope = makeEnvelope(self, task.origin, task.taskId, "intent", intent, clock());
      envelopeId = envelope.envelopeId;
      store.transaction(() => {
        store.putIntent(intent, envelope.envelopeId);
        store.putOutbox({ envelopeId: envelope.envelopeId, taskId: task.taskId, target: task.origin, kind: "intent", purpose: "terminal", envelope });
        store.reserveOperation(task.taskId, "terminal_intent", () => ({
          logicalId: intent.intentId,
          logicalType: type,
          envelopeIds: [envelope.envelopeId],
          createdAt: clock(),
        }));
      });
    }
    const outcome = await shipOwn(foreground(signal), envelopeId);
    const snapshot = store.getTask(task.taskId)!;
    if (outcome.state === "failed" || outcome.state === "deferred") {
      // Retryable: the intent and envelope ids are kept for the retry.
      throw outcome.error.withDetails({ taskId: task.taskId, terminalDelivery: snapshot.terminalDelivery });
    }
    return {
      taskId: task.taskId,
      requestedStatus: params.status,
      observedCanonicalStatus: snapshot.status,
      terminalDelivery: snapshot.terminalDelivery,
      authority: "receiver",
    };
  }

  async function originDone(task: TaskRecord, type: "task.completed" | "task.failed" | "task.cancelled", payload: Record<string, unknown>, signal: AbortSignal | undefined): Promise<DoneResult> {
    const reservation = store.transaction(() =>
      store.reserveOperation(task.taskId, "origin_terminal", () => {
        const terminal = isTerminalStatus(store.getStoredTask(task.taskId)!.record.status);
        const { event, envelopeId } = terminal
          ? originEvent(task, "task.late_terminal", { ...payload, lateType: type })
          : originEvent(task, type, payload);
        return { logicalId: event.eventId, logicalType: event.type, envelopeIds: [envelopeId], createdAt: clock() };
      }),
    ).record;
    if (reservation.logicalType !== type && reservation.logicalType !== "task.late_terminal") {
      throw new TaskError("TERMINAL_INTENT_CONFLICT", { details: { taskId: task.taskId, existingType: reservation.logicalType, requestedType: type } });
    }
    await shipOwn(foreground(signal), reservation.envelopeIds[0]!);
    const snapshot = store.getTask(task.taskId)!;
    return {
      taskId: task.taskId,
      requestedStatus: type.slice("task.".length),
      observedCanonicalStatus: snapshot.status,
      terminalDelivery: snapshot.terminalDelivery,
      authority: "origin",
      canonicalEvent: { type: reservation.logicalType, eventId: reservation.logicalId },
    };
  }

  // -- cancel and parent acknowledgement -----------------------------------------------------------

  function requireOrigin(taskId: string, self: TaskEndpoint) {
    const stored = requireTask(taskId);
    if (stored.role !== "origin" || !sameEndpoint(stored.record.origin, self)) throw new TaskError("NOT_ORIGIN", { details: { taskId } });
    return stored.record;
  }

  async function cancel(input: unknown, signal: AbortSignal | undefined): Promise<CancelResult> {
    const params = assertValid(CancelParams, input, { subject: "agent_task_cancel" });
    const self = await bound(signal);
    const task = requireOrigin(params.taskId, self);
    const reservation = store.transaction(() => {
      const existing = store.getOperation(task.taskId, "origin_cancellation");
      if (existing === undefined && isTerminalStatus(store.getStoredTask(task.taskId)!.record.status)) {
        throw new TaskError("TASK_TERMINAL", { details: { taskId: task.taskId, status: store.getStoredTask(task.taskId)!.record.status } });
      }
      return store.reserveOperation(task.taskId, "origin_cancellation", () => {
        const { event, envelopeId } = originEvent(task, "task.cancelled", { summary: params.reason ?? "Cancelled by the origin." });
        return { logicalId: event.eventId, logicalType: event.type, envelopeIds: [envelopeId], createdAt: clock() };
      }).record;
    });
    const outcome = await shipOwn(foreground(signal), reservation.envelopeIds[0]!);
    if (outcome.state === "failed" || outcome.state === "deferred") throw outcome.error.withDetails({ taskId: task.taskId, status: "cancelled" });
    const warnings =
      outcome.state === "quarantined"
        ? [{ code: outcome.error.code, message: outcome.error.message, retryable: false as const, delivery: "blocked" as const, target: task.target }]
        : [];
    return { taskId: task.taskId, status: "cancelled", eventId: reservation.logicalId, delivery: deliveryOf(outcome), warnings };
  }

  async function acknowledgeParent(taskId: string, signal: AbortSignal | undefined): Promise<AckResult> {
    const self = await bound(signal);
    const task = requireOrigin(taskId, self);
    const reservation = store.transaction(() => {
      const current = store.getStoredTask(taskId)!.record;
      if (!isTerminalStatus(current.status)) throw new TaskError("TASK_NOT_TERMINAL", { details: { taskId, status: current.status } });
      return store.reserveOperation(taskId, "parent_acknowledgment", () => {
        const terminal = [...store.getEvents(taskId)].reverse().find((event) => eventTypeRow(event.type).terminalStatus !== null)!;
        const { event, envelopeId } = originEvent(task, "task.parent_acknowledged", { acknowledgedEventId: terminal.eventId });
        return { logicalId: event.eventId, logicalType: event.type, envelopeIds: [envelopeId], createdAt: clock() };
      }).record;
    });
    const outcome = await shipOwn(foreground(signal), reservation.envelopeIds[0]!);
    if (outcome.state === "failed" || outcome.state === "deferred") throw outcome.error.withDetails({ taskId });
    return { taskId, eventId: reservation.logicalId, delivery: deliveryOf(outcome) };
  }

  // -- reassignment --------------------------------------------------------------------------------

  function lossEvidence(task: TaskRecord): boolean {
    const lostKey = endpointKey(task.target);
    return store.listQuarantine().some((entry) => entry.targetKey === lostKey && entry.errorCode === "TARGET_NOT_REGISTERED");
  }

  function refuse(taskId: string, reason: string, details: Record<string, unknown> = {}): TaskError {
    return new TaskError("REASSIGNMENT_REFUSED", { message: `The task cannot be reassigned: ${reason}.`, details: { taskId, reason, ...details } });
  }

  async function reassignTask(taskId: string, signal: AbortSignal | undefined): Promise<ReassignResult> {
    const self = await bound(signal);
    const before = requireOrigin(taskId, self);
    if (before.status !== "active") throw refuse(taskId, "the task is not active", { status: before.status });
    if (!lossEvidence(before)) throw refuse(taskId, "no send to the current target was refused with TARGET_NOT_REGISTERED");
    let successor: TaskEndpoint;
    try {
      successor = (await session.resolve(before.target, { followSuccessor: true, signal })).endpoint;
    } catch (error) {
      const failure = toTaskError(error);
      if (failure.spec.relayLoss) throw failure;
      throw refuse(taskId, "the lost target has no live successor", { cause: failure.code });
    }
    assertOpen(context, "reassignTask");
    if (sameEndpoint(successor, self)) throw refuse(taskId, "the target resolves to this endpoint itself");
    if (sameEndpoint(successor, before.target)) throw refuse(taskId, "the target is not lost");
    const { event, envelope, truncated } = store.transaction(() => {
      // Re-checked inside the commit: one loss allows one reassignment, even when calls race.
      const current = store.getStoredTask(taskId)!.record;
      if (current.status !== "active" || !sameEndpoint(current.target, before.target) || !lossEvidence(current)) {
        throw refuse(taskId, "the task was already reassigned or is no longer active");
      }
      const history = store.getEvents(taskId).filter((item) => !eventTypeRow(item.type).originLocal);
      store.setTarget(taskId, successor);
      const moved = store.getStoredTask(taskId)!.record;
      const reassigned = makeEvent(moved, "task.reassigned", nextSequence(store, taskId), clock(), { task: moved.task, previousTarget: before.target });
      store.appendEvent(reassigned);
      const base = { task: moved, event: reassigned };
      if (assignmentBytes(taskId, base) > maxRelayPayloadBytes) {
        throw new TaskError("PAYLOAD_TOO_LARGE", { details: { taskId, maxBytes: maxRelayPayloadBytes } });
      }
      let kept: TaskEvent[] = [];
      for (let index = history.length - 1; index >= 0; index -= 1) {
        const candidate = [history[index]!, ...kept];
        if (assignmentBytes(taskId, { ...base, history: candidate, historyTruncated: index > 0 }) > maxRelayPayloadBytes) break;
        kept = candidate;
      }
      const truncated = kept.length < history.length;
      const inner = { ...base, history: kept, ...(truncated ? { historyTruncated: true } : {}) };
      const built = makeEnvelope(self, successor, taskId, "assignment", inner, clock());
      store.putOutbox({ envelopeId: built.envelopeId, taskId, target: successor, kind: "assignment", purpose: "assignment", envelope: built });
      store.reserveOperation(taskId, `assignment:${reassigned.eventId}`, () => ({
        logicalId: reassigned.eventId,
        logicalType: reassigned.type,
        envelopeIds: [built.envelopeId],
        createdAt: clock(),
      }));
      store.enqueueLocalPresentation(reassigned);
      return { event: reassigned, envelope: built, truncated };
    });
    requireAccepted(await shipOwn(foreground(signal), envelope.envelopeId), taskId);
    return { taskId, previousTarget: before.target, target: successor, eventId: event.eventId, envelopeId: envelope.envelopeId, historyTruncated: truncated };
  }

  // -- refresh ---------------------------------------------------------------------------------------

  let running: Promise<PassReport> | undefined;
  let trailing: Promise<PassReport> | undefined;

  function runPass(): Promise<PassReport> {
    const scope = createWorkScope({ timers, mode: "phased", signals: [context.lifetime.signal] });
    return runPhasedPass(context, scope);
  }

  function refresh(): Promise<PassReport> {
    assertOpen(context, "refresh");
    if (running === undefined) {
      const pass = track("refresh", runPass).finally(() => {
        if (running === pass) running = undefined;
      });
      running = pass;
      return pass;
    }
    if (trailing === undefined) {
      const after = running.then(
        () => undefined,
        () => undefined,
      );
      trailing = after.then(() => {
        trailing = undefined;
        return refresh();
      });
    }
    return trailing;
  }

  return {
    store,
    session,
    endpoint: () => session.binding()?.endpoint,
    connect: (opts = {}) => track("connect", () => bound(opts.signal)),
    createTask: (input, opts = {}) => track("createTask", () => createTask(input, opts.signal)),
    message: (input, opts = {}) => track("message", () => message(input, opts.signal)),
    done: (input, opts = {}) => track("done", () => done(input, opts.signal)),
    cancel: (input, opts = {}) => track("cancel", () => cancel(input, opts.signal)),
    acknowledgeParent: (taskId, opts = {}) => track("acknowledgeParent", () => acknowledgeParent(taskId, opts.signal)),
    reassignTask: (taskId, opts = {}) => track("reassignTask", () => reassignTask(taskId, opts.signal)),
    getTask(taskId) {
      const task = store.getTask(taskId);
      if (task === undefined) throw unknownTask(taskId);
      return view(task);
    },
    findTask(taskId) {
      const task = store.getTask(taskId);
      return task === undefined ? undefined : view(task);
    },
    listTasks: () => store.listTasks().map(view),
    receive: () => receiveItems(store),
    completeLocalPresentation: (eventId) => store.completeLocalPresentation(eventId),
    hasPendingWork: () => store.pendingOutboxCount() > 0 || store.pendingDeliveryCount() > 0 || store.stats().localPresentations > 0,
    hasActiveTasks: () => store.hasActiveTasks(),
    activeTaskIds: () => store.activeTaskIds(),
    cursor: () => store.checkpoint().highWater,
    insertionRecorded: (eventId) => hasEvidence(store, eventId, "inserted"),
    onChange: (listener) => store.onChange(listener),
    refresh: () => refresh(),
    createWorkScope: (signal, mode = "phased") => createWorkScope({ timers, mode, signals: [context.lifetime.signal, signal] }),
    intakeInbox: (scope) => intakeInbox(context, scope),
    shipRequired: (scope) => shipRequired(context, scope),
    repairAcknowledgements: (scope) => repairAcknowledgements(context, scope),
    closed: () => isClosed(context),
    async close() {
      if (isClosed(context)) return;
      context.lifetime.abort(new TaskError("RELAY_CLOSED"));
      await Promise.allSettled([...active]);
      store.clear();
    },
  };
}
