/**
 * The trust gate: every received envelope passes, in this order,
 *
 *   verify signature → addressed to me → authorized for this kind and task → fresh → not a replay
 *
 * The order decides what a sender learns: mail from a key that may not send it is refused as such
 * (`NOT_AUTHORIZED` / `UNKNOWN_PEER`) even when it is also old. Fresh means signed within
 * `maxSignatureAgeMs` (and not from the future) — and, for a task this lifetime does not hold,
 * signed after this lifetime began (less the clock skew allowed): mail signed before a restart
 * cannot open a task anew, whoever serves it. Replays are remembered per trusted key, in a window of
 * `replayWindowEvents` each; a key this identity does not trust is never remembered, so strangers
 * cannot flush the window.
 *
 * before intake looks at it. A failure is a typed rejection (SIGNATURE_INVALID, NOT_ADDRESSED,
 * NOT_AUTHORIZED / UNKNOWN_PEER, STALE_EVENT, REPLAYED_EVENT, UNSIGNED_EVENT): intake rejects the
 * delivery (never presented, no state change, ACKed) and counts it. An unknown key's assignment
 * may wait for the local human (`PAIRING_PENDING`: the delivery stays tracked, unACKed).
 *
 * Authorization: a task binds the origin's key when its assignment arrives and the worker's key at
 * its first signed intent (a reassignment unbinds the worker). The origin's key alone may send
 * assignments and canonical events; the bound worker key alone may send intents — except a
 * refusal (`task.refused`), which any verifying key may send from the task's target endpoint, so
 * an unpaired worker can tell the origin why it refused.
 *
 * Sending: every envelope is signed by this identity (envelopes.ts).
 */
import { sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError } from "../protocol/errors.ts";
import { replayWindowEvents, maxSignatureAgeMs, maxSignatureFutureSkewMs } from "../protocol/limits.ts";
import type { HelloEnvelope, SignatureBlock, TaskEndpoint, TaskEnvelope } from "../protocol/schemas.ts";
import { fingerprintOf, generateIdentity, type Identity } from "../trust/keys.ts";
import { factsOf, type SignedFacts, verifyPayload } from "../trust/signing.ts";
import type { CoreStore, TaskMeta } from "./bookkeeping.ts";

/** An unknown key's assignment (or intent), put to the local human. */
export interface PairingRequest {
  readonly key: string;
  readonly fingerprint: string;
  /** The sender's claimed name (unverified). */
  readonly claimedName?: string;
  readonly taskId: string;
  /** What it sent: a task payload, or (at an origin about to assign) the hello of a worker it does not know. */
  readonly kind: TaskEnvelope["payload"]["kind"] | "hello";
  readonly from: TaskEndpoint;
}

export interface TrustOptions {
  /** Signs everything this core sends. */
  readonly identity: Identity;
  /** The name of a paired peer's key (peers.json), or undefined. */
  peerName(publicKey: string): string | undefined;
  /** Accept unsigned mail (older peers) as unverified. Default false. */
  readonly acceptUnsigned?: boolean;
  /** A name sent next to each signature for the receiver's human (unsigned, a claim). */
  readonly claimedName?: string;
  /**
   * What to do with an unknown key: `pending` while the local human decides (the mail waits,
   * unACKed; decide by adding a peer, then refresh), `refuse` to reject it. Default: refuse.
   */
  decideUnknown?(request: PairingRequest): "refuse" | "pending";
}

/** Who signed a piece of mail, as the gate judged it. */
export type Signer =
  | {
      readonly verified: true;
      readonly key: string;
      readonly fingerprint: string;
      readonly self: boolean;
      readonly peerName?: string;
      readonly claimedName?: string;
    }
  | { readonly verified: false };

/** The gate's per-lifetime memory: seen signed ids (replays) and rejection counts. */
export interface TrustState {
  readonly options: TrustOptions;
  /** Per trusted key: signed id → the envelope that carried it, oldest first. */
  readonly seen: Map<string, Map<string, string>>;
  readonly rejections: Map<string, number>;
  /** When this lifetime began (wall clock, ms): what is signed earlier opens no task. */
  readonly startedAt: number;
}

let processTrust: TrustOptions | undefined;

/**
 * The default when a core is given no trust options: one in-memory identity per process, trusting
 * only itself — cores in one process work together; any other identity is unknown.
 */
export function processLocalTrust(): TrustOptions {
  processTrust ??= { identity: generateIdentity().identity, peerName: () => undefined };
  return processTrust;
}

export function createTrustState(options: TrustOptions, startedAt: number = Date.now()): TrustState {
  return { options, seen: new Map(), rejections: new Map(), startedAt };
}

function rejection(code: string, details: Record<string, unknown>): TaskError {
  return new TaskError(code, { details });
}

