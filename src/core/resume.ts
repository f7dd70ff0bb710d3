/**
 * Resume, opt-in (`PI_TASKS_RESUME`): an origin Pi restarted on the same session takes back the
 * tasks it had delegated — which tasks, and to whom — from its session history, and asks each worker
 * over the relay, signed, whether it still holds them. The history authorizes nothing; a worker
 * never reads one.
 *
 *   restore → ask → answer (worker) → confirm or lose (origin)
 *
 * 1. `restoreTasks` (origin): each task's record as it was sent and its events as the session showed
 *    or archived them (never presented again; the worker intents they canonicalized stay
 *    deduplicated), moved to this lifetime's endpoint, marked `resuming` and `reconnectingSince`.
 *    Nothing of the task leaves for its worker until the worker confirmed (proofs.ts: awaiting).
 * 2. `askResumes` (peers phase): one resume question per worker endpoint, carried by a hello
 *    (content-free: task ids only), paced like every ask; a worker the relay does not know loses
 *    its tasks at once.
 * 3. `answerResume` (worker): it holds a task it works on for the asking key (the origin key bound
 *    at assignment). Each held task's origin moves to the asking endpoint and the worker's mail for it
 *    is sent again there; the answer goes out first (hellos ship before the outbox).
 * 4. `takeResumeAnswer` (origin): a task held under its bound worker key (none bound yet: a key this
 *    identity trusts) continues; one the worker does not hold is orphaned at once (reassignable); one
 *    never answered is orphaned after `reconnectTimeoutMs` (reconnect.ts).
 */
import { sameEndpoint, endpointKey } from "../protocol/endpoint.ts";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { eventTypeRow, isAssignmentType, validateTaskEvent } from "../protocol/events.ts";
import { maxHellosPerPass, maxResumeTasks } from "../protocol/limits.ts";
import { type Grant, type ResumeList, TaskRecord, type TaskEndpoint, type TaskEvent } from "../protocol/schemas.ts";
import { assertValid, isRecord } from "../protocol/validate.ts";
import { OPERATION } from "./bookkeeping.ts";
import { type CoreContext, isClosed, me, rethrowRelayLoss } from "./context.ts";
import { askProof } from "./proofs.ts";
import { giveUp, movePeer, newerPlacement, relocated } from "./reconnect.ts";
import type { WorkScope } from "./scope.ts";
import { describeKey, type Signer } from "./trust.ts";

/** A task as a restarted origin's session history knows it. */
export interface ResumedTask {
  /** The record as it was sent. */
  readonly record: TaskRecord;
  /** Its events as the session showed or archived them, oldest first. */
  readonly events: readonly TaskEvent[];
  /** The worker's key, when an event of the worker was shown with it. */
  readonly workerKey?: string;
}

type VerifiedSigner = Extract<Signer, { verified: true }>;

/** The record part of a task as a view shows it (what a session keeps of a task it sent). */
export function taskRecordOf(task: TaskRecord): TaskRecord {
  const record: Record<string, unknown> = {};
  for (const key of Object.keys(TaskRecord.properties)) if (key in task) record[key] = (task as Record<string, unknown>)[key];
  return record as TaskRecord;
}

/** One history entry, checked (INVALID_REQUEST with its path otherwise). */
function checked(raw: unknown, index: number): ResumedTask {
  const at = `/tasks/${index}`;
  if (!isRecord(raw) || !Array.isArray(raw.events)) {
    throw new TaskError("INVALID_REQUEST", { message: "a resumed task is {record, events, workerKey?}", details: { path: at } });
  }
  const record = assertValid(TaskRecord, raw.record, { code: "INVALID_REQUEST", pathPrefix: `${at}/record` });
  const events = raw.events.map((event, position) =>
    validateTaskEvent(event, { code: "INVALID_REQUEST", pathPrefix: `${at}/events/${position}` }),
  );
  if (events.some((event) => event.taskId !== record.taskId)) {
    throw new TaskError("INVALID_REQUEST", { message: "an event belongs to another task", details: { path: `${at}/events` } });
  }
  if (raw.workerKey !== undefined && typeof raw.workerKey !== "string") {
    throw new TaskError("INVALID_REQUEST", { message: "workerKey is a key text", details: { path: `${at}/workerKey` } });
  }
  return { record, events, ...(raw.workerKey === undefined ? {} : { workerKey: raw.workerKey }) };
}

