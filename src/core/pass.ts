/**
 * The phased refresh pass, read top to bottom:
 *
 *   lease → intake → presentation → shipping → acknowledgement → retry → peers
 *
 * One work scope carries the shared budgets (scope.ts: scoped and old-work sends, ACK attempts,
 * an overall deadline, slices for retry and ACK repair). Intake and presentation send nothing;
 * shipping sends what this pass created in persist order — a target's closing receipts, on a relay
 * with `ack-carry-v1`, set aside to ride in the ACK request (carry.ts); acknowledgement ACKs only
 * deliveries whose required envelopes settled or ride with it (so an ACK never precedes the
 * receipt that justifies it: the relay acknowledges only after the carried receipts were
 * accepted), sends any carried receipt no ACK took, then repairs requested ACKs; retry spends what is left on old work, fairly rotated across targets;
 * peers finds the peers of tasks again after a relay restart (reconnect.ts), asks the workers of
 * tasks a restarted origin took back from its history whether they still hold them (resume.ts), orphans tasks whose
 * worker fell silent (liveness.ts) and asks whether the workers of active tasks are still
 * registered (orphans.ts). Neither retry
 * nor peers runs when the pass found the relay unreachable.
 * While a configuration refusal holds relay work (relay-health.ts), a pass makes no relay request at all.
 */
import { deferral, TaskError, toTaskError } from "../protocol/errors.ts";
import { maxAckAttemptsPerPass, maxFetchedUnacknowledgedDeliveries, maxReceivePageItems } from "../protocol/limits.ts";
import { FEATURE_ACK_BATCH } from "../protocol/wire.ts";
import { COOLDOWN, type CoreDelivery, type OutboxPurpose, requiredOf, UNCLASSIFIED } from "./bookkeeping.ts";
import { type CoreContext, isClosed, rethrowRelayLoss } from "./context.ts";
import { canonicalizeTimeouts, recordDelivery } from "./intake.ts";
import { attemptSend, capacityCooldown, type SendOutcome, sendInOrder } from "./outbox.ts";
import { type AckRecorder, ackCarrying, carriesReceipts, ridesWithCarried, shipCarried, takeReceiptTail } from "./carry.ts";
import { orphanSilentWorkers } from "./liveness.ts";
import { probeWorkers, reassignOrphans } from "./orphans.ts";
import { reconnectPeers } from "./reconnect.ts";
import { askResumes } from "./resume.ts";
import { sayHellos } from "./proofs.ts";
import { showsUnreachable } from "./relay-health.ts";
import { presentInbox } from "./presentation.ts";
import type { FailureKind, Slice, WorkScope } from "./scope.ts";

export interface PassReport {
  /** `drained`: the pass read the relay mailbox to its end (what liveness needs to judge silence). */
  readonly intake: { readonly fetched: number; readonly redriven: number; readonly timedOut: number; readonly drained: boolean };
  readonly presented: number;
  readonly shipped: number;
  readonly acknowledged: number;
  readonly retried: number;
  readonly counts: { readonly scopedSends: number; readonly oldWorkSends: number; readonly ackAttempts: number };
  /** The first failure of each kind, reported after the pass. */
  readonly failures: ReadonlyMap<FailureKind, TaskError>;
  /** The pass stopped early (ACK budget exhausted or deadline reached). */
  readonly truncated: boolean;
}

/** Reports a lease or receive failure, noting when it shows the relay unreachable or starts a hold. */
function relayFailure(context: CoreContext, scope: WorkScope, kind: FailureKind, error: unknown): void {
  const failure = toTaskError(error);
  if (showsUnreachable(failure)) scope.unreachable = true;
  context.health.failed(failure, { probe: true });
  scope.fail(kind, failure);
}

// ---------------------------------------------------------------------------------------------
// lease
// ---------------------------------------------------------------------------------------------

