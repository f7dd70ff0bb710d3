/**
 * Presentation: put recorded events in front of the model through the host, in intake order.
 *
 * - model-visible items are inserted while the host can present, then woken with one wake; the
 *   `wake_accepted` receipt is written before the wake (so it leaves ahead of anything the woken
 *   model sends) and withdrawn when the wake is not observed;
 * - a held visible item holds every later visible item, but later non-visible items are still
 *   archived (and so become ACK-able);
 * - a receiver records, per event and pass, only the highest receipt stage it reached, plus
 *   `pi_insertion` blocked when the insertion was not observed; local items record no receipts;
 * - a parent ACK recorded before a terminal event is presented suppresses its wake;
 * - presentation of relay items stops at the pass's remaining ACK budget, and within the pass
 *   deadline: a wake is started only while at least `wakeObservationMs` remain (else the visible
 *   items wait for the next pass), and a wake that outlives the deadline counts as not observed;
 * - the `wake_accepted` receipt is withheld while its wake is observed: no send (not even a
 *   concurrent foreground one) can ship it before it is known whether it must be withdrawn.
 * Nothing is sent here: receipts go to the outbox for the ship phase.
 */
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { eventTypeRow, isAssignmentType } from "../protocol/events.ts";
import { maxAckAttemptsPerPass, maxProgressPresentationsPerPass, wakeObservationMs } from "../protocol/limits.ts";
import type { CancelOutcome, ReceiptStage, ReceiptState, TaskEvent } from "../protocol/schemas.ts";
import type { LocalPresentation, TaskRole } from "../store/task-store.ts";
import { type CoreDelivery, type CoreStore, OPERATION, type RecordedData } from "./bookkeeping.ts";
import { type CoreContext, isClosed, me, rethrowRelayLoss } from "./context.ts";
import { makeIntent } from "./envelopes.ts";
import type { PresentationItem } from "./host.ts";
import { queueEnvelope, withdrawUnsent } from "./outbox.ts";
import type { WorkScope } from "./scope.ts";
import { describeKey, peerOfTask } from "./trust.ts";

export type ReceiveItem =
  | { readonly kind: "relay"; readonly delivery: CoreDelivery; readonly order: number }
  | { readonly kind: "local"; readonly event: TaskEvent; readonly order: number };

/**
 * Relay deliveries waiting for presentation and local items, merged by intake order — except that
 * one task's relayed events keep the order their origin numbered them (per-target FIFO): a relay
 * may hand one page's mail in another order than it was sent, and intake records what it is given.
 */
export function receiveItems(store: CoreStore): ReceiveItem[] {
  const relay: ReceiveItem[] = store
    .deliveries()
    .filter((row) => row.stage === "recorded")
    .map((delivery) => ({ kind: "relay", delivery, order: delivery.order }));
  const local: ReceiveItem[] = store
    .localPresentations()
    .map((item: LocalPresentation) => ({ kind: "local", event: item.event, order: item.order }));
  return inSequence(
    store,
    [...relay, ...local].sort((a, b) => a.order - b.order),
  );
}

/** The task and origin sequence of a relayed item's event, when it has one. */
function sequenceOf(store: CoreStore, item: ReceiveItem): { taskId: string; sequence: bigint } | undefined {
  if (item.kind !== "relay" || !("eventId" in item.delivery.data)) return undefined;
  const event = store.getEvent(item.delivery.data.eventId);
  return event === undefined ? undefined : { taskId: event.taskId, sequence: BigInt(event.sequence) };
}

/** Each task's relayed events, in the slots they hold, put in sequence order (everything else stays where it is). */
function inSequence(store: CoreStore, items: ReceiveItem[]): ReceiveItem[] {
  const slots = new Map<string, { index: number; sequence: bigint }[]>();
  items.forEach((item, index) => {
    const sequenced = sequenceOf(store, item);
    if (sequenced === undefined) return;
    const taskSlots = slots.get(sequenced.taskId) ?? [];
    taskSlots.push({ index, sequence: sequenced.sequence });
    slots.set(sequenced.taskId, taskSlots);
  });
  const ordered = [...items];
  for (const taskSlots of slots.values()) {
    if (taskSlots.length < 2) continue;
    const bySequence = [...taskSlots].sort((a, b) => (a.sequence < b.sequence ? -1 : a.sequence > b.sequence ? 1 : 0));
    taskSlots.forEach((slot, rank) => {
      ordered[slot.index] = items[bySequence[rank]!.index]!;
    });
  }
  return ordered;
}