/** The record as its events left it: target and generation of the latest assignment, status, revision round. */
function replayed(sent: TaskRecord, events: readonly TaskEvent[]): TaskRecord {
  let record: TaskRecord = { ...sent, status: "active" };
  for (const event of events) {
    if (event.type === "task.reassigned") record = { ...record, target: event.target, generation: (record.generation ?? 1) + 1 };
    else if (isAssignmentType(event.type)) record = { ...record, target: event.target };
    if (event.type === "task.revision_requested") {
      record = { ...record, status: "active", revision: Number(event.payload.round), expiresAt: Number(event.payload.expiresAt) };
    }
    if (event.type === "task.grant_decided" && event.payload.grant !== undefined)
      record = { ...record, grant: event.payload.grant as Grant };
    const terminal = eventTypeRow(event.type).terminalStatus;
    if (terminal !== null && record.status === "active") record = { ...record, status: terminal };
  }
  return record;
}

/** Puts one task back at this origin, waiting for its worker's word. */
function restoreOne(context: CoreContext, self: TaskEndpoint, task: ResumedTask): void {
  const { store } = context;
  const record = replayed(task.record, task.events);
  const taskId = record.taskId;
  store.putTask({ ...record, origin: self, ...relocated(record.lineage, record.origin, self) }, "origin");
  for (const event of task.events) {
    store.appendEvent(event);
    const intentId = event.payload.intentId;
    // A worker intent canonicalized before the restart is not canonicalized (nor shown) again.
    if (typeof intentId !== "string") continue;
    store.reserveOperation(taskId, OPERATION.intent(intentId), () => ({
      logicalId: event.eventId,
      logicalType: event.type,
      envelopeIds: [],
      createdAt: event.occurredAt,
    }));
  }
  const key = task.workerKey === undefined ? {} : { workerKey: task.workerKey };
  // A loss the session already reported stays reported: losing the task again shows nothing new.
  const orphaned = lastLoss(task.events);
  const lost = orphaned === undefined ? {} : { lostSince: Number(orphaned.payload.since), orphanedAt: orphaned.occurredAt };
  store.setTaskMeta(taskId, { ...key, ...lost, resuming: true, reconnectingSince: context.clock() });
  context.search.startLooking(taskId);
}

/** The task's `task.orphaned` the session showed after its latest assignment, if any (its worker's loss, reported). */
function lastLoss(events: readonly TaskEvent[]): TaskEvent | undefined {
  const latest = [...events].reverse().find((event) => event.type === "task.orphaned" || isAssignmentType(event.type));
  return latest?.type === "task.orphaned" ? latest : undefined;
}

/**
 * Origin: takes back the tasks of a session history (at most `maxResumeTasks`, else RESUME_LIMIT and
 * nothing changes). A task this lifetime knows, or one its origin acknowledged, is left alone.
 * Returns the ids of the tasks restored.
 */
export function restoreTasks(context: CoreContext, tasks: readonly unknown[]): string[] {
  if (tasks.length > maxResumeTasks) {
    throw new TaskError("RESUME_LIMIT", { details: { tasks: tasks.length, maxResumeTasks } });
  }
  const all = tasks.map(checked);
  const self = me(context);
  const { store } = context;
  return store.transaction(() => {
    const restored: string[] = [];
    for (const task of all) {
      const known = store.getStoredTask(task.record.taskId) !== undefined;
      if (known || task.events.some((event) => event.type === "task.parent_acknowledged")) continue;
      restoreOne(context, self, task);
      restored.push(task.record.taskId);
    }
    return restored;
  });
}

/** The tasks still waiting for their worker's word, by worker endpoint. */
function waiting(context: CoreContext): Map<string, { target: TaskEndpoint; tasks: string[] }> {
  const { store } = context;
  const byTarget = new Map<string, { target: TaskEndpoint; tasks: string[] }>();
  for (const taskId of context.search.mayBeLookingIds()) {
    if (store.getTaskMeta(taskId)?.resuming !== true) continue;
    const target = store.getStoredTask(taskId)!.record.target;
    const group = byTarget.get(endpointKey(target));
    if (group === undefined) byTarget.set(endpointKey(target), { target, tasks: [taskId] });
    else group.tasks.push(taskId);
  }
  return byTarget;
}