export async function leasePhase(context: CoreContext, scope: WorkScope): Promise<boolean> {
  try {
    const binding = await context.session.lease(scope.signal);
    if (!isClosed(context)) context.lifetime.checkEndpoint(binding.endpoint);
    return true;
  } catch (error) {
    rethrowRelayLoss(error);
    relayFailure(context, scope, "lease", error);
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// intake: re-drive tracked deliveries, then fetch after the highest tracked cursor
// ---------------------------------------------------------------------------------------------

export async function intakeInbox(context: CoreContext, scope: WorkScope): Promise<PassReport["intake"]> {
  const { store, session } = context;
  const timedOut = canonicalizeTimeouts(context, scope);
  // Mail naming a task not known yet: taken again once the rest of the pass's mail was (its assignment may follow it).
  const setAside: CoreDelivery[] = [];
  const aside = (row: CoreDelivery) => setAside.push(row);
  let redriven = 0;
  for (const row of store.deliveries()) {
    if (row.stage !== "tracked") continue;
    recordDelivery(context, scope, row, aside);
    redriven += 1;
  }
  let fetched = 0;
  let drained = false;
  for (;;) {
    const room = maxFetchedUnacknowledgedDeliveries - store.pendingDeliveryCount();
    if (room <= 0 || scope.expired() || isClosed(context)) break;
    const cursor = store.checkpoint().highWater;
    let page;
    try {
      page = await session.receive(cursor, { limit: Math.min(maxReceivePageItems, room), signal: scope.signal });
    } catch (error) {
      rethrowRelayLoss(error);
      relayFailure(context, scope, "intake", error);
      break;
    }
    if (isClosed(context)) break;
    // The relay answered: whatever held relay work is fixed (a cached lease proves nothing).
    context.health.answered();
    let full = false;
    for (const delivery of page.deliveries) {
      // Tracked and persisted on its own before any fan-out: an abort mid-page loses nothing.
      let tracked: string;
      try {
        tracked = store.trackDelivery({
          cursor: delivery.cursor,
          envelopeId: delivery.envelopeId,
          envelope: delivery.envelope,
          receivedAt: context.clock(),
          stage: "tracked",
          data: UNCLASSIFIED,
        });
      } catch (error) {
        rethrowRelayLoss(error);
        // A store that cannot take it (capacity) leaves it, and everything after it, at the relay.
        scope.fail("intake", toTaskError(error).withDetails({ envelopeId: delivery.envelopeId, cursor: delivery.cursor }));
        full = true;
        break;
      }
      fetched += 1;
      if (tracked === "tracked") recordDelivery(context, scope, store.getDelivery(delivery.envelopeId)!, aside);
    }
    drained = !full && !page.hasMore;
    if (full || !page.hasMore) break;
  }
  for (const row of setAside) {
    const current = store.getDelivery(row.envelopeId);
    if (current?.stage === "tracked") recordDelivery(context, scope, current);
  }
  return { fetched, redriven, timedOut, drained };
}

// ---------------------------------------------------------------------------------------------
// shipping: required fan-out and receipts in persist order (per-target FIFO, targets in parallel)
// ---------------------------------------------------------------------------------------------

const FAILURE_BY_PURPOSE: Readonly<Partial<Record<OutboxPurpose, FailureKind>>> = { fanout: "fanout", receipt: "receipt" };

function noteOutcome(scope: WorkScope, purpose: OutboxPurpose, outcome: SendOutcome): void {
  if (outcome.state === "accepted") return;
  const kind: FailureKind = outcome.state === "deferred" ? "deferral" : (FAILURE_BY_PURPOSE[purpose] ?? "send");
  scope.fail(kind, outcome.error);
}

export async function shipRequired(context: CoreContext, scope: WorkScope): Promise<number> {
  const { store } = context;
  // Hellos first: the answers owed, and asks for content that waits for a proof (proofs.ts).
  await sayHellos(context, scope);
  const byTarget = new Map<string, string[]>();
  for (const envelopeId of new Set(scope.required)) {
    const entry = store.getOutbox(envelopeId);
    if (entry === undefined || entry.state !== "pending") continue;
    const queue = byTarget.get(entry.targetKey) ?? [];
    queue.push(envelopeId);
    byTarget.set(entry.targetKey, queue);
  }
  let shipped = 0;
  // ack-carry-v1: a queue's tail of receipts may leave with the acknowledgement instead (carry.ts).
  const carrying = carriesReceipts(context);
  await Promise.all(
    [...byTarget.values()].map(async (queue) => {
      for (const [index, envelopeId] of queue.entries()) {
        if (carrying && takeReceiptTail(context, scope, queue.slice(index))) break;
        const purpose = store.getOutbox(envelopeId)?.purpose ?? "intent";
        const outcome = await sendInOrder(context, scope, envelopeId, "scoped");
        noteOutcome(scope, purpose, outcome);
        if (outcome.state === "accepted") shipped += 1;
        // Younger mail to this target cannot pass an envelope that did not leave.
        if (outcome.state === "failed" || outcome.state === "deferred") break;
      }
    }),
  );
  return shipped;
}

// ---------------------------------------------------------------------------------------------
// acknowledgement: ACK settled deliveries, then repair requested ACKs
// ---------------------------------------------------------------------------------------------

/** Whether a delivery may be ACKed now. */
function ackEligible(context: CoreContext, row: CoreDelivery): boolean {
  const { store } = context;
  if (row.ackRequested) return true;
  const requires = requiredOf(row.data);
  const settled = (id: string) => store.getOutbox(id)?.state === "accepted" || store.getQuarantine(id) !== undefined;
  if (row.stage === "presented") return requires.every(settled);
  if (row.stage === "canonicalized") {
    // An intent whose required fan-out is quarantined is never ACKed: it keeps one pending slot.
    return requires.every((id) => store.getOutbox(id)?.state === "accepted");
  }
  return false;
}

/** The relay no longer holds it (acknowledged before, or dropped): nothing left to ACK. */
function ackGone(context: CoreContext, scope: WorkScope, envelopeId: string, error: TaskError): void {
  context.store.acknowledgeDelivery(envelopeId);
  scope.fail("ack", error.withDetails({ envelopeId }));
}

/** An ACK request failed: a capacity refusal cools its envelopes down; the failure is reported. */
function ackFailed(context: CoreContext, scope: WorkScope, envelopeIds: readonly string[], error: TaskError): void {
  if (error.code === "RELAY_CAPACITY") {
    for (const envelopeId of envelopeIds)
      context.store.setCooldown(COOLDOWN.ack(envelopeId), { until: context.timers.now() + capacityCooldown(error), code: error.code });
  }
  context.health.failed(error, { probe: false });
  scope.fail("ack", error.withDetails({ envelopeId: envelopeIds[0], ...(envelopeIds.length > 1 ? { envelopeIds } : {}) }));
}

/** The relay acknowledged it: the delivery leaves the inbox. */
function acked(context: CoreContext, envelopeId: string): void {
  context.store.transaction(() => {
    context.store.acknowledgeDelivery(envelopeId);
    context.store.clearCooldown(COOLDOWN.ack(envelopeId));
  });
}

async function sendAck(context: CoreContext, scope: WorkScope, envelopeId: string): Promise<boolean> {
  try {
    await context.session.acknowledge(envelopeId, scope.signal);
  } catch (raw) {
    const error = toTaskError(raw);
    if (isClosed(context)) return false;
    rethrowRelayLoss(error);
    if (error.code === "INVALID_REQUEST") {
      ackGone(context, scope, envelopeId, error);
      return true;
    }
    ackFailed(context, scope, [envelopeId], error);
    return false;
  }
  // A reply that arrives after the lifetime closed must not advance anything.
  if (isClosed(context)) return false;
  context.health.answered();
  acked(context, envelopeId);
  return true;
}

/** `ack-batch-v1`: one request for every allowed ACK; returns how many left the inbox. */
async function sendAckBatch(context: CoreContext, scope: WorkScope, envelopeIds: readonly string[]): Promise<number> {
  let results;
  try {
    results = await context.session.acknowledgeBatch(envelopeIds, scope.signal);
  } catch (raw) {
    const error = toTaskError(raw);
    if (isClosed(context)) return 0;
    rethrowRelayLoss(error);
    ackFailed(context, scope, envelopeIds, error);
    return 0;
  }
  if (isClosed(context)) return 0;
  context.health.answered();
  const record = ackRecorder(context, scope);
  for (const { envelopeId, outcome } of results) {
    if (outcome === "acknowledged" || outcome === "duplicate") record.acked(envelopeId);
    else record.gone(envelopeId, outcome);
  }
  return results.length;
}

/** How a batch's ACK outcomes are recorded (also for the carrying request, carry.ts). */
function ackRecorder(context: CoreContext, scope: WorkScope): AckRecorder {
  return {
    acked: (envelopeId) => acked(context, envelopeId),
    gone: (envelopeId, outcome) =>
      ackGone(
        context,
        scope,
        envelopeId,
        new TaskError("INVALID_REQUEST", {
          message: `the relay does not hold this envelope (${outcome})`,
          details: { operation: "acknowledge", outcome },
        }),
      ),
    failed: (envelopeIds, error) => ackFailed(context, scope, envelopeIds, error),
  };
}

async function ackBatch(
  context: CoreContext,
  scope: WorkScope,
  rows: readonly CoreDelivery[],
  slice?: Slice,
): Promise<{ acked: number; exhausted: boolean }> {
  const { store } = context;
  const allowed: string[] = [];
  let exhausted = false;
  for (const row of rows) {
    const identity = `ack:${row.envelopeId}`;
    if (scope.attempted.has(identity)) continue;
    const cooldown = store.getCooldown(COOLDOWN.ack(row.envelopeId));
    if (cooldown !== undefined && cooldown.until > context.timers.now()) {
      scope.fail("deferral", deferral("capacity", "ACK capacity cooldown", { envelopeId: row.envelopeId }));
      continue;
    }
    if (!scope.allow("ack", slice)) {
      exhausted = true;
      scope.fail("deferral", deferral("budget", "ACK budget, slice or deadline", { envelopeId: row.envelopeId }));
      break;
    }
    scope.attempted.add(identity);
    allowed.push(row.envelopeId);
  }
  // Receipts set aside by shipping leave in this request (carry.ts), then the relay ACKs.
  if (allowed.length > 0 && scope.carried.length > 0)
    return { acked: await ackCarrying(context, scope, allowed, ackRecorder(context, scope)), exhausted };
  // A relay with ack-batch-v1 takes them in one request; any other gets one ACK per envelope.
  if (allowed.length > 1 && context.session.features().has(FEATURE_ACK_BATCH))
    return { acked: await sendAckBatch(context, scope, allowed), exhausted };
  const results = await Promise.all(allowed.map((envelopeId) => sendAck(context, scope, envelopeId)));
  return { acked: results.filter(Boolean).length, exhausted };
}

export async function repairAcknowledgements(context: CoreContext, scope: WorkScope): Promise<{ acked: number; exhausted: boolean }> {
  const { store } = context;
  // Authorise every settled delivery first (recorded before any request).
  const fresh: CoreDelivery[] = [];
  // Deliveries whose receipts ride in the ACK request are not authorised first (carry.ts).
  const riding: CoreDelivery[] = [];
  const carried = new Set(scope.carried);
  for (const row of store.deliveries()) {
    if (row.ackRequested) continue;
    if (ackEligible(context, row)) fresh.push(store.updateDelivery(row.envelopeId, { ackRequested: true }));
    else if (ridesWithCarried(context, carried, row)) riding.push(row);
  }
  const first = await ackBatch(context, scope, [...fresh, ...riding]);
  if (scope.carried.length > 0 && !isClosed(context)) await shipCarried(context, scope);
  if (first.exhausted || isClosed(context)) return first;
  const repair = store.deliveries().filter((row) => row.ackRequested);
  const second = await ackBatch(context, scope, repair, scope.openSlice());
  const spent = scope.counts().ackAttempts >= maxAckAttemptsPerPass;
  return { acked: first.acked + second.acked, exhausted: second.exhausted || spent };
}

// ---------------------------------------------------------------------------------------------
// retry: old work with what budget remains, one head per target in fair rotation
// ---------------------------------------------------------------------------------------------

export async function retryOldWork(context: CoreContext, scope: WorkScope): Promise<number> {
  const { store } = context;
  const slice = scope.openSlice();
  const skipped = new Set<string>();
  let accepted = 0;
  for (;;) {
    if (isClosed(context)) break;
    // Heads are recomputed after every attempt: each target offers only its oldest envelope, and
    // the rotation puts a target that was just tried behind the others.
    const head = store.retryHeads().find((entry) => !scope.attempted.has(entry.envelopeId) && !skipped.has(entry.envelopeId));
    if (head === undefined) break;
    const outcome = await attemptSend(context, scope, head.envelopeId, "oldWork", slice);
    if (isClosed(context)) break;
    if (outcome.state === "deferred") {
      const reason = outcome.error.details.reason;
      // Out of budget, slice or time: stop without rotating the unattempted suffix.
      if (reason === "send budget" || reason === "pass deadline") break;
      skipped.add(head.envelopeId);
      // A cooldown skip is an actual skip: it rotates like an attempt.
      if (reason === "capacity cooldown") store.rotateRetry(head.targetKey);
      continue;
    }
    store.rotateRetry(head.targetKey);
    if (outcome.state === "accepted") accepted += 1;
    else scope.fail("retry", outcome.error);
  }
  return accepted;
}

// ---------------------------------------------------------------------------------------------
// peers: are the workers of active tasks still there? (orphans.ts)
// ---------------------------------------------------------------------------------------------

async function followPeers(context: CoreContext, scope: WorkScope, drained: boolean): Promise<void> {
  // Mail re-addressed to peers found again is shipped at once (it was queued in this scope).
  if ((await reconnectPeers(context, scope)) > 0) await shipRequired(context, scope);
  await askResumes(context, scope);
  // A worker's silence means something only when this pass read all its mail (liveness.ts); mail
  // this side rejected does not count against that: anyone can send junk.
  if (drained) orphanSilentWorkers(context);
  await probeWorkers(context, scope);
  if (context.settings.autoReassign && !isClosed(context)) await reassignOrphans(context, scope);
}

// ---------------------------------------------------------------------------------------------
// the pass
// ---------------------------------------------------------------------------------------------

export async function runPhasedPass(context: CoreContext, scope: WorkScope): Promise<PassReport> {
  let intake: PassReport["intake"] = { fetched: 0, redriven: 0, timedOut: 0, drained: false };
  let presented = 0;
  let shipped = 0;
  let acknowledged = 0;
  let retried = 0;
  let truncated = false;
  try {
    const hold = context.health.hold();
    if (hold !== undefined) {
      // A configuration refusal holds all relay work until its backoff ends: nothing is resent,
      // and only what needs no relay (the origin's local presentation) goes on.
      scope.fail("lease", hold.error.withDetails({ heldUntil: hold.until }));
      presented = await presentInbox(context, scope);
    } else {
      if (await leasePhase(context, scope)) {
        intake = await intakeInbox(context, scope);
        presented = await presentInbox(context, scope);
        shipped = await shipRequired(context, scope);
        const acks = await repairAcknowledgements(context, scope);
        acknowledged = acks.acked;
        truncated = acks.exhausted;
      }
      // Old work is retried even on empty, held or failed passes while budget remains — but not
      // when this pass already found the relay unreachable: those requests could only fail too.
      if (!truncated && !isClosed(context) && !scope.unreachable) retried = await retryOldWork(context, scope);
      if (!truncated && !isClosed(context) && !scope.unreachable) await followPeers(context, scope, intake.drained);
    }
    truncated ||= scope.expired();
  } finally {
    scope.dispose();
  }
  return { intake, presented, shipped, acknowledged, retried, counts: scope.counts(), failures: scope.failures, truncated };
}
