/**
 * The outbox: the one way mail enters it, and the rules by which it leaves.
 *
 * Queueing (`queueEnvelope`, `fanOut`): an envelope is encoded once — sealed to its recipient's
 * key — stored with its purpose, and reserved as the operation it fulfils, in the caller's
 * transaction. One whose target has not yet proven the key its task expects is stored `awaiting`
 * (its clear text is never sent) until a proof releases it (proofs.ts).
 *
 * Sending:
 * - per-target FIFO, in one place (`attemptSend`): an envelope leaves only after every older
 *   pending envelope to the same target is accepted (or quarantined); a younger send waits for an
 *   older one in flight, or withheld until a wake is observed;
 * - a refusal is judged by the registry (`sendRefusal`): transient → retried later, byte-identical;
 *   configuration → all relay work holds with a bounded backoff (relay-health.ts); any other definitive
 *   refusal → the envelope is quarantined: never re-sent, it blocks nothing;
 * - capacity defers an envelope for at least `capacityCooldownMs` (or the relay's longer `retryAfterMs`) by a
 *   stored cooldown, with no timer of its own;
 * - concurrent same-id sends join.
 */
import { type DeferralCause, deferral, deferralCause, sendRefusal, TaskError, toTaskError } from "../protocol/errors.ts";
import { capacityCooldownMs } from "../protocol/limits.ts";
import type {
  EnvelopeKind,
  RelayedEnvelope,
  TaskEndpoint,
  TaskEnvelope,
  TaskEvent,
  TaskRecord,
  TaskWirePayload,
} from "../protocol/schemas.ts";
import type { SendAcceptance } from "../relay-client/session.ts";
import { invariant } from "../store/rows.ts";
import { COOLDOWN, type CoreOutboxEntry, type OperationKey, type OutboxPurpose } from "./bookkeeping.ts";
import { type CoreContext, isClosed } from "./context.ts";
import { type Carriage, encodeEnvelope, openPayload } from "./envelopes.ts";
import { carriageFor } from "./proofs.ts";
import type { Slice, WorkScope } from "./scope.ts";

// ---------------------------------------------------------------------------------------------
// Queueing
// ---------------------------------------------------------------------------------------------

export interface QueuedEnvelope {
  readonly taskId: string;
  readonly from: TaskEndpoint;
  readonly to: TaskEndpoint;
  readonly kind: EnvelopeKind;
  readonly inner: TaskWirePayload["payload"];
  readonly purpose: OutboxPurpose;
  /** The operation this envelope fulfils, reserved with it. */
  readonly operation?: { readonly key: OperationKey; readonly logicalId: string; readonly logicalType: string };
  /** How it travels when the task's proofs do not decide it (a refusal to a sender this side does not trust). */
  readonly carriage?: Carriage;
}

/** Queues one envelope for a task: encodes it once, stores it and reserves its operation. */
export function queueEnvelope(context: CoreContext, spec: QueuedEnvelope): string {
  const { store } = context;
  const createdAt = context.clock();
  const carriage = spec.carriage ?? carriageFor(context, spec.taskId, spec.to);
  const awaiting = carriage === "awaiting";
  if (awaiting) checkSealedFit(context, spec, createdAt);
  const encoded = encodeEnvelope(
    spec.from,
    spec.to,
    spec.taskId,
    spec.kind,
    spec.inner,
    createdAt,
    context.trust.options,
    undefined,
    awaiting ? "clear" : carriage,
  );
  store.transaction(() => {
    store.putOutbox({
      envelopeId: encoded.envelopeId,
      taskId: spec.taskId,
      target: spec.to,
      kind: spec.kind,
      purpose: spec.purpose,
      envelopeText: encoded.text,
      awaiting,
    });
    const operation = spec.operation;
    if (operation !== undefined) {
      store.reserveOperation(spec.taskId, operation.key, () => ({
        logicalId: operation.logicalId,
        logicalType: operation.logicalType,
        envelopeIds: [encoded.envelopeId],
        createdAt,
      }));
    }
  });
  return encoded.envelopeId;
}

/**
 * An envelope that waits for its target's proof is stored in the clear and sealed later; it must fit
 * the payload bound once sealed (`PAYLOAD_TOO_LARGE` now, not after the proof). Sealed to this
 * identity's own seal key: every seal key has the same length, so the size is exact.
 */