/**
 * Whether the origin's own view of an event it created is model-visible (else archived). A worker's
 * result that arrived after the task timed out is shown once: it settles the outcome.
 */
export function visibleLocally(event: TaskEvent, status?: string): boolean {
  if (event.type === "task.late_terminal") return status === "timed_out" && typeof event.payload.intentId === "string";
  return eventTypeRow(event.type).modelVisible;
}

function toItem(context: CoreContext, item: ReceiveItem): PresentationItem | undefined {
  const { store } = context;
  const peerOf = (taskId: string, role: TaskRole, event?: TaskEvent) => {
    // A refusal names its own signer (no worker key is bound to a task its worker refused).
    const refusedBy =
      event?.type === "task.refused" ? (event.payload.refusedBy as { key?: unknown; claimedName?: unknown } | undefined) : undefined;
    const peer =
      typeof refusedBy?.key === "string"
        ? describeKey(context.trust, refusedBy.key, typeof refusedBy.claimedName === "string" ? refusedBy.claimedName : undefined)
        : peerOfTask(store, context.trust, taskId, role);
    return peer === undefined ? {} : { peer };
  };
  if (item.kind === "relay") {
    const data = item.delivery.data;
    if (!("eventId" in data)) return undefined;
    const event = store.getEvent(data.eventId);
    const task = store.getTask(data.taskId);
    if (event === undefined || task === undefined) return undefined;
    const visible = "visible" in data && data.visible;
    return {
      kind: "relay",
      order: item.order,
      taskId: data.taskId,
      eventId: data.eventId,
      event,
      role: task.role,
      visible,
      task,
      envelopeId: item.delivery.envelopeId,
      ...peerOf(data.taskId, task.role),
    };
  }
  const task = store.getTask(item.event.taskId);
  if (task === undefined) return undefined;
  return {
    kind: "local",
    order: item.order,
    taskId: item.event.taskId,
    eventId: item.event.eventId,
    event: item.event,
    role: task.role,
    visible: visibleLocally(item.event, task.status),
    task,
    ...peerOf(item.event.taskId, task.role, item.event),
  };
}

/** Rewrites the envelopes a presented delivery waits for before its ACK. */
function setRequired(store: CoreStore, envelopeId: string, change: (requires: readonly string[]) => readonly string[]): void {
  const row = store.getDelivery(envelopeId);
  if (row === undefined || !("eventId" in row.data)) return;
  const data: RecordedData = { ...row.data, requires: change(row.data.requires) };
  store.updateDelivery(envelopeId, { data });
}

/** Reserves (once per event, stage and state) a receipt intent to the task's origin. */
export function reserveReceipt(
  context: CoreContext,
  scope: WorkScope,
  item: PresentationItem,
  stage: ReceiptStage,
  state: ReceiptState,
): string | undefined {
  const { store } = context;
  if (item.kind !== "relay" || item.role !== "worker") return undefined;
  const key = OPERATION.receipt(item.eventId, stage, state);
  const existing = store.getOperation(item.taskId, key);
  if (existing !== undefined) return existing.envelopeIds[0];
  const intent = makeIntent(
    item.taskId,
    "task.delivery_receipt",
    { eventId: item.eventId, stage, state, ...(state === "blocked" ? { retryable: true } : {}) },
    item.task.generation,
  );
  const envelopeId = store.transaction(() => {
    const queued = queueEnvelope(context, {
      taskId: item.taskId,
      from: me(context),
      to: item.task.origin,
      kind: "intent",
      inner: intent,
      purpose: "receipt",
      operation: { key, logicalId: intent.intentId, logicalType: intent.type },
    });
    setRequired(store, item.envelopeId!, (requires) => [...requires, queued]);
    return queued;
  });
  scope.required.push(envelopeId);
  return envelopeId;
}

function withdrawReceipt(context: CoreContext, scope: WorkScope, item: PresentationItem, envelopeId: string | undefined): void {
  if (envelopeId === undefined) return;
  const { store } = context;
  store.transaction(() => {
    if (withdrawUnsent(context, envelopeId)) setRequired(store, item.envelopeId!, (requires) => requires.filter((id) => id !== envelopeId));
  });
  const index = scope.required.indexOf(envelopeId);
  if (index >= 0) scope.required.splice(index, 1);
}

function isAssignment(item: PresentationItem): boolean {
  return isAssignmentType(item.event.type);
}

