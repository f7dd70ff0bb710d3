/**
 * Intake: validate and record what arrives, and canonicalize at the origin — without sending.
 *
 * - assignments (origin → me): validated against their task, recorded like any task I work on;
 * - intents (my task's target → me, the origin): canonicalized once per intent id: the first
 *   terminal wins, later terminals become `task.late_terminal`; the canonical event is fanned out
 *   to the target and queued for local presentation (never a self-addressed envelope);
 * - canonical events (origin → me): appended once, status follows terminal events;
 * - expired active tasks I originated become `task.timed_out`.
 * Every delivery passes the trust gate first (trust.ts). A delivery that fails the gate or
 * validation is rejected (counted, reported, recorded by the host, then ACKed): it never stalls the
 * inbox. Mail for a task not known yet is judged again at the end of the pass's intake, after the
 * rest: a relay that reordered a page may have handed it ahead of its task's assignment.
 * An unknown key's assignment is refused back to its sender (`task.refused`), so the origin
 * learns why; one the local human is still deciding on stays tracked and unACKed.
 */
import { sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { eventTypeRow, isAssignmentType, isTerminalStatus, latestAssignment, validateTaskEvent } from "../protocol/events.ts";
import {
  type AssignmentPayload,
  type HelloEnvelope,
  RelayedEnvelope,
  type TaskEndpoint,
  TaskEnvelope,
  type TaskEvent,
  TaskIntent,
  type TaskRecord,
} from "../protocol/schemas.ts";
import { assertValid } from "../protocol/validate.ts";
import { type CoreDelivery, type CoreStore, type InboxData, type InboxStage, OPERATION } from "./bookkeeping.ts";
import { openQuestions } from "./attention.ts";
import { appendCanonical } from "./canonical.ts";
import { type CoreContext, me } from "./context.ts";
import { makeIntent, openPayload } from "./envelopes.ts";
import { checkIntentCorrection } from "./corrections.ts";
import { checkLineage } from "./lineage.ts";
import { answerResume, takeResumeAnswer } from "./resume.ts";
import { followMovedPeer, newerPlacement, resumeReconnects, signedTime } from "./reconnect.ts";
import { learnSealKey, releaseAwaiting, sealKeyOf, takeHello, takeProvenMail } from "./proofs.ts";
import { answerAudit } from "./audit.ts";
import { fanOut, outboxEnvelope, queueEnvelope } from "./outbox.ts";
import { recordActivity } from "./activity.ts";
import { heardFromWorker } from "./liveness.ts";
import { reopenForRevision } from "./revision.ts";
import { applyGrantDecision } from "./grant-requests.ts";
import { checkChoiceAnswer, choiceFields, fitsChoices } from "./choices.ts";
import { gateMail, gateHello, countRejection, type Signer } from "./trust.ts";
import type { WorkScope } from "./scope.ts";

function invalid(code: string, problem: string, details: Record<string, unknown> = {}): TaskError {
  return new TaskError(code, { message: `${code}: ${problem}`, details: { problem, ...details } });
}

function ensure(condition: boolean, code: string, problem: string, details: Record<string, unknown> = {}): asserts condition {
  if (!condition) throw invalid(code, problem, details);
}

/** Origin: every expired active task becomes `task.timed_out` (canonical, fanned out, presented). */
export function canonicalizeTimeouts(context: CoreContext, scope: WorkScope): number {
  const { store } = context;
  const now = context.clock();
  let count = 0;
  for (const taskId of store.activeTaskIds()) {
    const stored = store.getStoredTask(taskId);
    if (stored === undefined || stored.role !== "origin" || stored.record.expiresAt > now) continue;
    store.transaction(() => {
      const event = appendCanonical(store, stored.record, "task.timed_out", { expiresAt: stored.record.expiresAt }, now);
      fanOut(context, scope, stored.record, event, true);
    });
    count += 1;
  }
  return count;
}

function validateHistory(task: TaskRecord, history: readonly unknown[]): TaskEvent[] {
  return history.map((raw, index) => {
    const event = validateTaskEvent(raw, { code: "INVALID_ASSIGNMENT", pathPrefix: `/payload/payload/history/${index}` });
    ensure(event.taskId === task.taskId, "INVALID_ASSIGNMENT", "history event belongs to another task", { index });
    ensure(sameEndpoint(event.source, task.origin), "INVALID_ASSIGNMENT", "history event is not from the task's origin", { index });
    ensure(!eventTypeRow(event.type).originLocal, "INVALID_ASSIGNMENT", "history carries an origin-local event", { index });
    return event;
  });
}

function recordAssignment(context: CoreContext, envelope: TaskEnvelope, payload: AssignmentPayload): InboxData {
  const { store } = context;
  const self = me(context);
  const task = payload.task;
  const event = validateTaskEvent(payload.event, { code: "INVALID_ASSIGNMENT", pathPrefix: "/payload/payload/event" });
  ensure(envelope.payload.taskId === task.taskId && event.taskId === task.taskId, "INVALID_ASSIGNMENT", "task ids disagree");
  ensure(sameEndpoint(task.target, self), "INVALID_ASSIGNMENT", "the task is not addressed to this endpoint");
  ensure(sameEndpoint(task.origin, envelope.source), "INVALID_ASSIGNMENT", "the envelope does not come from the task's origin");
  ensure(isAssignmentType(event.type), "INVALID_ASSIGNMENT", "assignment event is not task.created or task.reassigned");
  ensure(
    sameEndpoint(event.source, task.origin) && sameEndpoint(event.target, task.target),
    "INVALID_ASSIGNMENT",
    "event endpoints disagree with the task",
  );
  ensure((event.payload as { task?: unknown }).task === task.task, "INVALID_ASSIGNMENT", "event and task text disagree");
  ensure(task.status === "active", "INVALID_ASSIGNMENT", "the assigned task is not active");
  ensure(event.type === "task.reassigned" || payload.history === undefined, "INVALID_ASSIGNMENT", "only a reassignment carries history");
  checkLineage(task, context.settings.maxDepth);
  const history = validateHistory(task, payload.history ?? []);
  store.transaction(() => {
    const known = store.getStoredTask(task.taskId);
    if (known === undefined) store.putTask(task, "worker");
    else {
      ensure(
        known.role === "worker" && sameEndpoint(known.record.origin, task.origin),
        "INVALID_ASSIGNMENT",
        "a known task with another origin",
      );
      // Only a new assignment event (a reassignment) moves a known task; a re-served copy of an
      // assignment already recorded is no news and must not reopen a task that ended since.
      if (store.getEvent(event.eventId) === undefined) {
        store.updateTask(task.taskId, {
          target: task.target,
          ...(task.lineage === undefined ? {} : { lineage: task.lineage }),
          ...(task.generation === undefined ? {} : { generation: task.generation }),
        });
        if (known.record.status !== task.status) store.setStatus(task.taskId, task.status);
      }
    }
    for (const carried of history) store.appendEvent(carried);
    store.appendEvent(event);
    // The origin is where this assignment says, as of its signing: older signed facts move nothing (reconnect.ts).
    const signedAt = signedTime(envelope);
    const meta = store.getTaskMeta(task.taskId);
    if (signedAt !== undefined && newerPlacement(meta, signedAt)) store.setTaskMeta(task.taskId, { ...meta, peerSince: signedAt });
  });
  return { kind: "assignment", taskId: task.taskId, eventId: event.eventId, visible: true, requires: [] };
}

/** Creates the canonical event of a validated intent (first terminal wins) and its fan-out. */
function canonicalOf(
  context: CoreContext,
  scope: WorkScope,
  task: TaskRecord,
  intent: TaskIntent,
  signer: Signer,
): { event: TaskEvent; fanout?: string } {
  const { store } = context;
  const now = context.clock();
  const row = eventTypeRow(intent.type);
  const payload = { intentId: intent.intentId, ...intent.payload };
  if (intent.type === "task.refused") return { event: canonicalRefusal(context, task, payload, signer) };
  if (row.originLocal) {
    // Never forwarded: shown here only (progress and cancel outcomes without a wake).
    const event = appendCanonical(store, task, intent.type, payload, now);
    if (row.modelVisible) store.enqueueLocalPresentation(event);
    return { event };
  }
  if (row.terminalStatus !== null && isTerminalStatus(store.getStoredTask(task.taskId)!.record.status)) {
    const event = appendCanonical(store, task, "task.late_terminal", { ...payload, lateType: intent.type }, now);
    return { event, fanout: fanOut(context, scope, task, event, true) };
  }
  if (intent.type === "task.correction") checkIntentCorrection(store, task.taskId, payload);
  if (intent.type === "task.answer") {
    const question = store.getEvent(String(intent.payload.inReplyTo));
    ensure(
      question !== undefined && question.taskId === task.taskId && question.type === "task.question",
      "INVALID_INTENT",
      "inReplyTo does not name a question of this task",
    );
    checkChoiceAnswer(store, String(intent.payload.inReplyTo), String(intent.payload.message), "INVALID_INTENT");
  }
  if (intent.type === "task.question") choiceFields({ type: "question", ...intent.payload }, "INVALID_INTENT");
  const event = appendCanonical(store, task, intent.type, payload, now);
  return { event, fanout: fanOut(context, scope, task, event, true) };
}

/** The signature this origin put on an assignment it sent (to match a refusal against). */
function assignmentSignature(context: CoreContext, taskId: string, eventId: string): string | undefined {
  const envelopeId = context.store.getOperation(taskId, OPERATION.assignment(eventId))?.envelopeIds[0];
  return envelopeId === undefined ? undefined : outboxEnvelope(context, envelopeId)?.payload.signature?.sig;
}

/**
 * A worker's refusal of the task's current assignment. It must name the signature this origin put
 * on that assignment (else it refuses something the relay substituted: NOT_AUTHORIZED). Signed by
 * a key this origin trusts, it is verified: the task fails (an origin-authored `task.failed`, first
 * terminal wins, not forwarded). Signed by an unknown key — the usual case, since the worker did
 * not pair with us either, but also what a relay could forge — it is advice: the task stays active,
 * and the origin's model and human read who claims to refuse and why. Only the origin sees it.
 */
function canonicalRefusal(context: CoreContext, task: TaskRecord, payload: Record<string, unknown>, signer: Signer): TaskEvent {
  const { store } = context;
  const now = context.clock();
  const current = latestAssignment(store.getEvents(task.taskId));
  ensure(
    current !== undefined && current.eventId === payload.eventId,
    "INVALID_INTENT",
    "the refusal names another assignment than the current one",
  );
  const ours = assignmentSignature(context, task.taskId, current.eventId);
  if (ours === undefined || ours !== payload.assignmentSig) {
    throw new TaskError("NOT_AUTHORIZED", {
      details: { taskId: task.taskId, problem: "the refusal names an assignment signature this origin did not make" },
    });
  }
  const verified = signer.verified && (signer.self || signer.peerName !== undefined);
  const refusedBy = signer.verified
    ? { key: signer.key, fingerprint: signer.fingerprint, ...(signer.claimedName === undefined ? {} : { claimedName: signer.claimedName }) }
    : undefined;
  const refusal = appendCanonical(
    store,
    task,
    "task.refused",
    { ...payload, verified, ...(refusedBy === undefined ? {} : { refusedBy }) },
    now,
  );
  if (verified && !isTerminalStatus(store.getStoredTask(task.taskId)!.record.status)) {
    const message = `The worker refused the assignment (${String(payload.reason)}).`;
    appendCanonical(
      store,
      task,
      "task.failed",
      { summary: message, noEffect: true, error: { code: "ASSIGNMENT_REFUSED", message, retryable: false } },
      now,
    );
  }
  store.enqueueLocalPresentation(refusal);
  return refusal;
}

function canonicalizeIntent(context: CoreContext, scope: WorkScope, envelope: TaskEnvelope, signer: Signer): InboxData {
  const { store } = context;
  const intent = assertValid(TaskIntent, envelope.payload.payload, { code: "INVALID_INTENT", pathPrefix: "/payload/payload" });
  ensure(intent.taskId === envelope.payload.taskId, "INVALID_INTENT", "task ids disagree");
  const stored = store.getStoredTask(intent.taskId);
  if (stored === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId: intent.taskId } });
  const task = stored.record;
  // Mail of a previous executor (before a reassignment) never counts. A reassignment back to the
  // same endpoint (its session re-homed there) keeps that executor: its older mail still counts.
  if (stored.role === "origin" && (intent.generation ?? 1) < (task.generation ?? 1) && !sameEndpoint(envelope.source, task.target)) {
    throw new TaskError("STALE_GENERATION", {
      details: { taskId: task.taskId, generation: intent.generation ?? 1, current: task.generation ?? 1 },
    });
  }
  const authorised = stored.role === "origin" && sameEndpoint(envelope.source, task.target) && sameEndpoint(envelope.target, task.origin);
  if (!authorised) throw new TaskError("UNAUTHORIZED_INTENT", { details: { taskId: intent.taskId, source: envelope.source } });
  // Genuine mail of the worker is a signed fact of its life (liveness.ts); unsigned mail of an older
  // peer counts from its arrival.
  heardFromWorker(context, task.taskId, signedTime(envelope) ?? context.clock());
  const row = eventTypeRow(intent.type);
  ensure(row.receiverIntent, "INVALID_INTENT", `${intent.type} is not a receiver intent`);
  ensure(!("intentId" in intent.payload), "INVALID_INTENT", "intent payload must not carry intentId");
  assertValid(row.payload, intent.payload, { code: "INVALID_INTENT", pathPrefix: "/payload/payload/payload" });
  if (intent.type === "task.activity") {
    recordActivity(context, task, intent.payload);
    return { kind: "activity" };
  }

  const key = OPERATION.intent(intent.intentId);
  const existing = store.getOperation(intent.taskId, key);
  if (existing !== undefined) {
    for (const id of existing.envelopeIds) if (store.getOutbox(id)?.state === "pending") scope.required.push(id);
    return { kind: "intent", taskId: intent.taskId, eventId: existing.logicalId, requires: existing.envelopeIds };
  }
  return store.transaction(() => {
    const { event, fanout } = canonicalOf(context, scope, task, intent, signer);
    const requires = fanout === undefined ? [] : [fanout];
    store.reserveOperation(task.taskId, key, () => ({
      logicalId: event.eventId,
      logicalType: event.type,
      envelopeIds: requires,
      createdAt: event.occurredAt,
    }));
    return { kind: "intent", taskId: task.taskId, eventId: event.eventId, requires };
  });
}

