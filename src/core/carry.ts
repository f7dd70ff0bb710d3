/**
 * Receipts carried with the acknowledgement (`ack-carry-v1`, docs/wire.md): on a relay that
 * advertises it (with `ack-batch-v1`), a delivery's receipts leave in its ACK request, so taking a
 * delivery in costs one request after its page instead of two. In pass order:
 *
 * - shipping (`takeReceiptTail`): the receipts that end a target's queue of this pass, whose turn
 *   has come (nothing older to that target pending, none in flight or withheld) and which nothing
 *   holds back (outbox.ts `heldBack`), are set aside in `scope.carried` instead of being sent, each
 *   taking a scoped send from the budget as its send would;
 * - acknowledgement (`ridesWithCarried`): a presented delivery whose required envelopes are settled
 *   or carried may be ACKed in the carrying request. It is not marked ACK-requested first: the relay
 *   acknowledges only after every carried receipt was accepted, so an ACK it withholds is never
 *   repaired ahead of its receipt;
 * - `ackCarrying`: one `acknowledge` with the ids and the carried receipts. Each receipt's outcome
 *   is recorded as its send's would be (accepted; refused: outbox.ts `refused`; skipped: deferred),
 *   each id's as an ACK's; a withheld ACK waits for a later pass;
 * - `shipCarried`: carried receipts that found no ACK request to ride in are sent as usual.
 */
import { deferral, TaskError, toTaskError } from "../protocol/errors.ts";
import { maxSendBatchItems } from "../protocol/limits.ts";
import { type EncodedEnvelope, FEATURE_ACK_BATCH, FEATURE_ACK_CARRY, type AckOutcome } from "../protocol/wire.ts";
import type { SentOutcome } from "../relay-client/session.ts";
import { invariant } from "../store/rows.ts";
import { type CoreDelivery, requiredOf } from "./bookkeeping.ts";
import { type CoreContext, isClosed, rethrowRelayLoss } from "./context.ts";
import { accepted, heldBack, refused, sendInOrder } from "./outbox.ts";
import type { WorkScope } from "./scope.ts";

/** Whether this relay takes receipts with acknowledgements. */
export function carriesReceipts(context: CoreContext): boolean {
  const features = context.session.features();
  return features.has(FEATURE_ACK_CARRY) && features.has(FEATURE_ACK_BATCH);
}

/**
 * Sets `tail` (the rest of one target's queue, oldest first) aside to leave with the
 * acknowledgement, when it is all receipts that may leave now; answers whether it did.
 */
export function takeReceiptTail(context: CoreContext, scope: WorkScope, tail: readonly string[]): boolean {
  const { store } = context;
  if (tail.length === 0 || scope.carried.length + tail.length > maxSendBatchItems || scope.signal.aborted) return false;
  const entries = tail.map((envelopeId) => store.getOutbox(envelopeId));
  for (const entry of entries) {
    if (entry === undefined || entry.state !== "pending" || entry.purpose !== "receipt") return false;
    if (context.sends.pending(entry.envelopeId) !== undefined || heldBack(context, scope, entry) !== undefined) return false;
  }
  if (store.pendingOutboxAhead(tail[0]!).length > 0) return false;
  // Carried only whole: a tail the budget cannot take in full is sent as usual (nothing of it set aside).
  for (const _ of tail) if (!scope.allow("scoped")) return false;
  scope.carried.push(...tail);
  return true;
}

/** A presented delivery that may be ACKed once the carried receipts are accepted (and not before). */
export function ridesWithCarried(context: CoreContext, carried: ReadonlySet<string>, row: CoreDelivery): boolean {
  if (carried.size === 0 || row.stage !== "presented") return false;
  const { store } = context;
  return requiredOf(row.data).every(
    (id) => carried.has(id) || store.getOutbox(id)?.state === "accepted" || store.getQuarantine(id) !== undefined,
  );
}

