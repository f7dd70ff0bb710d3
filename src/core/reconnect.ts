/**
 * Tasks survive a relay restart. Both Pis keep their RAM; after `RELAY_RESET` each binds a fresh
 * endpoint and the core re-homes the same lifetime on it (`rehome`): its own side of every task
 * moves to the new endpoint, the old relay's deliveries and cursors are forgotten, and every task
 * with a peer waits to find that peer again (`reconnectingSince`, attention `indeterminate`).
 *
 * A peer is found again either way (`movePeer`):
 * - by name: the peer's session name (from its verified mail) is looked up on the relay, at most
 *   `maxPeerProbesPerPass` per pass, each task every `orphanProbeIntervalMs`;
 * - by its mail: mail signed by the task's bound peer key arriving from a new endpoint;
 * - with another task: a peer found for one task is found for every task that looked for the same
 *   former endpoint (a task the peer never answered has no name or key to go by).
 * Then every envelope of the task to that peer — pending or accepted by the old relay — is
 * re-addressed under its own id and sent again (the new relay never saw it; the peer dedupes by
 * event and intent ids, so nothing is presented or applied twice). Events keep their ids and
 * payloads; their endpoints name the parties' current endpoints. An origin that cannot find its
 * worker within `reconnectTimeoutMs` declares the task orphaned (orphans.ts); a worker keeps
 * looking for its origin.
 */
import { sameEndpoint } from "../protocol/endpoint.ts";
import { toTaskError } from "../protocol/errors.ts";
import { maxPeerProbesPerPass, reconnectTimeoutMs } from "../protocol/limits.ts";
import type { AssignmentPayload, Lineage, TaskEndpoint, TaskEnvelope, TaskEvent, TaskRecord } from "../protocol/schemas.ts";
import { isRecord } from "../protocol/validate.ts";
import type { StoredTask } from "../store/task-store.ts";
import { type CoreContext, isClosed, rethrowRelayLoss } from "./context.ts";
import { forgetWorker, orphan } from "./liveness.ts";
import { encodeEnvelope } from "./envelopes.ts";
import { outboxEnvelope } from "./outbox.ts";
import { askProof, carriageFor, provenAt } from "./proofs.ts";
import type { WorkScope } from "./scope.ts";
import type { Signer } from "./trust.ts";
import { latestAssignmentEnvelope, type TaskMeta } from "./bookkeeping.ts";

/**
 * A task's lineage with one party moved from `from` to `to`: the chain must end with the task's
 * current origin and target (lineage.ts). Ancestors further up keep the endpoints on record.
 */
export function relocated(lineage: Lineage | undefined, from: TaskEndpoint, to: TaskEndpoint): { lineage?: Lineage } {
  if (lineage === undefined) return {};
  const move = (endpoint: TaskEndpoint) => (sameEndpoint(endpoint, from) ? to : endpoint);
  return { lineage: { ...lineage, chain: lineage.chain.map(move), owner: { ...lineage.owner, endpoint: move(lineage.owner.endpoint) } } };
}

/** Whether a task still has something to settle with its peer after a restart. */
function needsPeer(context: CoreContext, stored: StoredTask): boolean {
  if (stored.record.status === "active") return true;
  return context.store.outboxOf(stored.record.taskId).some((entry) => entry.state === "pending");
}

/**
 * Moves this lifetime to a fresh endpoint after a relay loss. Returns how many tasks now look for
 * their peer.
 *
 * `relayForgot` (the epoch changed: a restarted relay) — every peer moved too and the relay lost
 * all mail: each task waits to find its peer again, then re-sends everything. Otherwise (only this
 * side was rebound, e.g. its registration was reaped or retired) the peers stay where they were and
 * the relay still holds what it accepted: pending mail is re-addressed from the new endpoint at once.
 */