/**
 * Presentation evidence per event, as fixed-size flags (1 done, 0 withdrawn): evidence is written
 * before the step it records and withdrawn when the step is not observed, so a full store stops a
 * presentation before it happens rather than after (an event is never inserted twice).
 */
export const EVIDENCE = { inserted: "inserted", woken: "woken", archived: "archived" } as const;
type EvidenceFlag = keyof typeof EVIDENCE;

export function hasEvidence(store: CoreStore, eventId: string, flag: EvidenceFlag): boolean {
  return store.getEvidence(eventId)?.[flag] === 1;
}

/** Writes a flag; a store refusal (capacity) is reported and answers false. */
function mark(context: CoreContext, scope: WorkScope, eventId: string, flag: EvidenceFlag, value: 0 | 1): boolean {
  try {
    context.store.recordEvidence(eventId, { [flag]: value });
    return true;
  } catch (error) {
    rethrowRelayLoss(error);
    scope.fail("presentation", toTaskError(error).withDetails({ eventId, step: `record ${flag}` }));
    return false;
  }
}

/** Reserves a receipt; a store refusal is reported and answers false. */
function tryReceipt(
  context: CoreContext,
  scope: WorkScope,
  item: PresentationItem,
  stage: ReceiptStage,
  state: ReceiptState,
): { ok: boolean; envelopeId?: string } {
  try {
    const envelopeId = reserveReceipt(context, scope, item, stage, state);
    return envelopeId === undefined ? { ok: true } : { ok: true, envelopeId };
  } catch (error) {
    rethrowRelayLoss(error);
    scope.fail("receipt", toTaskError(error).withDetails({ eventId: item.eventId, stage }));
    return { ok: false };
  }
}

function wakeSuppressed(store: CoreStore, item: PresentationItem): boolean {
  if (eventTypeRow(item.event.type).terminalStatus === null) return false;
  // A workflow's step: the workflow wakes the model once, with every step's outcome.
  if (item.role === "origin" && store.getTaskMeta(item.taskId)?.quietResult === true) return true;
  return store.getEvents(item.taskId).some((event) => event.type === "task.parent_acknowledged");
}

/** Marks an item presented (relay) or completes it (local); a refusal leaves it for the next pass. */
function finish(context: CoreContext, scope: WorkScope, item: PresentationItem): boolean {
  try {
    if (item.kind === "relay") context.store.updateDelivery(item.envelopeId!, { stage: "presented" });
    else context.store.completeLocalPresentation(item.eventId);
    return true;
  } catch (error) {
    rethrowRelayLoss(error);
    scope.fail("presentation", toTaskError(error).withDetails({ eventId: item.eventId, step: "finish" }));
    return false;
  }
}

async function archive(context: CoreContext, scope: WorkScope, item: PresentationItem): Promise<boolean> {
  if (!hasEvidence(context.store, item.eventId, "archived")) {
    if (!mark(context, scope, item.eventId, "archived", 1)) return false;
    try {
      await context.host.archive(item);
    } catch (error) {
      if (!context.lifetime.closed()) mark(context, scope, item.eventId, "archived", 0);
      scope.fail("presentation", toTaskError(error).withDetails({ eventId: item.eventId, step: "archive" }));
      return false;
    }
    if (context.lifetime.closed()) return false;
  }
  return finish(context, scope, item);
}

/** Inserts a visible item unless already inserted; false when it must be held. */
async function insert(context: CoreContext, scope: WorkScope, item: PresentationItem): Promise<boolean> {
  if (hasEvidence(context.store, item.eventId, "inserted")) return true;
  // Recorded first: if the store cannot hold the evidence, the model does not get the event.
  if (!mark(context, scope, item.eventId, "inserted", 1)) return false;
  let inserted = false;
  try {
    inserted = await context.host.insert(item);
  } catch (error) {
    scope.fail("presentation", toTaskError(error).withDetails({ eventId: item.eventId, step: "insert" }));
  }
  if (context.lifetime.closed()) return false;
  if (inserted) return true;
  mark(context, scope, item.eventId, "inserted", 0);
  tryReceipt(context, scope, item, "pi_insertion", "blocked");
  if (isAssignment(item)) tryReceipt(context, scope, item, "receiver_recorded", "confirmed");
  return false;
}

// ---------------------------------------------------------------------------------------------
// Progress (origin) and cancels (worker): presented on their own terms
// ---------------------------------------------------------------------------------------------

