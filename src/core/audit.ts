/**
 * Audit: one timeline of a task joining both sides' views, with the gaps named.
 *
 * The origin holds the canonical log; the worker holds the events that reached it. To compare them
 * the origin asks over the relay (`task.audit_requested`, archived at the worker) and the worker
 * answers at once with its view (`task.audit_view`: its status and its newest `maxAuditEntries`
 * events), which the origin keeps in its log without showing it to the model. `joinAudit` is pure:
 * the core, the extension's `/tasks audit` and the CLI's `pi-tasks audit` (which joins the views
 * recorded in Pi session files) share it.
 *
 * Gaps named:
 * - `no-view`: a side whose view is missing (never asked, not answered yet, or not recorded);
 * - `missing`: an event one side should hold and does not — the worker lacks an event the origin
 *   forwarded before the view was asked for, or the origin lacks an event the worker holds;
 * - `omitted`: older events a side left out of its view (its count);
 * - `status`: the sides disagree on the task's status.
 */
import { TaskError } from "../protocol/errors.ts";
import { eventTypeRow } from "../protocol/events.ts";
import { maxAuditEntries } from "../protocol/limits.ts";
import type { AuditEntry, AuditViewPayload, TaskEvent, TaskStatus } from "../protocol/schemas.ts";
import type { StoredTask } from "../store/task-store.ts";
import { appendCanonical } from "./canonical.ts";
import { type CoreContext, me } from "./context.ts";
import { makeIntent } from "./envelopes.ts";
import { fanOut, queueEnvelope } from "./outbox.ts";

/** One side's view of a task. */
export interface AuditSide {
  readonly label: string;
  readonly status?: TaskStatus;
  readonly events: readonly AuditEntry[];
  /** Older events the side left out of its view. */
  readonly omitted?: number;
  /** Only events up to this sequence are expected on this side (the view was taken then). */
  readonly upToSequence?: string;
  /** The side holds only what travels to the worker (not the origin's own records). */
  readonly forwardedOnly?: boolean;
  /** A partial record (what a session showed or archived): joined, but never named as missing. */
  readonly partial?: boolean;
}

export interface AuditLine extends AuditEntry {
  /** The labels of the sides that hold this event. */
  readonly heldBy: readonly string[];
}

export type AuditGap =
  | { readonly kind: "no-view"; readonly side: string; readonly text: string }
  | { readonly kind: "missing"; readonly side: string; readonly eventId: string; readonly text: string }
  | { readonly kind: "omitted"; readonly side: string; readonly count: number; readonly text: string }
  | { readonly kind: "status"; readonly side: string; readonly text: string };

export interface AuditReport {
  readonly taskId: string;
  readonly sides: readonly string[];
  readonly timeline: readonly AuditLine[];
  readonly gaps: readonly AuditGap[];
}

export function auditEntry(event: TaskEvent): AuditEntry {
  return { eventId: event.eventId, type: event.type, sequence: event.sequence, occurredAt: event.occurredAt };
}

/** Whether the worker is expected to hold an event of this type (the origin forwards it). */
function travels(entry: AuditEntry): boolean {
  const row = eventTypeRow(entry.type);
  return !row.originLocal;
}

const bySequence = (a: AuditEntry, b: AuditEntry) => Number(a.sequence) - Number(b.sequence) || a.occurredAt - b.occurredAt;

/**
 * Joins views into one timeline. `views[0]` is the reference (the origin, or the side with the
 * most events); `undefined` views are named as gaps.
 */
export function joinAudit(
  taskId: string,
  views: readonly (AuditSide | { readonly label: string; readonly missing: string })[],
): AuditReport {
  const gaps: AuditGap[] = [];
  const present: AuditSide[] = [];
  for (const view of views) {
    if ("missing" in view) gaps.push({ kind: "no-view", side: view.label, text: `no view from the ${view.label}: ${view.missing}` });
    else present.push(view);
  }
  const lines = new Map<string, { entry: AuditEntry; heldBy: string[] }>();
  for (const side of present) {
    for (const entry of side.events) {
      const line = lines.get(entry.eventId) ?? { entry, heldBy: [] };
      if (!line.heldBy.includes(side.label)) line.heldBy.push(side.label);
      lines.set(entry.eventId, line);
    }
  }
  const timeline = [...lines.values()].map(({ entry, heldBy }) => ({ ...entry, heldBy })).sort(bySequence);
  for (const side of present) {
    if ((side.omitted ?? 0) > 0)
      gaps.push({
        kind: "omitted",
        side: side.label,
        count: side.omitted!,
        text: `the ${side.label} left ${side.omitted} older event(s) out of its view`,
      });
    const held = new Set(side.events.map((entry) => entry.eventId));
    const limit = side.upToSequence === undefined ? Number.POSITIVE_INFINITY : Number(side.upToSequence);
    const oldestShown = side.omitted ? Math.min(...side.events.map((entry) => Number(entry.sequence))) : 0;
    if (side.partial === true) continue;
    for (const line of timeline) {
      if (held.has(line.eventId) || Number(line.sequence) > limit || Number(line.sequence) < oldestShown) continue;
      if (side.forwardedOnly === true && !travels(line)) continue;
      gaps.push({
        kind: "missing",
        side: side.label,
        eventId: line.eventId,
        text: `the ${side.label} never recorded ${line.type} #${line.sequence} (${line.eventId}), which the ${line.heldBy.join(" and ")} hold(s)`,
      });
    }
  }
  const [reference, ...others] = present;
  for (const other of others) {
    if (reference?.status !== undefined && other.status !== undefined && other.status !== reference.status) {
      gaps.push({
        kind: "status",
        side: other.label,
        text: `the ${other.label} says ${other.status}; the ${reference.label} says ${reference.status}`,
      });
    }
  }
  return { taskId, sides: views.map((view) => view.label), timeline, gaps };
}