/** Whether a canonical event this endpoint receives is model-visible here. */
export function visibleAtTarget(store: CoreStore, event: TaskEvent): boolean {
  const row = eventTypeRow(event.type);
  if (!row.modelVisible || row.originLocal) return false;
  const intentId = (event.payload as { intentId?: unknown }).intentId;
  // Echoes of my own intents are canonical replicas: archive them, don't wake the model.
  return !(typeof intentId === "string" && store.getIntent(intentId) !== undefined);
}

/**
 * An answer to a question this session raised for a sub-task's worker goes down to that worker,
 * bound to its original question (this session is the sub-task's origin: the answer is canonical
 * at once). The delivery's ACK waits for it. Nothing happens when the sub-task ended or its
 * question was answered meanwhile.
 */
function relayAnswerDown(context: CoreContext, scope: WorkScope, answer: TaskEvent): string[] {
  const { store } = context;
  if (answer.type !== "task.answer") return [];
  const raises = store.getEvent(String(answer.payload.inReplyTo))?.payload.raises as { taskId?: unknown; eventId?: unknown } | undefined;
  if (typeof raises?.taskId !== "string" || typeof raises.eventId !== "string") return [];
  const child = store.getTask(raises.taskId);
  if (child === undefined || child.role !== "origin" || !openQuestions(child).some((question) => question.eventId === raises.eventId))
    return [];
  // A question raised with choices of its own may be answered outside the sub-task's: that answer
  // stays with this task (its model answers the sub-task), never reaching a worker that offered others.
  if (!fitsChoices(store, raises.eventId, String(answer.payload.message))) return [];
  const payload = {
    message: answer.payload.message,
    inReplyTo: raises.eventId,
    relayedFrom: { taskId: answer.taskId, eventId: answer.eventId },
  };
  const relayed = appendCanonical(store, child, "task.answer", payload, context.clock());
  return [fanOut(context, scope, child, relayed, false)];
}