export function rehome(context: CoreContext, self: TaskEndpoint, relayForgot = true): number {
  const { store } = context;
  const previous = context.lifetime.rebind(self);
  if (previous === undefined || sameEndpoint(previous, self)) return 0;
  const now = context.clock();
  let reconnecting = 0;
  store.transaction(() => {
    for (const task of store.listTasks()) {
      const stored = store.getStoredTask(task.taskId)!;
      store.updateTask(task.taskId, {
        ...(stored.role === "origin" ? { origin: self } : { target: self }),
        ...relocated(stored.record.lineage, previous, self),
      });
      if (!needsPeer(context, stored)) continue;
      // A worker that never proved its key holds none of the task's content (it waits for that
      // proof): there is no peer to find again — the proof is asked at the task's target as before.
      if (stored.role === "origin" && store.getTaskMeta(task.taskId)?.workerKey === undefined) continue;
      if (!relayForgot) {
        movePeer(context, undefined, task.taskId, stored.role === "origin" ? stored.record.target : stored.record.origin, "pending");
        continue;
      }
      store.setTaskMeta(task.taskId, { ...store.getTaskMeta(task.taskId), reconnectingSince: now });
      context.search.startLooking(task.taskId);
      reconnecting += 1;
    }
    store.resetInbox();
  });
  context.health.answered();
  context.search.rebound();
  return reconnecting;
}

/** An event as it travels now: its parties' current endpoints (same id, same payload). */
function readdressed(event: TaskEvent, task: TaskRecord): TaskEvent {
  return { ...event, source: task.origin, target: task.target };
}

/** An envelope's inner payload, re-addressed for the task's current endpoints. */
function innerNow(envelope: TaskEnvelope, task: TaskRecord): TaskEnvelope["payload"]["payload"] {
  const inner = envelope.payload.payload;
  if (envelope.payload.kind === "canonical_event") return readdressed(inner as TaskEvent, task);
  if (envelope.payload.kind !== "assignment") return inner;
  const assignment = inner as AssignmentPayload;
  return {
    ...assignment,
    task: { ...task, status: assignment.task.status },
    event: readdressed(assignment.event, task),
    ...(assignment.history === undefined ? {} : { history: assignment.history.map((event) => readdressed(event, task)) }),
  };
}

/**
 * The peer of a task was found at `endpoint`: records it (the former one stays in the events'
 * history only), ends the wait, and re-addresses the task's envelopes to the peer — every one
 * (`all`: the relay that accepted some of them forgot them) or only those still `pending`.
 */
export function movePeer(
  context: CoreContext,
  scope: WorkScope | undefined,
  taskId: string,
  endpoint: TaskEndpoint,
  which: "all" | "pending" = "all",
  signedAt?: number,
): void {
  const { store } = context;
  const stored = store.getStoredTask(taskId)!;
  const former = stored.role === "origin" ? stored.record.target : stored.record.origin;
  store.updateTask(taskId, {
    ...(stored.role === "origin" ? { target: endpoint } : { origin: endpoint }),
    ...relocated(stored.record.lineage, former, endpoint),
  });
  const { reconnectingSince: _found, candidate: _proven, ...meta } = store.getTaskMeta(taskId) ?? {};
  // Another endpoint: what the former one was last heard saying says nothing of this one.
  const placed = signedAt === undefined ? {} : { peerSince: signedAt };
  store.setTaskMeta(taskId, { ...(stored.role === "origin" ? forgetWorker(meta) : meta), ...placed });
  const task = store.getStoredTask(taskId)!.record;
  const self = stored.role === "origin" ? task.origin : task.target;
  const now = context.clock();
  // Sealed again to the peer's key at its new endpoint (proven: by its verified mail, or by its
  // answer to our hello there); an endpoint not proven yet keeps the content waiting.
  const carriage = carriageFor(context, taskId, endpoint);
  const from = stored.role === "origin" ? currentAssignmentSeq(context, taskId) : undefined;
  for (const entry of store.outboxOf(taskId)) {
    if (which === "pending" && entry.state !== "pending") continue;
    // Mail of an earlier assignment was a former worker's: the peer found now holds the latest one.
    if (from !== undefined && entry.seq < from) continue;
    const envelope = outboxEnvelope(context, entry.envelopeId);
    if (envelope === undefined) continue;
    const awaiting = carriage === "awaiting";
    const encoded = encodeEnvelope(
      self,
      endpoint,
      taskId,
      envelope.payload.kind,
      innerNow(envelope, task),
      now,
      context.trust.options,
      entry.envelopeId,
      awaiting ? "clear" : carriage,
    );
    store.reencodeOutbox(entry.envelopeId, endpoint, encoded.text, { awaiting });
    scope?.required.push(entry.envelopeId);
  }
}