/** The newest queued progress event of each task: older ones are superseded (archived). */
function newestProgress(entries: readonly ReceiveItem[]): Map<string, string> {
  const newest = new Map<string, string>();
  for (const entry of entries)
    if (entry.kind === "local" && entry.event.type === "task.progress") newest.set(entry.event.taskId, entry.event.eventId);
  return newest;
}

/**
 * What happens to a progress event now: `show` (inserted without a wake), `wait` (the newest of an
 * active task, kept queued until the model can take it, the pass has room and
 * `minProgressIntervalMs` has passed since its task's last one) or `archive` (superseded by a newer
 * one, or its task ended). At most `maxProgressPresentationsPerPass` are shown per pass; status
 * shows the newest either way, and a waiting one never holds other items.
 */
function progressVerdict(
  context: CoreContext,
  item: PresentationItem,
  newest: ReadonlyMap<string, string>,
  shownThisPass: number,
  presentable: boolean,
): "show" | "wait" | "archive" {
  if (newest.get(item.taskId) !== item.eventId || item.task.status !== "active") return "archive";
  return presentable && context.progressPacing.due(item.taskId) && shownThisPass < maxProgressPresentationsPerPass ? "show" : "wait";
}

/** A cancel arriving at the worker: the one event that interrupts a busy model. */
function isCancelAtWorker(item: PresentationItem): boolean {
  return item.kind === "relay" && item.role === "worker" && item.event.type === "task.cancelled";
}

/** The origin's steer arriving at the worker: information for its running turn. */
function isSteerAtWorker(item: PresentationItem): boolean {
  return item.kind === "relay" && item.role === "worker" && item.event.type === "task.information" && item.event.payload.steer === true;
}

/** Tells the origin (once per cancel) what the worker's Pi did with it. */
function reportCancelOutcome(context: CoreContext, scope: WorkScope | undefined, item: PresentationItem, outcome: CancelOutcome): void {
  if (isClosed(context)) return;
  const { store } = context;
  const key = OPERATION.cancelOutcome(item.eventId);
  try {
    const envelopeId = store.transaction(() => {
      if (store.getOperation(item.taskId, key) !== undefined) return undefined;
      const intent = makeIntent(item.taskId, "task.cancel_outcome", { cancelEventId: item.eventId, outcome }, item.task.generation);
      return queueEnvelope(context, {
        taskId: item.taskId,
        from: me(context),
        to: item.task.origin,
        kind: "intent",
        inner: intent,
        purpose: "intent",
        operation: { key, logicalId: intent.intentId, logicalType: intent.type },
      });
    });
    if (envelopeId !== undefined) scope?.required.push(envelopeId);
  } catch (error) {
    rethrowRelayLoss(error);
    scope?.fail("presentation", toTaskError(error).withDetails({ eventId: item.eventId, step: "cancel outcome" }));
  }
  if (scope === undefined) context.requestRefresh();
}

/**
 * Hands a cancel (or a steer) to a busy model through the host; true when handed over (then it is
 * complete: inserted, its `pi_inserted` receipt on its way to the origin).
 */
async function interrupt(context: CoreContext, scope: WorkScope, item: PresentationItem): Promise<boolean> {
  if (hasEvidence(context.store, item.eventId, "inserted")) return finish(context, scope, item);
  if (!mark(context, scope, item.eventId, "inserted", 1)) return false;
  let handed = false;
  try {
    handed = isSteerAtWorker(item)
      ? await context.host.steer!(item)
      : await context.host.interrupt!(item, (outcome) => reportCancelOutcome(context, undefined, item, outcome));
  } catch (error) {
    scope.fail("presentation", toTaskError(error).withDetails({ eventId: item.eventId, step: "interrupt" }));
  }
  if (context.lifetime.closed()) return false;
  if (!handed) {
    mark(context, scope, item.eventId, "inserted", 0);
    return false;
  }
  return tryReceipt(context, scope, item, "pi_inserted", "confirmed").ok && finish(context, scope, item);
}

