/**
 * What every foreground operation shares: binding the endpoint, finding the task and checking the
 * caller's role, and the one reserve-and-ship path — write what the operation creates (reserved
 * once per idempotency key) in one transaction, then ship its own envelope in the foreground
 * (after older mail to the same target) and ask for a background refresh. An operation reports
 * relay acceptance of its own envelope only — never execution.
 */
import { sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError } from "../protocol/errors.ts";
import type { TaskEndpoint, TaskRecord } from "../protocol/schemas.ts";
import type { StoredTask } from "../store/task-store.ts";
import type { CoreReservation, OperationKey } from "./bookkeeping.ts";
import { assertOpen, type CoreContext, isClosed } from "./context.ts";
import { type SendOutcome, sendInOrder } from "./outbox.ts";
import { createTaskWorkScope } from "./scope.ts";
import { askProof } from "./proofs.ts";

/** How an operation's own envelope fared at the relay. */
export type EnvelopeDelivery = "accepted" | "pending" | "blocked";

export function deliveryOf(outcome: SendOutcome): EnvelopeDelivery {
  return outcome.state === "accepted" ? "accepted" : outcome.state === "quarantined" ? "blocked" : "pending";
}

/** Throws the outcome's error (with the task id) unless the envelope was accepted. */
export function requireAccepted(outcome: SendOutcome, taskId: string): void {
  if (outcome.state === "accepted") return;
  throw outcome.error.withDetails({ taskId, envelopeId: outcome.envelopeId, delivery: deliveryOf(outcome) });
}

/** Throws the outcome's error unless the envelope was accepted or quarantined (a settled outcome). */
export function requireSettled(outcome: SendOutcome, details: Record<string, unknown>): void {
  if (outcome.state === "failed" || outcome.state === "deferred") throw outcome.error.withDetails(details);
}

/** The caller's signal joined with the lifetime's fence. */
export function fenced(context: CoreContext, signal: AbortSignal | undefined): AbortSignal {
  return signal === undefined ? context.lifetime.signal : AbortSignal.any([signal, context.lifetime.signal]);
}

/** This lifetime's endpoint, binding (or renewing the lease) first. */
export async function leasedEndpoint(context: CoreContext, signal: AbortSignal | undefined): Promise<TaskEndpoint> {
  // A caller that gave up before the operation started gets ABORTED, and nothing is committed.
  if (signal?.aborted) throw new TaskError("ABORTED", { details: { sent: false } });
  const binding = await context.session.lease(fenced(context, signal));
  assertOpen(context, "connect");
  context.lifetime.checkEndpoint(binding.endpoint);
  return binding.endpoint;
}

export function requireTask(context: CoreContext, taskId: string): StoredTask {
  const stored = context.store.getStoredTask(taskId);
  if (stored === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId } });
  return stored;
}

/** The task, when this endpoint is its origin (`NOT_ORIGIN` otherwise). */
export function requireOrigin(context: CoreContext, taskId: string, self: TaskEndpoint): TaskRecord {
  const stored = requireTask(context, taskId);
  if (stored.role !== "origin" || !sameEndpoint(stored.record.origin, self)) throw new TaskError("NOT_ORIGIN", { details: { taskId } });
  return stored.record;
}

/** Which side of the task this endpoint is (`NOT_PARTICIPANT` when neither). */
export function roleOf(context: CoreContext, taskId: string, self: TaskEndpoint): { task: TaskRecord; role: "origin" | "worker" } {
  const stored = requireTask(context, taskId);
  const task = stored.record;
  if (stored.role === "origin" && sameEndpoint(task.origin, self)) return { task, role: "origin" };
  if (stored.role === "worker" && sameEndpoint(task.target, self)) return { task, role: "worker" };
  throw new TaskError("NOT_PARTICIPANT", { details: { taskId } });
}

/** Ships one envelope in a foreground scope (older mail to its target first), then asks for a refresh. */
export async function shipOwn(context: CoreContext, signal: AbortSignal | undefined, envelopeId: string): Promise<SendOutcome> {
  const scope = createTaskWorkScope({ timers: context.timers, mode: "foreground", signals: [context.lifetime.signal, signal] });
  try {
    return await sendInOrder(context, scope, envelopeId, "scoped");
  } finally {
    scope.dispose();
    // While the outage wait lasts the next scheduled pass probes anyway: no extra pass per operation.
    if (!isClosed(context) && context.health.outageUntil() === undefined) context.requestRefresh();
  }
}

/**
 * Asks a not yet proven target which key holds it, in the foreground (a hello sent now; its answer
 * releases what waits for it: proofs.ts). `TARGET_NOT_REGISTERED` is thrown: nothing can reach it.
 */
export async function askFirst(context: CoreContext, signal: AbortSignal | undefined, target: TaskEndpoint): Promise<void> {
  const scope = createTaskWorkScope({ timers: context.timers, mode: "foreground", signals: [context.lifetime.signal, signal] });
  try {
    await askProof(context, scope, target);
  } finally {
    scope.dispose();
    if (!isClosed(context)) context.requestRefresh();
  }
}

export interface Reserved {
  readonly logicalId: string;
  readonly logicalType: string;
  readonly envelopeId: string;
}

/**
 * The reserve-and-ship path of an idempotent operation: the first call creates what it must (in one
 * transaction, with `check` run inside it first) and every retry reuses it; then the operation's own
 * envelope is shipped.
 */
export async function reserveAndShip(
  context: CoreContext,
  signal: AbortSignal | undefined,
  taskId: string,
  key: OperationKey,
  create: () => Reserved,
  check: (existing: CoreReservation | undefined) => void = () => undefined,
): Promise<{ record: CoreReservation; outcome: SendOutcome }> {
  const { store } = context;
  const record = store.transaction(() => {
    check(store.getOperation(taskId, key));
    return store.reserveOperation(taskId, key, () => {
      const made = create();
      return { logicalId: made.logicalId, logicalType: made.logicalType, envelopeIds: [made.envelopeId], createdAt: context.clock() };
    }).record;
  });
  return { record, outcome: await shipOwn(context, signal, record.envelopeIds[0]!) };
}