/** The outbox order of the task's latest assignment (its creation, or its latest reassignment), if it is still kept. */
function currentAssignmentSeq(context: CoreContext, taskId: string): number | undefined {
  const envelopeId = latestAssignmentEnvelope(context.store, taskId);
  return envelopeId === undefined ? undefined : context.store.getOutbox(envelopeId)?.seq;
}

/**
 * A peer found at `endpoint` is found for every task still looking for the same former endpoint
 * (one peer lifetime): those never heard from it by name or key move with it.
 */
function moveSamePeer(context: CoreContext, scope: WorkScope | undefined, former: TaskEndpoint, endpoint: TaskEndpoint): void {
  const { store } = context;
  for (const taskId of context.search.mayBeLookingIds()) {
    if (store.getTaskMeta(taskId)?.reconnectingSince === undefined) continue;
    const stored = store.getStoredTask(taskId)!;
    const peer = stored.role === "origin" ? stored.record.target : stored.record.origin;
    if (sameEndpoint(peer, former)) movePeer(context, scope, taskId, endpoint);
  }
}

/**
 * Mail signed by a task's bound peer key from another endpoint than the one on record — for a task
 * looking for its peer, or claiming the peer's session name: the peer moved (a relay restart or a
 * rebind). Unsigned mail never moves a peer. `before` is the task's meta from before this mail
 * passed the gate: outside a reconnection, a key the gate binds on this very mail (after a
 * reassignment) moves nothing.
 */
export function followMovedPeer(
  context: CoreContext,
  scope: WorkScope,
  envelope: TaskEnvelope,
  signer: Signer,
  before: TaskMeta | undefined,
): void {
  if (!signer.verified) return;
  const { store } = context;
  const stored = store.getStoredTask(envelope.payload.taskId);
  if (stored === undefined) return;
  // A task looking for its peer after a restart may bind the peer's key on this very mail (its first
  // signed intent never reached us before the restart); otherwise only a key bound before counts.
  const meta = before?.reconnectingSince !== undefined ? store.getTaskMeta(stored.record.taskId) : before;
  // A task looking for its peer follows the peer's key; otherwise the mail must also come from the
  // peer's own session (it was rebound on the same relay state and we did not notice).
  if (meta?.reconnectingSince === undefined && (meta?.peerSession === undefined || signer.claimedName !== meta.peerSession)) return;
  const bound = stored.role === "origin" ? meta?.workerKey : meta?.originKey;
  const current = stored.role === "origin" ? stored.record.target : stored.record.origin;
  if (bound !== signer.key || sameEndpoint(current, envelope.source)) return;
  // Mail signed before the fact that placed the peer where it is now (a relay replaying it) moves nothing.
  const signedAt = signedTime(envelope);
  if (!newerPlacement(meta, signedAt)) return;
  movePeer(context, scope, stored.record.taskId, envelope.source, "all", signedAt);
  moveSamePeer(context, scope, current, envelope.source);
}

/** The signing time of a piece of mail (ms), or undefined when it carries none. */
export function signedTime(envelope: { readonly payload: { readonly signature?: { readonly at: string } } }): number | undefined {
  const at = Date.parse(envelope.payload.signature?.at ?? "");
  return Number.isNaN(at) ? undefined : at;
}

/** Whether a fact signed at `signedAt` is newer than the one that placed the task's peer (reconnect.ts, resume.ts). */
export function newerPlacement(meta: TaskMeta | undefined, signedAt: number | undefined): boolean {
  return meta?.peerSince === undefined || (signedAt !== undefined && signedAt > meta.peerSince);
}

/** The endpoint a session name is registered with now, or undefined. */
async function lookUp(context: CoreContext, session: string, signal: AbortSignal): Promise<TaskEndpoint | undefined> {
  const status = await context.session.transport.sessionStatus(session, { signal });
  const endpoint = status.taskEndpoint;
  return isRecord(endpoint) && typeof endpoint.relay === "string" && typeof endpoint.id === "string"
    ? { relay: endpoint.relay, id: endpoint.id }
    : undefined;
}

