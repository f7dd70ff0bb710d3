/**
 * Outbox delivery rules:
 * - per-target FIFO, in one place (`attemptSend`): an envelope leaves only after every older
 *   pending envelope to the same target is accepted (or quarantined); a younger send waits for an
 *   older one in flight, or withheld until a wake is observed;
 * - a refusal is judged by the registry (`sendRefusal`): transient → retried later, byte-identical;
 *   configuration → all relay work holds with a bounded backoff (hold.ts); any other definitive
 *   refusal → the envelope is quarantined: never re-sent, it blocks nothing;
 * - capacity defers an envelope for at least 5,000 ms (or the relay's longer `retryAfterMs`) by a
 *   stored cooldown, with no timer of its own;
 * - concurrent same-id sends join.
 */
import { sendRefusal, TaskError, toTaskError } from "../protocol/errors.ts";
import { capacityCooldownMs } from "../protocol/limits.ts";
import type { Acceptance } from "../relay-client/session.ts";
import type { OutboxEntry } from "../store/task-store.ts";
import { type CoreContext, isClosed } from "./context.ts";
import { activeHold, endHold, noteRefusal } from "./hold.ts";
import type { Slice, WorkScope } from "./scope.ts";

export type SendOutcome =
  | { readonly state: "accepted"; readonly envelopeId: string }
  | { readonly state: "quarantined"; readonly envelopeId: string; readonly error: TaskError }
  | { readonly state: "deferred"; readonly envelopeId: string; readonly error: TaskError }
  | { readonly state: "failed"; readonly envelopeId: string; readonly error: TaskError };

export type SendBudget = "scoped" | "oldWork";

export function envelopeCooldownKey(envelopeId: string): string {
  return `envelope:${envelopeId}`;
}

export function ackCooldownKey(envelopeId: string): string {
  return `ack:${envelopeId}`;
}

function deferred(envelopeId: string, reason: string, details: Record<string, unknown> = {}): SendOutcome {
  return { state: "deferred", envelopeId, error: new TaskError("TASK_DELIVERY_DEFERRED", { details: { envelopeId, reason, ...details } }) };
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
  if (entry === undefined) return deferred(envelopeId, "unknown envelope");
  return entry.state === "accepted" ? { state: "accepted", envelopeId } : undefined;
}

/** The capacity cooldown an error asks for: at least 5 s, or the relay's longer `retryAfterMs`. */
export function capacityCooldown(error: TaskError): number {
  const retryAfterMs = error.details.retryAfterMs;
  return typeof retryAfterMs === "number" && retryAfterMs > capacityCooldownMs ? retryAfterMs : capacityCooldownMs;
}

function coolingDown(context: CoreContext, entry: OutboxEntry): number | undefined {
  const cooldown = context.store.getCooldown(envelopeCooldownKey(entry.envelopeId));
  return cooldown !== undefined && cooldown.until > context.timers.now() ? cooldown.until : undefined;
}

/** Why a scope stopped: the lifetime closed, the caller gave up, or the pass deadline passed. */
function stopped(context: CoreContext, scope: WorkScope, envelopeId: string): SendOutcome {
  if (isClosed(context)) return { state: "failed", envelopeId, error: new TaskError("RELAY_CLOSED", { details: { envelopeId } }) };
  if (scope.mode === "foreground" && scope.signal.aborted) return { state: "failed", envelopeId, error: new TaskError("ABORTED", { details: { envelopeId, sent: false } }) };
  return deferred(envelopeId, "pass deadline");
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
    const pending = context.sending.get(id) ?? context.withheld.get(id);
    if (pending !== undefined) return pending;
  }
  return undefined;
}

/**
 * One delivery attempt of one envelope within a scope — the one place that enforces per-target
 * FIFO. Never throws for delivery problems (they are outcomes); relay loss is rethrown.
 */
export async function attemptSend(context: CoreContext, scope: WorkScope, envelopeId: string, budget: SendBudget, slice?: Slice): Promise<SendOutcome> {
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
    if (ahead.length > 0) return deferred(envelopeId, "older mail to the same target is pending", { blockedBy: ahead[0] });
    const hold = activeHold(context);
    if (hold !== undefined) return deferred(envelopeId, "held by a configuration refusal", { code: hold.error.code, until: hold.until });
    const entry = store.getOutbox(envelopeId)!;
    const until = coolingDown(context, entry);
    if (until !== undefined) return deferred(envelopeId, "capacity cooldown", { until });
    if (scope.suppressedTargets.has(entry.targetKey)) return deferred(envelopeId, "target refused capacity in this pass");
    if (scope.attempted.has(envelopeId)) return deferred(envelopeId, "already attempted in this pass");
    if (!scope.admit(budget, slice)) return deferred(envelopeId, scope.expired() ? "pass deadline" : "send budget");
    scope.attempted.add(envelopeId);
    return deliver(context, scope, entry, budget);
  }
}

async function deliver(context: CoreContext, scope: WorkScope, entry: OutboxEntry, budget: SendBudget): Promise<SendOutcome> {
  const { store, session } = context;
  const envelopeId = entry.envelopeId;
  store.markOutboxAttempted(envelopeId);
  const request = session.send(entry.envelope as unknown as Record<string, unknown>, scope.signalFor(budget));
  context.sending.set(envelopeId, request);
  let acceptance: Acceptance;
  try {
    acceptance = await request;
  } catch (raw) {
    const error = toTaskError(raw);
    if (isClosed(context)) return { state: "failed", envelopeId, error };
    switch (sendRefusal(error)) {
      case "loss":
        throw error;
      case "hold":
        noteRefusal(context, error);
        return { state: "failed", envelopeId, error };
      case "quarantine":
        store.quarantineOutbox(envelopeId, { errorCode: error.code, details: { ...error.details }, quarantinedAt: context.clock() });
        return { state: "quarantined", envelopeId, error };
      case "retry":
        if (error.code === "RELAY_CAPACITY") {
          store.setCooldown(envelopeCooldownKey(envelopeId), { until: context.timers.now() + capacityCooldown(error), code: error.code });
          if (budget === "oldWork") scope.suppressedTargets.add(entry.targetKey);
        }
        return { state: "failed", envelopeId, error };
    }
  } finally {
    if (context.sending.get(envelopeId) === request) context.sending.delete(envelopeId);
  }
  if (isClosed(context)) return { state: "failed", envelopeId, error: new TaskError("RELAY_CLOSED", { details: { envelopeId } }) };
  endHold(context);
  store.transaction(() => {
    store.markOutboxAccepted(envelopeId, { acceptanceId: acceptance.acceptanceId, acceptedAt: context.clock(), duplicate: acceptance.duplicate });
    store.clearCooldown(envelopeCooldownKey(envelopeId));
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