/** Whose key it is: this identity, a paired peer, or unknown. */
export function describeKey(trust: TrustState, key: string, claimedName?: string): Extract<Signer, { verified: true }> {
  const self = key === trust.options.identity.publicKey;
  const peerName = self ? undefined : trust.options.peerName(key);
  return {
    verified: true,
    key,
    fingerprint: fingerprintOf(key),
    self,
    ...(peerName === undefined ? {} : { peerName }),
    ...(claimedName === undefined ? {} : { claimedName }),
  };
}

function known(signer: Extract<Signer, { verified: true }>): boolean {
  return signer.self || signer.peerName !== undefined;
}

function askHuman(trust: TrustState, envelope: TaskEnvelope, signer: Extract<Signer, { verified: true }>): TaskError {
  const request: PairingRequest = {
    key: signer.key,
    fingerprint: signer.fingerprint,
    ...(signer.claimedName === undefined ? {} : { claimedName: signer.claimedName }),
    taskId: envelope.payload.taskId,
    kind: envelope.payload.kind,
    from: envelope.source,
  };
  const decision = trust.options.decideUnknown?.(request) ?? "refuse";
  const details = {
    key: signer.key,
    fingerprint: signer.fingerprint,
    ...(signer.claimedName === undefined ? {} : { claimedName: signer.claimedName }),
  };
  return decision === "pending"
    ? rejection("PAIRING_PENDING", details)
    : rejection("UNKNOWN_PEER", { ...details, refuseAssignment: envelope.payload.kind === "assignment" });
}

/** The bound key a kind of mail must carry for its task, and the binding it sets. */
function authorize(
  store: CoreStore,
  trust: TrustState,
  envelope: TaskEnvelope,
  facts: SignedFacts,
  signer: Extract<Signer, { verified: true }>,
): void {
  const taskId = facts.taskId;
  const meta: TaskMeta = store.getTaskMeta(taskId) ?? {};
  const role = store.getStoredTask(taskId)?.role;
  const refuse = (bound: string) =>
    rejection("NOT_AUTHORIZED", { taskId, kind: facts.kind, type: facts.type, bound, fingerprint: signer.fingerprint });
  if (facts.kind === "intent") {
    if (role !== "origin") return; // intake answers UNKNOWN_TASK / UNAUTHORIZED_INTENT
    if (meta.workerKey !== undefined && meta.workerKey !== signer.key) throw refuse("worker");
    if (facts.type === "task.refused") return;
    if (!known(signer)) throw askHuman(trust, envelope, signer);
    if (meta.workerKey === undefined) store.setTaskMeta(taskId, { ...meta, workerKey: signer.key, ...sessionOf(signer) });
    return;
  }
  if (role === "origin") {
    // An echo of this origin's own canonical event: only this identity could have signed it.
    if (!signer.self) throw refuse("origin");
    return;
  }
  if (meta.originKey !== undefined && meta.originKey !== signer.key) throw refuse("origin");
  if (facts.kind === "canonical_event") {
    if (meta.originKey === undefined && role !== undefined) throw refuse("origin");
    return;
  }
  if (!known(signer)) throw askHuman(trust, envelope, signer);
  if (meta.originKey === undefined) store.setTaskMeta(taskId, { ...meta, originKey: signer.key, ...sessionOf(signer) });
}

/** The peer's session name its verified mail claims (to find it again after a relay restart). */
function sessionOf(signer: Extract<Signer, { verified: true }>): { peerSession?: string } {
  return signer.claimedName === undefined ? {} : { peerSession: signer.claimedName };
}

function checkFresh(facts: SignedFacts, now: number): void {
  const at = Date.parse(facts.at);
  const age = now - at;
  if (Number.isNaN(at) || age > maxSignatureAgeMs || -age > maxSignatureFutureSkewMs) {
    throw rejection("STALE_EVENT", { at: facts.at, maxAgeMs: maxSignatureAgeMs, maxFutureSkewMs: maxSignatureFutureSkewMs });
  }
}

/** Mail for a task this lifetime does not hold must be signed after the lifetime began (less the allowed skew). */
function checkLifetime(store: CoreStore, trust: TrustState, facts: SignedFacts): void {
  if (store.getStoredTask(facts.taskId) !== undefined) return;
  const at = Date.parse(facts.at);
  if (at < trust.startedAt - maxSignatureFutureSkewMs) {
    throw rejection("STALE_EVENT", {
      at: facts.at,
      problem: "signed before this session's lifetime began, for a task it does not hold",
      lifetimeStartedAt: new Date(trust.startedAt).toISOString(),
    });
  }
}