// ---------------------------------------------------------------------------------------------
// The exchange over the relay
// ---------------------------------------------------------------------------------------------

function originTask(context: CoreContext, taskId: string): StoredTask {
  const stored = context.store.getStoredTask(taskId);
  if (stored === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId } });
  if (stored.role !== "origin")
    throw new TaskError("NOT_ORIGIN", {
      message: "only the task's origin audits it (it asks the worker for its view)",
      details: { taskId },
    });
  return stored;
}

/** The origin asks the worker for its view; returns the request's event id. */
export function requestAudit(context: CoreContext, taskId: string): string {
  const { store } = context;
  const stored = originTask(context, taskId);
  return store.transaction(() => {
    const event = appendCanonical(store, stored.record, "task.audit_requested", {}, context.clock());
    fanOut(context, undefined, stored.record, event, false);
    return event.eventId;
  });
}

/** The worker answers an audit request with its view (queued at once; the ACK waits for it). */
export function answerAudit(context: CoreContext, stored: StoredTask, request: TaskEvent): string {
  const events = taskEntries(context.store.getEvents(stored.record.taskId));
  const shown = events.slice(-maxAuditEntries);
  const payload: AuditViewPayload = {
    requestEventId: request.eventId,
    status: stored.record.status,
    events: shown.map(auditEntry),
    omitted: events.length - shown.length,
  };
  const intent = makeIntent(
    stored.record.taskId,
    "task.audit_view",
    payload as unknown as Record<string, unknown>,
    stored.record.generation,
  );
  return queueEnvelope(context, {
    taskId: stored.record.taskId,
    from: me(context),
    to: stored.record.origin,
    kind: "intent",
    inner: intent,
    purpose: "intent",
  });
}

/** The audit's own bookkeeping (a request, a view): about the audit, not the task, so never in its timeline. */
const AUDIT_TYPES: ReadonlySet<string> = new Set(["task.audit_requested", "task.audit_view"]);

/** The task's own events of a side, without the audit's bookkeeping. */
export function taskEntries<E extends AuditEntry>(entries: readonly E[]): E[] {
  return entries.filter((entry) => !AUDIT_TYPES.has(entry.type));
}

/** The origin's report: its log joined with the worker's newest view (if one came). */
export function auditReport(context: CoreContext, taskId: string): AuditReport {
  const stored = originTask(context, taskId);
  const events = context.store.getEvents(taskId);
  const view = [...events].reverse().find((event) => event.type === "task.audit_view");
  const origin: AuditSide = { label: "origin", status: stored.record.status, events: taskEntries(events.map(auditEntry)) };
  if (view === undefined) {
    const asked = events.some((event) => event.type === "task.audit_requested");
    return joinAudit(taskId, [origin, { label: "worker", missing: asked ? "asked, not answered yet" : "not asked yet" }]);
  }
  const payload = view.payload as unknown as AuditViewPayload;
  const request = events.find((event) => event.eventId === payload.requestEventId);
  const worker: AuditSide = {
    label: "worker",
    status: payload.status,
    events: taskEntries(payload.events),
    omitted: payload.omitted,
    forwardedOnly: true,
    ...(request === undefined ? {} : { upToSequence: request.sequence }),
  };
  return joinAudit(taskId, [origin, worker]);
}

// ---------------------------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------------------------

/**
 * The report as lines a person reads: the timeline numbered 1, 2, 3… in order (the log's own
 * sequence numbers have holes where the audit's bookkeeping was left out), who holds each event,
 * then the gaps.
 */
export function auditLines(report: AuditReport): string[] {
  const lines = [`audit of task ${report.taskId} — sides: ${report.sides.join(", ")}`];
  const width = Math.max(0, ...report.timeline.map((line) => line.type.length));
  const digits = String(report.timeline.length).length;
  report.timeline.forEach((line, index) => {
    lines.push(
      `  ${String(index + 1).padStart(digits)}.  ${new Date(line.occurredAt).toISOString()}  ${line.type.padEnd(width)}  held by ${line.heldBy.join(", ")}`,
    );
  });
  if (report.timeline.length === 0) lines.push("  (no events)");
  lines.push(report.gaps.length === 0 ? "no gaps: every side holds what it should" : `gaps (${report.gaps.length}):`);
  for (const gap of report.gaps) lines.push(`  - ${gap.text}`);
  return lines;
}