/** The carried receipts as the session sends them: their stored texts, from the endpoint bound now. */
function carriedEnvelopes(context: CoreContext, scope: WorkScope): EncodedEnvelope[] {
  const source = context.lifetime.endpoint();
  return scope.carried.map((envelopeId) => {
    const text = context.store.envelopeText(envelopeId);
    invariant(text !== undefined, "a carried receipt has its envelope", { envelopeId });
    context.store.markOutboxAttempted(envelopeId);
    scope.attempted.add(envelopeId);
    return { envelopeId, text, ...(source === undefined ? {} : { source }) };
  });
}

/**
 * Records each carried receipt's outcome as its send's would be; returns the relay loss one of them
 * showed (thrown by the caller once everything is recorded).
 */
function recordSent(context: CoreContext, scope: WorkScope, sent: readonly SentOutcome[]): TaskError | undefined {
  let loss: TaskError | undefined;
  for (const outcome of sent) {
    const entry = context.store.getOutbox(outcome.envelopeId);
    if (entry === undefined) continue;
    if (outcome.outcome === "accepted") accepted(context, outcome.envelopeId, outcome.acceptance);
    else if (outcome.outcome === "refused") {
      try {
        refused(context, scope, entry, "scoped", outcome.error);
        scope.fail("receipt", outcome.error);
      } catch (error) {
        loss ??= toTaskError(error);
      }
    } else
      scope.fail(
        "deferral",
        deferral("order", "a receipt before it to the same target was not accepted", { envelopeId: outcome.envelopeId }),
      );
  }
  return loss;
}

/** What the caller does with each ACK outcome: acknowledged (or gone) leaves the inbox; `withheld` waits. */
export interface AckRecorder {
  acked(envelopeId: string): void;
  gone(envelopeId: string, outcome: AckOutcome): void;
  failed(envelopeIds: readonly string[], error: TaskError): void;
}

/**
 * One `acknowledge` carrying the receipts: returns how many deliveries left the inbox. A failure of
 * the whole request is the ids' failure as an ACK's; the receipts stay pending (old work retries them).
 */
export async function ackCarrying(
  context: CoreContext,
  scope: WorkScope,
  envelopeIds: readonly string[],
  record: AckRecorder,
): Promise<number> {
  const envelopes = carriedEnvelopes(context, scope);
  scope.carried.length = 0;
  const request = context.session.acknowledgeCarrying(envelopeIds, envelopes, scope.signal);
  for (const envelope of envelopes) context.sends.track(envelope.envelopeId, request);
  let answer: Awaited<typeof request>;
  try {
    answer = await request;
  } catch (raw) {
    const error = toTaskError(raw);
    if (isClosed(context)) return 0;
    rethrowRelayLoss(error);
    // The receipts stay pending, tried again as old work; the ids are the ACK's failure.
    record.failed(envelopeIds, error);
    return 0;
  } finally {
    for (const envelope of envelopes) context.sends.settled(envelope.envelopeId, request);
  }
  if (isClosed(context)) return 0;
  context.health.answered();
  const loss = recordSent(context, scope, answer.sent);
  let left = 0;
  for (const { envelopeId, outcome } of answer.results) {
    if (outcome === "withheld") continue;
    left += 1;
    if (outcome === "acknowledged" || outcome === "duplicate") record.acked(envelopeId);
    else record.gone(envelopeId, outcome);
  }
  if (loss !== undefined) throw loss;
  return left;
}

/** Sends, as usual and in order, the carried receipts no acknowledgement took. */
export async function shipCarried(context: CoreContext, scope: WorkScope): Promise<number> {
  const left = scope.carried.splice(0);
  let shipped = 0;
  for (const envelopeId of left) {
    const outcome = await sendInOrder(context, scope, envelopeId, "scoped");
    if (outcome.state === "accepted") shipped += 1;
    else scope.fail(outcome.state === "deferred" ? "deferral" : "receipt", outcome.error);
    if (outcome.state === "failed" || outcome.state === "deferred") break;
  }
  return shipped;
}