function checkSealedFit(context: CoreContext, spec: QueuedEnvelope, createdAt: number): void {
  const own = context.trust.options.identity.seal?.().publicKey;
  if (own === undefined) return;
  encodeEnvelope(spec.from, spec.to, spec.taskId, spec.kind, spec.inner, createdAt, context.trust.options, undefined, { sealTo: own });
}

/**
 * An outbox envelope as it reads in the clear: a sealed one opened with this identity's own seal
 * key (the sender can open what it sealed), an awaiting or legacy one as stored.
 */
export function outboxEnvelope(context: CoreContext, envelopeId: string): TaskEnvelope | undefined {
  const stored = context.store.getEnvelope(envelopeId) as unknown as RelayedEnvelope | undefined;
  if (stored === undefined || !("sealed" in stored.payload)) return stored as TaskEnvelope | undefined;
  return { ...stored, payload: openPayload(context.trust.options.identity, stored.payload).payload } as TaskEnvelope;
}

/** Canonical fan-out of an event the origin created: to the target, plus local presentation. */
export function fanOut(context: CoreContext, scope: WorkScope | undefined, task: TaskRecord, event: TaskEvent, present: boolean): string {
  const envelopeId = queueEnvelope(context, {
    taskId: task.taskId,
    from: task.origin,
    to: task.target,
    kind: "canonical_event",
    inner: event,
    purpose: "fanout",
  });
  if (present) context.store.enqueueLocalPresentation(event);
  scope?.required.push(envelopeId);
  return envelopeId;
}

/** Withdraws an envelope that never reached the wire (and its reservation and cooldown). */
export function withdrawUnsent(context: CoreContext, envelopeId: string): boolean {
  const { store } = context;
  return store.transaction(() => {
    if (!store.discardUnsentOperation(envelopeId)) return false;
    store.clearCooldown(COOLDOWN.envelope(envelopeId));
    return true;
  });
}

// ---------------------------------------------------------------------------------------------
// Sending
// ---------------------------------------------------------------------------------------------

export type SendOutcome =
  | { readonly state: "accepted"; readonly envelopeId: string }
  | { readonly state: "quarantined"; readonly envelopeId: string; readonly error: TaskError }
  | { readonly state: "deferred"; readonly envelopeId: string; readonly error: TaskError }
  | { readonly state: "failed"; readonly envelopeId: string; readonly error: TaskError };

export type SendBudget = "scoped" | "oldWork";

function deferred(envelopeId: string, cause: DeferralCause, reason: string, details: Record<string, unknown> = {}): SendOutcome {
  return { state: "deferred", envelopeId, error: deferral(cause, reason, { envelopeId, ...details }) };
}

/** The settled state of an envelope without sending anything. */
export function settledOutcome(context: CoreContext, envelopeId: string): SendOutcome | undefined {
  const quarantined = context.store.getQuarantine(envelopeId);
  if (quarantined !== undefined) {
    return {
      state: "quarantined",
      envelopeId,
      error: new TaskError(quarantined.errorCode, { retryable: false, details: { ...quarantined.details, envelopeId } }),
    };
  }
  const entry = context.store.getOutbox(envelopeId);
  if (entry === undefined) return deferred(envelopeId, "budget", "unknown envelope");
  return entry.state === "accepted" ? { state: "accepted", envelopeId } : undefined;
}

/** The capacity cooldown an error asks for: at least 5 s, or the relay's longer `retryAfterMs`. */
export function capacityCooldown(error: TaskError): number {
  const retryAfterMs = error.details.retryAfterMs;
  return typeof retryAfterMs === "number" && retryAfterMs > capacityCooldownMs ? retryAfterMs : capacityCooldownMs;
}

function coolingDown(context: CoreContext, entry: CoreOutboxEntry): number | undefined {
  const cooldown = context.store.getCooldown(COOLDOWN.envelope(entry.envelopeId));
  return cooldown !== undefined && cooldown.until > context.timers.now() ? cooldown.until : undefined;
}

/** Why a scope stopped: the lifetime closed, the caller gave up, or the pass deadline passed. */
function stopped(context: CoreContext, scope: WorkScope, envelopeId: string): SendOutcome {
  if (isClosed(context)) return { state: "failed", envelopeId, error: new TaskError("RELAY_CLOSED", { details: { envelopeId } }) };
  if (scope.mode === "foreground" && scope.signal.aborted)
    return { state: "failed", envelopeId, error: new TaskError("ABORTED", { details: { envelopeId, sent: false } }) };
  return deferred(envelopeId, "budget", "pass deadline");
}

/** Waits for another request (or a withheld receipt) to settle, or for the scope to stop. */
function settledOrStopped(request: Promise<unknown>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    request.then(done, done);
  });
}