function recordCanonical(context: CoreContext, scope: WorkScope, envelope: TaskEnvelope): InboxData {
  const { store } = context;
  const event = validateTaskEvent(envelope.payload.payload, { code: "INVALID_EVENT", pathPrefix: "/payload/payload" });
  ensure(event.taskId === envelope.payload.taskId, "INVALID_EVENT", "task ids disagree");
  const stored = store.getStoredTask(event.taskId);
  if (stored === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId: event.taskId } });
  if (stored.role === "origin") {
    // An origin-targeted echo of its own canonical event (older peers): nothing to learn.
    ensure(sameEndpoint(envelope.source, stored.record.origin), "UNAUTHORIZED_INTENT", "canonical events come only from the task's origin");
    return { kind: "canonical_event", taskId: event.taskId, eventId: event.eventId, visible: false, requires: [] };
  }
  ensure(
    sameEndpoint(envelope.source, stored.record.origin) && sameEndpoint(event.source, stored.record.origin),
    "INVALID_EVENT",
    "canonical events come only from the task's origin",
  );
  ensure(!isAssignmentType(event.type), "INVALID_EVENT", "assignment events travel as assignments");
  const terminal = eventTypeRow(event.type).terminalStatus;
  const requires = store.transaction(() => {
    if (event.type === "task.revision_requested") reopenForRevision(context, event);
    if (event.type === "task.grant_decided") applyGrantDecision(context, event);
    store.appendEvent(event);
    if (terminal !== null && stored.record.status === "active") store.setStatus(event.taskId, terminal);
    // The origin asks for this side's view: answered at once (audit.ts).
    if (event.type === "task.audit_requested") {
      const answer = answerAudit(context, store.getStoredTask(event.taskId)!, event);
      scope.required.push(answer);
      return [answer];
    }
    return relayAnswerDown(context, scope, event);
  });
  return { kind: "canonical_event", taskId: event.taskId, eventId: event.eventId, visible: visibleAtTarget(store, event), requires };
}

