/**
 * Worker activity and liveness (docs/protocol.md, "Worker activity").
 *
 * The worker reports what its model is doing — running (its current tool and a short summary of
 * the call), idle, waiting for an answer, or stuck — and what it has used so far, as a signed and
 * sealed `task.activity` intent to the origin. A report is a snapshot, not history: it is sent
 * straight to the relay, never stored in the worker's outbox and never retried — the next report
 * carries the newer state — and the origin keeps only the newest in the task's meta, never as an
 * event in the task's log. The worker's extension coalesces changes (`minActivityReportIntervalMs`)
 * and reports at least every `heartbeatIntervalMs` while it holds an active task: a heartbeat.
 *
 * Liveness: the heartbeat is what lets the origin tell a worker that died from one that works
 * quietly (liveness.ts judges it, from the signing times of the worker's mail). A worker that never
 * reported (an older pi-tasks, a plain Wolfpack worker) is judged by its registration only (orphans.ts).
 */
import type { ActivityPayload, TaskEndpoint, TaskRecord } from "../protocol/schemas.ts";
import { sameEndpoint } from "../protocol/endpoint.ts";
import type { WorkerActivity } from "./bookkeeping.ts";
import type { CoreContext } from "./context.ts";
import { encodeEnvelope, makeIntent } from "./envelopes.ts";
import { carriageFor } from "./proofs.ts";
import { fenced } from "./ship.ts";

/** What a worker reports (the payload of `task.activity`, without the intent id the origin adds). */
export type ActivityReport = Omit<ActivityPayload, "intentId">;

/** What a worker tells the origin when its model ended its turns without reporting the task. */
export interface UnreportedReport {
  /** The model's last words (at most `maxUnreportedTextChars`). */
  readonly message: string;
  /** How many times it was reminded first. */
  readonly reminders: number;
}

/** Why a report was not sent: nothing is wrong, there is just no one to tell (or no safe way yet). */
export type ActivityNotSent = "not_working" | "origin_not_proven";

/**
 * Sends one activity report for a task this session works on, straight to the relay. Resolves
 * `true` once the relay accepted it, or the reason it was not sent; a relay failure is thrown (the
 * caller drops the report: the next one carries the newer state).
 */
export async function sendActivity(
  context: CoreContext,
  self: TaskEndpoint,
  taskId: string,
  report: ActivityReport,
  signal: AbortSignal | undefined,
): Promise<true | ActivityNotSent> {
  const stored = context.store.getStoredTask(taskId);
  if (stored === undefined || stored.role !== "worker" || stored.record.status !== "active") return "not_working";
  const task = stored.record;
  if (!sameEndpoint(task.target, self)) return "not_working";
  // Only to an origin that proved its key: a report is sealed like all task mail, and an older
  // peer that signs nothing would refuse a type it does not know.
  const carriage = carriageFor(context, taskId, task.origin);
  if (typeof carriage !== "object") return "origin_not_proven";
  const intent = makeIntent(taskId, "task.activity", { ...report }, task.generation);
  const encoded = encodeEnvelope(self, task.origin, taskId, "intent", intent, context.clock(), context.trust.options, undefined, carriage);
  await context.session.send({ envelopeId: encoded.envelopeId, text: encoded.text, source: self }, fenced(context, signal));
  return true;
}

/** At the origin: keeps a worker's report as its task's newest activity (an older one changes nothing). */
export function recordActivity(context: CoreContext, task: TaskRecord, payload: Record<string, unknown>): void {
  const { store } = context;
  if (task.status !== "active") return;
  const { intentId: _id, ...report } = payload as ActivityPayload;
  const meta = store.getTaskMeta(task.taskId) ?? {};
  if (meta.activity !== undefined && meta.activity.since > report.since) return;
  const activity: WorkerActivity = { ...report, heardAt: context.clock() };
  store.setTaskMeta(task.taskId, { ...meta, activity });
}