/** The peers phase's resume questions: one per worker endpoint, at most `maxHellosPerPass`. */
export async function askResumes(context: CoreContext, scope: WorkScope): Promise<void> {
  let asked = 0;
  for (const { target, tasks } of waiting(context).values()) {
    if (asked >= maxHellosPerPass || scope.expired() || isClosed(context)) return;
    try {
      if ((await askProof(context, scope, target, { tasks })) !== undefined) asked += 1;
    } catch (raw) {
      rethrowRelayLoss(raw);
      const error = toTaskError(raw);
      // Nobody holds the endpoint any more: its tasks are lost now, not after the wait.
      if (error.code === "TARGET_NOT_REGISTERED") for (const taskId of tasks) lose(context, taskId);
      else scope.fail("peers", error.withDetails({ resume: tasks }));
    }
  }
}

/**
 * Worker: which of the asked tasks it holds for `signer` (the origin key bound at assignment); each
 * held task's origin moves to `source`, and the worker's mail for it goes there again. A question
 * signed (at `signedAt`) no later than the fact that placed the task's origin where it is — an
 * earlier restart's question, which a relay can replay however genuine — holds nothing and moves
 * nothing; a question that is stale for every task it names is refused (`STALE_EVENT`).
 */
export function answerResume(
  context: CoreContext,
  scope: WorkScope,
  source: TaskEndpoint,
  signer: VerifiedSigner,
  asked: ResumeList,
  signedAt: number,
): ResumeList {
  const { store } = context;
  const tasks = [...new Set(asked.tasks)];
  const ours = tasks.filter((taskId) => {
    const stored = store.getStoredTask(taskId);
    return stored?.role === "worker" && store.getTaskMeta(taskId)?.originKey === signer.key;
  });
  const held = ours.filter((taskId) => newerPlacement(store.getTaskMeta(taskId), signedAt));
  if (ours.length > 0 && held.length === 0) {
    throw new TaskError("STALE_EVENT", {
      details: { problem: "a resume question older than the one that placed its tasks' origin (replayed)", tasks: ours },
    });
  }
  store.transaction(() => {
    for (const taskId of held) movePeer(context, scope, taskId, source, "all", signedAt);
  });
  return { tasks, held };
}

/** Whether `signer` may confirm a task: its bound worker key, or (none bound yet) a key this identity trusts. */
function confirms(context: CoreContext, taskId: string, signer: VerifiedSigner): boolean {
  const bound = context.store.getTaskMeta(taskId)?.workerKey;
  if (bound !== undefined) return bound === signer.key;
  // The hello gate looks up no peer (trust.ts gateHello): whom this identity trusts is asked here.
  const known = describeKey(context.trust, signer.key);
  return known.self || known.peerName !== undefined;
}

/** Origin: a worker's answer to our resume question (the hello it answers was ours, asked of `source`). */
export function takeResumeAnswer(
  context: CoreContext,
  scope: WorkScope,
  source: TaskEndpoint,
  signer: VerifiedSigner,
  answer: ResumeList,
  signedAt: number,
): void {
  const { store } = context;
  const held = new Set(answer.held ?? []);
  for (const taskId of new Set(answer.tasks)) {
    const stored = store.getStoredTask(taskId);
    if (stored?.role !== "origin" || store.getTaskMeta(taskId)?.resuming !== true) continue;
    if (!sameEndpoint(stored.record.target, source)) continue;
    // Only the key bound to the task decides, either way: another key's answer (a relay's own) changes nothing.
    if (!confirms(context, taskId, signer)) continue;
    if (held.has(taskId)) confirm(context, scope, taskId, source, signer, signedAt);
    else lose(context, taskId);
  }
}

/** The worker holds the task: it continues; what the origin wrote meanwhile leaves now, sealed. */
function confirm(
  context: CoreContext,
  scope: WorkScope,
  taskId: string,
  source: TaskEndpoint,
  signer: VerifiedSigner,
  signedAt: number,
): void {
  const { store } = context;
  store.transaction(() => {
    const { resuming: _confirmed, ...meta } = store.getTaskMeta(taskId) ?? {};
    const session = signer.claimedName === undefined ? {} : { peerSession: signer.claimedName };
    store.setTaskMeta(taskId, { ...meta, workerKey: signer.key, ...session });
    movePeer(context, scope, taskId, source, "all", signedAt);
  });
}

/** Nobody holds the task any more: orphaned now (an ended one just stops waiting). */
function lose(context: CoreContext, taskId: string): void {
  const { store } = context;
  const stored = store.getStoredTask(taskId);
  if (stored === undefined) return;
  giveUp(context, stored, store.getTaskMeta(taskId)?.reconnectingSince ?? context.clock());
}