/** Something this envelope must wait for before it may go: itself or older mail in flight or withheld. */
function waitingOn(context: CoreContext, envelopeId: string, ahead: readonly string[]): Promise<unknown> | undefined {
  for (const id of [envelopeId, ...ahead.slice(0, 1)]) {
    const pending = context.sends.pending(id);
    if (pending !== undefined) return pending;
  }
  return undefined;
}

/**
 * One delivery attempt of one envelope within a scope — the one place that enforces per-target
 * FIFO. Never throws for delivery problems (they are outcomes); relay loss is rethrown.
 */
export async function attemptSend(
  context: CoreContext,
  scope: WorkScope,
  envelopeId: string,
  budget: SendBudget,
  slice?: Slice,
): Promise<SendOutcome> {
  const { store } = context;
  for (;;) {
    const settled = settledOutcome(context, envelopeId);
    if (settled !== undefined) return settled;
    if (scope.signal.aborted) return stopped(context, scope, envelopeId);
    const ahead = store.pendingOutboxAhead(envelopeId);
    const waiting = waitingOn(context, envelopeId, ahead);
    if (waiting !== undefined) {
      await settledOrStopped(waiting, scope.signal);
      continue;
    }
    if (ahead.length > 0) return deferred(envelopeId, "order", "older mail to the same target is pending", { blockedBy: ahead[0] });
    const entry = store.getOutbox(envelopeId)!;
    const held = heldBack(context, scope, entry);
    if (held !== undefined) return held;
    if (!scope.allow(budget, slice)) return deferred(envelopeId, "budget", scope.expired() ? "pass deadline" : "send budget");
    scope.attempted.add(envelopeId);
    return deliver(context, scope, entry, budget);
  }
}

/**
 * Why a pending envelope waits whatever the pass (a configuration hold, an outage, its target's
 * proof, its peer after a relay restart, a capacity cooldown), or undefined when nothing outside a
 * pass holds it. Also what the board says of mail that has not left (TaskCore.waitingMail).
 */
export function waitingFor(context: CoreContext, entry: CoreOutboxEntry): Extract<SendOutcome, { state: "deferred" }> | undefined {
  const { store } = context;
  const envelopeId = entry.envelopeId;
  const held = (cause: DeferralCause, reason: string, details: Record<string, unknown> = {}) =>
    deferred(envelopeId, cause, reason, details) as Extract<SendOutcome, { state: "deferred" }>;
  const hold = context.health.hold();
  if (hold !== undefined) return held("hold", "held by a configuration refusal", { code: hold.error.code, until: hold.until });
  const outage = context.health.outageUntil();
  if (outage !== undefined) return held("outage", "the relay was unreachable moments ago; queued", { until: outage });
  // Content waits for its target to prove the key its task expects (proofs.ts asks for it).
  if (entry.awaiting === true) return held("proof", "waiting for the target to prove who it is", { target: entry.target });
  // After a relay restart the task's mail waits until its peer is found again (reconnect.ts; the
  // set is checked first, so an ordinary send reads no meta row).
  if (context.search.mayBeLooking(entry.taskId) && store.getTaskMeta(entry.taskId)?.reconnectingSince !== undefined)
    return held("reconnect", "waiting to find the peer again after a relay restart", { taskId: entry.taskId });
  const until = coolingDown(context, entry);
  if (until !== undefined) return held("capacity", "capacity cooldown", { until });
  return undefined;
}

/** A task's envelope that has not left yet, and what it waits for (the board's "waiting to leave"). */
export interface WaitingMail {
  readonly envelopeId: string;
  readonly purpose: OutboxPurpose;
  /** What it waits for; absent when nothing holds it (the next pass sends it). */
  readonly cause?: DeferralCause;
  /** The same, for logs. */
  readonly reason: string;
}

/** The task's pending envelopes, oldest first, each with what it waits for. */
export function waitingMail(context: CoreContext, taskId: string): WaitingMail[] {
  const { store } = context;
  return store
    .outboxOf(taskId)
    .filter((entry) => entry.state === "pending" && store.getQuarantine(entry.envelopeId) === undefined)
    .map((entry) => {
      const held = waitingFor(context, entry)?.error;
      const ahead = held === undefined && store.pendingOutboxAhead(entry.envelopeId).length > 0;
      const error = held ?? (ahead ? deferral("order", "older mail to the same target is pending") : undefined);
      const cause = error === undefined ? undefined : deferralCause(error.details);
      const reason = error === undefined ? "queued; the next pass sends it" : String(error.details.reason);
      return { envelopeId: entry.envelopeId, purpose: entry.purpose, ...(cause === undefined ? {} : { cause }), reason };
    });
}