/** The presentation phase of one pass. Returns how many items were completed. */
export async function presentInbox(context: CoreContext, scope: WorkScope): Promise<number> {
  const { store, host } = context;
  let held = false;
  let completed = 0;
  let progressThisPass = 0;
  let relayRoom = Math.max(0, maxAckAttemptsPerPass - scope.counts().ackAttempts);
  const toWake: { item: PresentationItem; receipt?: string }[] = [];
  const entries = receiveItems(store);
  const newest = newestProgress(entries);

  for (const entry of entries) {
    if (context.lifetime.closed() || scope.expired()) return completed;
    const item = toItem(context, entry);
    if (item === undefined) {
      if (entry.kind === "local") store.completeLocalPresentation(entry.event.eventId);
      continue;
    }
    // Presentation stops at the remaining ACK budget: each completed relay item needs one ACK.
    if (item.kind === "relay" && relayRoom === 0) break;
    const presentable = !held && host.canPresent();
    const progress = item.event.type === "task.progress";
    const verdict = progress ? progressVerdict(context, item, newest, progressThisPass, presentable) : "show";
    if (verdict === "wait") continue;
    if (!item.visible || verdict === "archive") {
      if (item.kind === "relay") relayRoom -= 1;
      if (await archive(context, scope, item)) completed += 1;
      continue;
    }
    const cuts = (isCancelAtWorker(item) && host.interrupt !== undefined) || (isSteerAtWorker(item) && host.steer !== undefined);
    if (cuts && !presentable) {
      relayRoom -= 1;
      if (await interrupt(context, scope, item)) completed += 1;
      continue;
    }
    // A wake needs wakeObservationMs of the pass: without them, visible items wait for the next pass.
    if (held || !host.canPresent() || scope.remainingMs() < wakeObservationMs) {
      held = true;
      // The assignment is recorded in RAM even while Pi cannot take it yet.
      if (isAssignment(item)) tryReceipt(context, scope, item, "receiver_recorded", "confirmed");
      continue;
    }
    if (item.kind === "relay") relayRoom -= 1;
    if (!(await insert(context, scope, item))) {
      held = true;
      continue;
    }
    if (progress) {
      progressThisPass += 1;
      context.progressPacing.mark(item.taskId);
    }
    if (isCancelAtWorker(item)) reportCancelOutcome(context, scope, item, "idle");
    // A late result is shown (and wakes) although late terminals are otherwise archived.
    const wakes = item.event.type === "task.late_terminal" || eventTypeRow(item.event.type).wakes;
    if (hasEvidence(store, item.eventId, "woken") || wakeSuppressed(store, item) || !wakes) {
      if (tryReceipt(context, scope, item, "pi_inserted", "confirmed").ok && finish(context, scope, item)) completed += 1;
      continue;
    }
    // Written before the wake: the receipt leaves ahead of any intent the woken model sends.
    const receipt = tryReceipt(context, scope, item, "wake_accepted", "confirmed");
    if (!receipt.ok || !mark(context, scope, item.eventId, "woken", 1)) {
      held = true;
      continue;
    }
    toWake.push({ item, ...(receipt.envelopeId === undefined ? {} : { receipt: receipt.envelopeId }) });
  }

  if (toWake.length === 0) return completed;
  const release = context.sends.withhold(toWake.flatMap((entry) => (entry.receipt === undefined ? [] : [entry.receipt])));
  try {
    return completed + (await wakeAndSettle(context, scope, toWake));
  } finally {
    release();
  }
}

/** Resolves false when the signal aborts first (the wake then counts as not observed). */
function unlessAborted(wake: boolean | Promise<boolean>, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(false);
    signal.addEventListener("abort", onAbort, { once: true });
    Promise.resolve(wake).then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** Emits one wake for the inserted items and records its outcome (withdrawing unsent receipts when unobserved). */
async function wakeAndSettle(
  context: CoreContext,
  scope: WorkScope,
  toWake: readonly { item: PresentationItem; receipt?: string }[],
): Promise<number> {
  let completed = 0;
  let woke = false;
  try {
    woke = await unlessAborted(context.host.wake(toWake.map((entry) => entry.item)), scope.signal);
  } catch (error) {
    scope.fail("presentation", toTaskError(error).withDetails({ step: "wake" }));
  }
  if (context.lifetime.closed()) return completed;
  for (const entry of toWake) {
    if (woke) {
      if (finish(context, scope, entry.item)) completed += 1;
      continue;
    }
    mark(context, scope, entry.item.eventId, "woken", 0);
    withdrawReceipt(context, scope, entry.item, entry.receipt);
    tryReceipt(context, scope, entry.item, "pi_inserted", "confirmed");
  }
  if (!woke)
    scope.fail(
      "presentation",
      new TaskError("TASK_DELIVERY_DEFERRED", { details: { reason: "wake not observed", events: toWake.length } }),
    );
  return completed;
}
