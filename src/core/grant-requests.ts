/**
 * Asking for more, once (docs/protocol.md, "Grant requests"): a worker whose grant falls short asks
 * its origin for a wider one — tools, `bash`, `network`, read or write paths, never budgets — with a
 * reason, once per task. The origin's *person* decides (the extension asks them in a dialog; no
 * model tool decides): approved, the task's grant is widened for this task only and never beyond
 * what the origin itself holds (its own task's grant, when it works on one); denied, nothing
 * changes. The decision is an origin-authored canonical event (`task.grant_decided`, signed like
 * every origin event, in the task's history and its audit); at the worker it replaces the grant its
 * extension and sandbox enforce (`applyGrantDecision`, inside intake's transaction).
 *
 * Phases, in code order: the worker's request (`requestGrant`), the open requests at the origin
 * (`openGrantRequests`), the person's decision (`decideGrant`), the worker taking it
 * (`applyGrantDecision`).
 */
import { TaskError } from "../protocol/errors.ts";
import { grantAdditions, narrowGrant, widenGrant } from "../protocol/grant.ts";
import type { GrantRequest, RequestGrantParams, TaskEndpoint, TaskEvent, TaskRecord } from "../protocol/schemas.ts";
import { OPERATION } from "./bookkeeping.ts";
import { appendCanonical } from "./canonical.ts";
import type { CoreContext } from "./context.ts";
import { fanOut } from "./outbox.ts";
import type { MessageResult } from "./results.ts";
import { requireAccepted, requireOrigin, roleOf, shipOwn } from "./ship.ts";
import { workerIntent } from "./worker-operations.ts";

function refuse(taskId: string, problem: string): TaskError {
  return new TaskError("GRANT_REQUEST_REFUSED", { message: `No grant request: ${problem}.`, details: { taskId, problem } });
}

/** The worker asks its origin for `request` beside its grant, with `reason`: once per task, and only for what it lacks. */
export async function requestGrant(
  context: CoreContext,
  self: TaskEndpoint,
  params: RequestGrantParams,
  signal: AbortSignal | undefined,
): Promise<MessageResult> {
  const { request, reason } = params;
  const { task, role } = roleOf(context, params.taskId, self);
  if (role !== "worker")
    throw new TaskError("NOT_PARTICIPANT", { message: "Only a task's worker asks for more.", details: { taskId: task.taskId } });
  if (task.status !== "active") throw refuse(task.taskId, `the task is ${task.status}`);
  const adds = grantAdditions(task.grant, request);
  if (adds.length === 0) throw refuse(task.taskId, "the task's grant already allows all of it");
  return workerIntent(context, self, task, "task.grant_requested", { request, reason }, signal, {
    key: OPERATION.grantRequest,
    refused: () => refuse(task.taskId, "this task asked for more once already"),
  });
}

/** The grant requests of an origin's task that no decision answers yet (only while it is active). */
export function openGrantRequests(task: {
  readonly role: string;
  readonly status: string;
  readonly events: readonly TaskEvent[];
}): TaskEvent[] {
  if (task.role !== "origin" || task.status !== "active") return [];
  const decided = new Set(task.events.filter((event) => event.type === "task.grant_decided").map((event) => String(event.payload.request)));
  return task.events.filter((event) => event.type === "task.grant_requested" && !decided.has(event.eventId));
}

export interface GrantDecisionResult extends MessageResult {
  readonly approved: boolean;
  /** The task's grant from now on (approved), as the worker will enforce it. */
  readonly grant?: TaskRecord["grant"];
}

/** What this origin holds itself: the grant of the task it works on that this one was delegated from. */
function heldGrant(context: CoreContext, task: TaskRecord): TaskRecord["grant"] {
  const parentId = task.lineage?.parentTaskId;
  return parentId === undefined ? undefined : context.store.getStoredTask(parentId)?.record.grant;
}

/** The origin's person decides an open grant request of `taskId` (`request`: its event id). */
export async function decideGrant(
  context: CoreContext,
  self: TaskEndpoint,
  decision: { readonly taskId: string; readonly request: string; readonly approved: boolean; readonly note?: string },
  signal: AbortSignal | undefined,
): Promise<GrantDecisionResult> {
  const { store } = context;
  const { taskId, approved } = decision;
  const { event, envelopeId, grant } = store.transaction(() => {
    const task = requireOrigin(context, taskId, self);
    const asked = openGrantRequests({ role: "origin", status: task.status, events: store.getEvents(taskId) }).find(
      (open) => open.eventId === decision.request,
    );
    if (asked === undefined) throw refuse(taskId, `${decision.request} is not an open grant request of this task`);
    const grant = approved
      ? narrowGrant(widenGrant(task.grant ?? {}, asked.payload.request as GrantRequest), heldGrant(context, task))
      : undefined;
    if (grant !== undefined) store.updateTask(taskId, { grant });
    const payload = {
      request: asked.eventId,
      approved,
      ...(grant === undefined ? {} : { grant }),
      ...(decision.note === undefined ? {} : { note: decision.note }),
    };
    const decided = store.getStoredTask(taskId)!.record;
    const event = appendCanonical(store, decided, "task.grant_decided", payload, context.clock());
    return { event, envelopeId: fanOut(context, undefined, decided, event, false), grant };
  });
  requireAccepted(await shipOwn(context, signal, envelopeId), taskId);
  return { taskId, eventId: event.eventId, envelopeId, authority: "origin", approved, ...(grant === undefined ? {} : { grant }) };
}

/** At the worker: an approved decision is the task's grant from now on (inside intake's transaction). */
export function applyGrantDecision(context: CoreContext, event: TaskEvent): void {
  if (event.payload.approved !== true || event.payload.grant === undefined) return;
  context.store.updateTask(event.taskId, { grant: event.payload.grant as TaskRecord["grant"] });
}