/**
 * A delivery as the gate reads it: sealed task mail opened with this identity's seal key (the
 * sender's seal key learned from it, once its binding verifies), or clear mail as it came.
 */
function opened(context: CoreContext, raw: RelayedEnvelope): { envelope: TaskEnvelope; sealed: boolean } {
  if (!("sealed" in raw.payload)) return { envelope: assertValid(TaskEnvelope, raw, { code: "INVALID_DELIVERY" }), sealed: false };
  const { payload, sealKey, binding } = openPayload(context.trust.options.identity, raw.payload);
  const envelope = assertValid(TaskEnvelope, { ...raw, payload }, { code: "INVALID_DELIVERY" });
  // The box names a seal key; it is the signer's only if the signer bound it (checked before use).
  if (envelope.payload.signature !== undefined) learnSealKey(context, envelope.payload.signature.key, sealKey, binding);
  return { envelope, sealed: true };
}

/** A hello: a proof request (owed an answer) or the answer to ours (a proof that releases what waited for it). */
function classifyHello(context: CoreContext, scope: WorkScope, raw: HelloEnvelope): { stage: InboxStage; data: InboxData } {
  const signer = gateHello(context.trust, raw, me(context), context.clock());
  const { resume, inReplyTo } = raw.payload.payload;
  const signedAt = signedTime(raw) ?? context.clock();
  // A resume question is answered with the ask (resume.ts); an answer to ours confirms or loses tasks.
  const answer =
    resume === undefined || inReplyTo !== undefined ? undefined : () => answerResume(context, scope, raw.source, signer, resume, signedAt);
  const proven = takeHello(context, raw, signer, answer);
  if (proven !== undefined) {
    if (resume !== undefined && inReplyTo !== undefined) takeResumeAnswer(context, scope, proven, signer, resume, signedAt);
    releaseAwaiting(context, scope, proven);
    resumeReconnects(context, scope, proven);
  }
  return { stage: "canonicalized", data: { kind: "hello" } };
}