function checkReplay(trust: TrustState, facts: SignedFacts, envelopeId: string, signer: Extract<Signer, { verified: true }>): void {
  // Only trusted keys are remembered: a stranger's mail cannot push real ids out of the window.
  if (!known(signer)) return;
  const id = `${facts.kind}\u0000${facts.id}`;
  let window = trust.seen.get(facts.key);
  if (window === undefined) trust.seen.set(facts.key, (window = new Map()));
  const carrier = window.get(id);
  // The same envelope again is a redelivery (an ACK was lost): intake dedupes it. Another envelope
  // carrying an event already seen is a replay.
  if (carrier !== undefined && carrier !== envelopeId)
    throw rejection("REPLAYED_EVENT", { id: facts.id, kind: facts.kind, firstEnvelopeId: carrier });
  if (carrier !== undefined) return;
  window.set(id, envelopeId);
  if (window.size > replayWindowEvents) window.delete(window.keys().next().value!);
}

function passUnsigned(store: CoreStore, trust: TrustState, envelope: TaskEnvelope): Signer {
  if (trust.options.acceptUnsigned !== true) throw rejection("UNSIGNED_EVENT", { kind: envelope.payload.kind });
  const taskId = envelope.payload.taskId;
  const meta = store.getTaskMeta(taskId);
  // A task whose party signed before never takes unsigned mail: that would be a way around the gate.
  if (meta?.originKey !== undefined || meta?.workerKey !== undefined)
    throw rejection("NOT_AUTHORIZED", { taskId, kind: envelope.payload.kind, problem: "unsigned mail for a task with a bound key" });
  if (meta?.unverified !== true) store.setTaskMeta(taskId, { ...meta, unverified: true });
  return { verified: false };
}

/** Runs the gate on an envelope addressed to `self`; returns its signer or throws a typed rejection. */
export function gateMail(store: CoreStore, trust: TrustState, envelope: TaskEnvelope, self: TaskEndpoint, now: number): Signer {
  const block: SignatureBlock | undefined = envelope.payload.signature;
  if (block === undefined) return passUnsigned(store, trust, envelope);
  if (!verifyPayload(envelope.payload, block)) throw rejection("SIGNATURE_INVALID", { kind: envelope.payload.kind, key: block.key });
  const facts = factsOf(envelope.payload, block);
  if (!sameEndpoint(facts.to, self) || !sameEndpoint(facts.from, envelope.source)) {
    throw rejection("NOT_ADDRESSED", { signedTo: facts.to, signedFrom: facts.from, source: envelope.source });
  }
  const signer = describeKey(trust, block.key, block.name);
  authorize(store, trust, envelope, facts, signer);
  checkFresh(facts, now);
  checkLifetime(store, trust, facts);
  checkReplay(trust, facts, envelope.envelopeId, signer);
  return signer;
}

/**
 * The gate for a hello (proofs.ts): verified, addressed to me, fresh. Any key may say hello (it
 * carries no content and asks for none); an answer counts only for an ask of this lifetime.
 */
export function gateHello(
  trust: TrustState,
  envelope: HelloEnvelope,
  self: TaskEndpoint,
  now: number,
): Extract<Signer, { verified: true }> {
  const block = envelope.payload.signature;
  if (!verifyPayload(envelope.payload, block)) throw rejection("SIGNATURE_INVALID", { kind: "hello", key: block.key });
  const facts = factsOf(envelope.payload, block);
  if (!sameEndpoint(facts.to, self) || !sameEndpoint(facts.from, envelope.source)) {
    throw rejection("NOT_ADDRESSED", { signedTo: facts.to, signedFrom: facts.from, source: envelope.source });
  }
  checkFresh(facts, now);
  // Who it is does not matter to a hello (nor to answering one): no peer lookup.
  const own = block.key === trust.options.identity.publicKey;
  return {
    verified: true,
    key: block.key,
    fingerprint: fingerprintOf(block.key),
    self: own,
    ...(block.name === undefined ? {} : { claimedName: block.name }),
  };
}

/** Counts a rejection by its code (shown by the footer, `/tasks` and the status tool). */
export function countRejection(trust: TrustState, code: string): void {
  trust.rejections.set(code, (trust.rejections.get(code) ?? 0) + 1);
}

/** The other party of a task, as this endpoint knows its key. */
export function peerOfTask(store: CoreStore, trust: TrustState, taskId: string, role: "origin" | "worker"): Signer | undefined {
  const meta = store.getTaskMeta(taskId);
  if (meta === undefined) return undefined;
  const key = role === "worker" ? meta.originKey : meta.workerKey;
  // The session name the peer's verified mail or proof claimed (a claim, shown as one).
  if (key !== undefined) return describeKey(trust, key, meta.peerSession);
  return meta.unverified === true ? { verified: false } : undefined;
}