/**
 * An origin that waited `reconnectTimeoutMs` in vain (or whose resumed task its worker does not hold,
 * resume.ts): the task is orphaned (once); an ended one just stops waiting.
 */
export function giveUp(context: CoreContext, stored: StoredTask, since: number): void {
  const { store } = context;
  if (stored.record.status !== "active") {
    const { reconnectingSince: _stop, resuming: _lost, ...meta } = store.getTaskMeta(stored.record.taskId) ?? {};
    store.setTaskMeta(stored.record.taskId, meta);
    return;
  }
  store.transaction(() => orphan(context, stored, since));
}

/** The reconnection phase: looks up the peers of tasks still waiting. Returns how many were found. */
export async function reconnectPeers(context: CoreContext, scope: WorkScope): Promise<number> {
  const { store } = context;
  let lookups = 0;
  let found = 0;
  for (const taskId of context.search.mayBeLookingIds()) {
    if (lookups >= maxPeerProbesPerPass || scope.expired() || isClosed(context)) break;
    const meta = store.getTaskMeta(taskId);
    const since = meta?.reconnectingSince;
    if (since === undefined) {
      context.search.stopLooking(taskId);
      continue;
    }
    const stored = store.getStoredTask(taskId)!;
    if (stored.role === "origin" && context.clock() - since >= reconnectTimeoutMs) {
      giveUp(context, stored, since);
      continue;
    }
    if (meta?.peerSession === undefined || !context.search.lookups.due(taskId)) continue;
    context.search.lookups.mark(taskId);
    lookups += 1;
    let endpoint: TaskEndpoint | undefined;
    try {
      endpoint = await lookUp(context, meta.peerSession, scope.signal);
    } catch (raw) {
      rethrowRelayLoss(raw);
      const error = toTaskError(raw);
      // Not registered (yet): the peer has not rebound on the new relay; look again later.
      if (error.code !== "CALLER_NOT_FOUND") scope.fail("peers", error.withDetails({ taskId: taskId }));
      continue;
    }
    if (isClosed(context) || endpoint === undefined) continue;
    // A name is a claim anyone may make after a restart: the endpoint holding it gets the task's
    // content only once it proved the task's bound key (at once when already proven).
    store.setTaskMeta(taskId, { ...store.getTaskMeta(taskId), candidate: endpoint });
    if (provenAt(context, endpoint) === undefined) {
      await askProof(context, scope, endpoint).catch((raw: unknown) => scope.fail("peers", toTaskError(raw).withDetails({ taskId })));
      continue;
    }
    found += resumeReconnects(context, scope, endpoint);
  }
  return found;
}

/**
 * `endpoint` proved its key: every task looking for its peer whose bound peer key it proved moves
 * there (with the tasks that looked for the same former endpoint) — when it is the candidate the
 * task's name lookup found, or when its proof claims the peer's session name (the peer's own hello
 * from wherever it bound: its name may be held by a stranger, src/relay-client/session.ts). The
 * claimed name keeps another session of the same identity (another Pi of the same user) from being
 * taken for this task's peer. Returns how many moved.
 */
export function resumeReconnects(context: CoreContext, scope: WorkScope, endpoint: TaskEndpoint): number {
  const { store } = context;
  const proof = provenAt(context, endpoint);
  if (proof === undefined) return 0;
  let moved = 0;
  for (const taskId of context.search.mayBeLookingIds()) {
    const meta = store.getTaskMeta(taskId);
    if (meta?.reconnectingSince === undefined) continue;
    const candidate = meta.candidate !== undefined && sameEndpoint(meta.candidate, endpoint);
    const named = meta.peerSession !== undefined && proof.session === meta.peerSession;
    if (!candidate && !named) continue;
    const stored = store.getStoredTask(taskId)!;
    const bound = stored.role === "origin" ? meta.workerKey : meta.originKey;
    const current = stored.role === "origin" ? stored.record.target : stored.record.origin;
    if (bound !== proof.key || sameEndpoint(current, endpoint)) continue;
    const former = current;
    store.transaction(() => {
      movePeer(context, scope, taskId, endpoint);
      moveSamePeer(context, scope, former, endpoint);
    });
    moved += 1;
  }
  return moved;
}