/** Judges a delivery by its kind: what it is, and the stage it reaches. */
function classifyDelivery(context: CoreContext, scope: WorkScope, row: CoreDelivery): { stage: InboxStage; data: InboxData } {
  const raw = assertValid(RelayedEnvelope, context.store.deliveryEnvelope(row.envelopeId), { code: "INVALID_DELIVERY" });
  const self: TaskEndpoint = me(context);
  ensure(sameEndpoint(raw.target, self), "INVALID_DELIVERY", "envelope is addressed to another endpoint");
  if (raw.payload.kind === "hello") return classifyHello(context, scope, raw as HelloEnvelope);
  const { envelope, sealed } = opened(context, raw);
  const before = context.store.getTaskMeta(envelope.payload.taskId);
  const signer = gateMail(context.store, context.trust, envelope, self, context.clock());
  // Signed mail always travels sealed: signed mail in the clear is an older pi-tasks, or a forgery.
  if (signer.verified && !sealed) throw new TaskError("UNSEALED_EVENT", { details: { kind: envelope.payload.kind } });
  takeProvenMail(context, envelope, signer);
  // Verified mail from the peer's new endpoint (after a relay restart) moves the task first.
  followMovedPeer(context, scope, envelope, signer, before);
  switch (envelope.payload.kind) {
    case "assignment":
      return { stage: "recorded", data: recordAssignment(context, envelope, envelope.payload.payload) };
    case "intent":
      return { stage: "canonicalized", data: canonicalizeIntent(context, scope, envelope, signer) };
    case "canonical_event":
      return { stage: "recorded", data: recordCanonical(context, scope, envelope) };
  }
}