/**
 * Why a pending envelope whose turn has come (nothing older to its target pending, nothing in
 * flight) may not leave in this scope now — a deferral — or undefined when it may.
 */
export function heldBack(context: CoreContext, scope: WorkScope, entry: CoreOutboxEntry): SendOutcome | undefined {
  const envelopeId = entry.envelopeId;
  const waiting = waitingFor(context, entry);
  if (waiting !== undefined) return waiting;
  if (scope.suppressedTargets.has(entry.targetKey)) return deferred(envelopeId, "capacity", "target refused capacity in this pass");
  if (scope.attempted.has(envelopeId)) return deferred(envelopeId, "budget", "already attempted in this pass");
  return undefined;
}

/** Records what a refused send means for its envelope (see the module comment). */
export function refused(context: CoreContext, scope: WorkScope, entry: CoreOutboxEntry, budget: SendBudget, error: TaskError): SendOutcome {
  const { store } = context;
  const envelopeId = entry.envelopeId;
  switch (sendRefusal(error)) {
    case "loss":
      throw error;
    case "hold":
      context.health.failed(error, { probe: false });
      return { state: "failed", envelopeId, error };
    case "quarantine":
      store.quarantineOutbox(envelopeId, { errorCode: error.code, details: { ...error.details }, quarantinedAt: context.clock() });
      return { state: "quarantined", envelopeId, error };
    case "retry":
      if (error.code === "RELAY_CAPACITY") {
        store.setCooldown(COOLDOWN.envelope(envelopeId), { until: context.timers.now() + capacityCooldown(error), code: error.code });
        if (budget === "oldWork") scope.suppressedTargets.add(entry.targetKey);
      }
      return { state: "failed", envelopeId, error };
  }
}

async function deliver(context: CoreContext, scope: WorkScope, entry: CoreOutboxEntry, budget: SendBudget): Promise<SendOutcome> {
  const { store, session } = context;
  const envelopeId = entry.envelopeId;
  const text = store.envelopeText(envelopeId);
  invariant(text !== undefined, "an outbox entry has its envelope", { envelopeId });
  store.markOutboxAttempted(envelopeId);
  // Sent only from the endpoint it names (a rebind while it waits defers it for re-addressing).
  const source = context.lifetime.endpoint();
  const request = session.send({ envelopeId, text, ...(source === undefined ? {} : { source }) }, scope.signalFor(budget));
  context.sends.track(envelopeId, request);
  let acceptance: SendAcceptance;
  try {
    acceptance = await request;
  } catch (raw) {
    const error = toTaskError(raw);
    if (isClosed(context)) return { state: "failed", envelopeId, error };
    return refused(context, scope, entry, budget, error);
  } finally {
    context.sends.settled(envelopeId, request);
  }
  if (isClosed(context)) return { state: "failed", envelopeId, error: new TaskError("RELAY_CLOSED", { details: { envelopeId } }) };
  context.health.answered();
  return accepted(context, envelopeId, acceptance);
}

/** Records an envelope the relay accepted (its cooldown ends). */
export function accepted(context: CoreContext, envelopeId: string, acceptance: SendAcceptance): SendOutcome {
  const { store } = context;
  store.transaction(() => {
    store.markOutboxAccepted(envelopeId, {
      acceptanceId: acceptance.acceptanceId,
      acceptedAt: context.clock(),
      duplicate: acceptance.duplicate,
    });
    store.clearCooldown(COOLDOWN.envelope(envelopeId));
  });
  return { state: "accepted", envelopeId };
}

/**
 * Sends an envelope an operation must report on: older pending mail to its target is offered
 * first from the old-work share (each attempt obeys FIFO in `attemptSend`), then the envelope.
 */
export async function sendInOrder(context: CoreContext, scope: WorkScope, envelopeId: string, budget: SendBudget): Promise<SendOutcome> {
  for (const older of context.store.pendingOutboxAhead(envelopeId)) {
    const outcome = await attemptSend(context, scope, older, "oldWork");
    if (outcome.state !== "accepted" && outcome.state !== "quarantined") break;
  }
  const outcome = await attemptSend(context, scope, envelopeId, budget);
  if (outcome.state === "deferred" && scope.signal.aborted) return stopped(context, scope, envelopeId);
  return outcome;
}