/**
 * Tells the sender of a refused assignment why (a signed `task.refused` intent), so its task fails
 * with a reason instead of waiting for a timeout. Best effort: it is one envelope, never retried
 * past the usual outbox rules; the relay bounds how many an unknown sender can provoke.
 */
function refuseAssignment(context: CoreContext, scope: WorkScope, row: CoreDelivery, error: TaskError): void {
  const raw = opened(context, context.store.deliveryEnvelope(row.envelopeId) as RelayedEnvelope).envelope;
  const assignment = raw.payload.payload as AssignmentPayload;
  const signature = raw.payload.signature;
  if (signature === undefined) return;
  // Sealed to the refused sender's own seal key (its binding verified on opening): the refusal says
  // only why, and the sender needs no proof from us to read it.
  const sealKey = sealKeyOf(context, signature.key);
  if (sealKey === undefined) return;
  // Naming the refused assignment's signature lets the origin tell our refusal of its assignment
  // from a refusal of something the relay substituted.
  const intent = makeIntent(
    raw.payload.taskId,
    "task.refused",
    { eventId: assignment.event.eventId, assignmentSig: signature.sig, reason: error.code },
    assignment.task.generation,
  );
  const envelopeId = queueEnvelope(context, {
    taskId: raw.payload.taskId,
    from: me(context),
    to: raw.source,
    kind: "intent",
    inner: intent,
    purpose: "refusal",
    carriage: { sealTo: sealKey },
  });
  scope.required.push(envelopeId);
}

/** Rejects a delivery for good: counted, recorded by the host, marked for its ACK. */
function reject(context: CoreContext, scope: WorkScope, row: CoreDelivery, error: TaskError): void {
  const { store } = context;
  countRejection(context.trust, error.code);
  if (error.details.refuseAssignment === true) {
    try {
      refuseAssignment(context, scope, row, error);
    } catch (raw) {
      scope.fail("intake", toTaskError(raw).withDetails({ envelopeId: row.envelopeId, refusal: true }));
    }
  }
  try {
    store.updateDelivery(row.envelopeId, {
      stage: "rejected",
      ackRequested: true,
      data: { kind: "rejected", error: { code: error.code, message: error.message } },
    });
  } catch (full) {
    // No room even to mark it rejected: it stays tracked and is classified again when there is room.
    scope.fail("intake", toTaskError(full).withDetails({ envelopeId: row.envelopeId }));
    return;
  }
  const recorded = context.host.recordRejection?.({
    envelopeId: row.envelopeId,
    code: error.code,
    message: error.message,
    details: error.details,
  });
  if (recorded instanceof Promise)
    recorded.catch((failure: unknown) => scope.fail("presentation", toTaskError(failure).withDetails({ envelopeId: row.envelopeId })));
}

/**
 * Validates and records one tracked delivery in its own transaction, setting its stage. Never
 * throws for a bad delivery (it is rejected and reported); relay-loss errors propagate; a full
 * store (`TASK_CAPACITY`), a malformed peers.json (`PEERS_INVALID`) or a pairing the human has not
 * decided (`PAIRING_PENDING`) leaves the delivery tracked and unACKed, to be classified again later.
 * Given `setAside`, mail naming a task this lifetime does not know (`UNKNOWN_TASK`) stays tracked
 * and is handed to it: the task's assignment may come later in the same pass (a relay that
 * reordered the page), and the pass records it again once the rest was taken (pass.ts).
 */
export function recordDelivery(context: CoreContext, scope: WorkScope, row: CoreDelivery, setAside?: (row: CoreDelivery) => void): void {
  const { store } = context;
  const required = scope.required.length;
  try {
    store.transaction(() => store.updateDelivery(row.envelopeId, classifyDelivery(context, scope, row)));
  } catch (raw) {
    const error = toTaskError(raw);
    if (error.spec.relayLoss) throw error;
    scope.required.length = required;
    if (error.code === "PAIRING_PENDING") return;
    if (error.code === "UNKNOWN_TASK" && setAside !== undefined) {
      setAside(row);
      return;
    }
    scope.fail("intake", error.withDetails({ envelopeId: row.envelopeId, cursor: row.cursor }));
    // Full local memory, or a peers.json the user must repair, is not the delivery's fault: it
    // stays tracked and unACKed (the relay keeps it) and is classified again on a later pass, instead of
    // being rejected, ACKed and lost.
    if (error.code === "TASK_CAPACITY" || error.code === "PEERS_INVALID") return;
    reject(context, scope, row, error);
  }
}
