/**
 * Proofs of endpoints: task content goes only to an endpoint that proved, with a signature of the
 * key the task expects, that it is that peer — never to whoever holds a name or an endpoint id.
 *
 * - A **hello** is content-free: `{helloId, seal key, binding}`, signed, unsealed. Asking one of
 *   an endpoint is "which key holds you?"; the answer (`inReplyTo` the ask) is a signature made for
 *   this ask, by the key at that endpoint (its signature names the endpoint it comes from): a fresh
 *   proof. Verified task mail from an endpoint proves it too (its signature names its source).
 * - What a task expects (`expectation`): at the origin, the worker's bound key; after a reassignment
 *   to its lost worker's successor, that lost worker's key; else — a first assignment, a
 *   reassignment to a named endpoint — a key this identity trusts (its own, or a paired peer's),
 *   which the assignment then binds. At the worker, the origin's bound key.
 * - An envelope whose target has not proven what its task expects waits in the outbox unsealed and
 *   unsent (`awaiting`); a proof releases it — sealed to the proven key's seal key — or, when the
 *   key is one this identity does not trust, asks the human (pairing) or fails the task without its
 *   content ever leaving (`UNKNOWN_PEER`, no effect).
 *
 * The book of proofs (proof-book.ts: its shape and the empty book) is this lifetime's (a relay
 * restart's new endpoints need new proofs); only this file changes it. Hellos
 * go straight to the relay, outside the outbox's per-target order (a hello must pass the content
 * waiting for it), at most `maxHellosPerPass` asked and answered per pass, each endpoint asked at
 * most every `helloRetryMs`.
 */
import { endpointKey, sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { helloRetryMs, maxHellosPerPass, maxPendingHellos, maxProvenEndpoints } from "../protocol/limits.ts";
import type { HelloEnvelope, ResumeList, TaskEndpoint, TaskEnvelope } from "../protocol/schemas.ts";
import { fingerprintOf, verifySignature } from "../trust/keys.ts";
import { sealBindingBytes } from "../trust/sealing.ts";
import { appendCanonical } from "./canonical.ts";
import { type CoreContext, isClosed, me, rethrowRelayLoss } from "./context.ts";
import { type Carriage, encodeEnvelope, encodeHello, type HelloExtra } from "./envelopes.ts";
import type { Proof } from "./proof-book.ts";
import type { WorkScope } from "./scope.ts";
import { describeKey, type Signer } from "./trust.ts";

function remember<K, V>(map: Map<K, V>, key: K, value: V, maxEntries: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > maxEntries) map.delete(map.keys().next().value!);
}

/** Believes `sealKey` is `key`'s once `key` signed the binding (SIGNATURE_INVALID otherwise). */
export function learnSealKey(context: CoreContext, key: string, sealKey: string, binding: string): void {
  const book = context.proofs;
  if (book.sealKeys.get(key) === sealKey) return;
  if (!verifySignature(key, sealBindingBytes(sealKey), Buffer.from(binding, "base64url"))) {
    throw new TaskError("SIGNATURE_INVALID", { message: "the seal key is not bound to the signer's key", details: { key } });
  }
  remember(book.sealKeys, key, sealKey, maxProvenEndpoints);
}

/** Records that `endpoint` is held by `key` (its seal key known), and the session name it claimed. */
export function recordProof(context: CoreContext, endpoint: TaskEndpoint, key: string, session?: string): void {
  const sealKey = context.proofs.sealKeys.get(key);
  if (sealKey !== undefined)
    remember(
      context.proofs.proven,
      endpointKey(endpoint),
      { key, sealKey, ...(session === undefined ? {} : { session }) },
      maxProvenEndpoints,
    );
}

export function provenAt(context: CoreContext, endpoint: TaskEndpoint): Proof | undefined {
  return context.proofs.proven.get(endpointKey(endpoint));
}

/** The seal key of a signing key, once known. */
export function sealKeyOf(context: CoreContext, key: string): string | undefined {
  return context.proofs.sealKeys.get(key);
}

/** What the task expects of its peer's key: a bound (or remembered) key, or any key this identity trusts. */
export function expectation(context: CoreContext, taskId: string): { readonly key: string } | "trusted" | "legacy" {
  const stored = context.store.getStoredTask(taskId);
  const meta = context.store.getTaskMeta(taskId);
  if (meta?.unverified === true) return "legacy";
  const key = stored?.role === "worker" ? meta?.originKey : (meta?.workerKey ?? meta?.expectedWorkerKey);
  return key === undefined ? "trusted" : { key };
}

function trusted(context: CoreContext, key: string): boolean {
  const signer = describeKey(context.trust, key);
  return signer.self || signer.peerName !== undefined;
}

/**
 * How an envelope of `taskId` to `to` may travel now: sealed to the proven key (binding the worker's
 * key at the origin on the way), in the clear to a legacy peer, or not yet (`awaiting`).
 */
export function carriageFor(context: CoreContext, taskId: string, to: TaskEndpoint): Carriage | "awaiting" {
  // A resumed task's worker hears nothing of it before it confirmed it still holds it (resume.ts).
  if (context.store.getTaskMeta(taskId)?.resuming === true) return "awaiting";
  const expected = expectation(context, taskId);
  if (expected === "legacy") return "clear";
  const proof = provenAt(context, to);
  if (proof === undefined) return "awaiting";
  if (expected === "trusted" ? !trusted(context, proof.key) : proof.key !== expected.key) return "awaiting";
  bindWorker(context, taskId, proof);
  return { sealTo: proof.sealKey };
}

/**
 * At the origin, the first sealed envelope to a proven worker binds its key (its intents must carry
 * it) and remembers the session name it claimed (to look it up again after a relay restart).
 */
function bindWorker(context: CoreContext, taskId: string, proof: Proof): void {
  const { store } = context;
  if (store.getStoredTask(taskId)?.role !== "origin") return;
  const meta = store.getTaskMeta(taskId) ?? {};
  if (meta.workerKey !== undefined) return;
  const { expectedWorkerKey: _met, ...rest } = meta;
  store.setTaskMeta(taskId, { ...rest, workerKey: proof.key, ...(proof.session === undefined ? {} : { peerSession: proof.session }) });
}

// ---------------------------------------------------------------------------------------------
// asking and answering
// ---------------------------------------------------------------------------------------------

/** Sends one hello straight to the relay; failures are reported, never thrown (a later ask retries). */
async function sendHello(context: CoreContext, scope: WorkScope, to: TaskEndpoint, extra: HelloExtra = {}): Promise<string | undefined> {
  const { helloId, encoded } = encodeHello(me(context), to, context.trust.options, context.clock(), extra);
  try {
    await context.session.send(encoded, scope.signal);
    return helloId;
  } catch (raw) {
    rethrowRelayLoss(raw);
    const error = toTaskError(raw);
    if (!isClosed(context)) scope.fail("send", error.withDetails({ hello: true, target: to }));
    if (error.code === "TARGET_NOT_REGISTERED") throw error;
    return undefined;
  }
}

/**
 * Asks `to` to prove which key holds it (and, for a resumed origin, whether it still holds
 * `resume`'s tasks), unless it was asked within `helloRetryMs`. Resolves with the ask's id
 * (undefined when not asked now); a target the relay does not know is thrown
 * (`TARGET_NOT_REGISTERED`): nothing can reach it.
 */
export async function askProof(context: CoreContext, scope: WorkScope, to: TaskEndpoint, resume?: ResumeList): Promise<string | undefined> {
  const book = context.proofs;
  const key = endpointKey(to);
  const last = book.lastAsked.get(key);
  if (last !== undefined && context.timers.now() - last < helloRetryMs) return undefined;
  remember(book.lastAsked, key, context.timers.now(), maxProvenEndpoints);
  const helloId = await sendHello(context, scope, to, resume === undefined ? {} : { resume });
  if (helloId !== undefined) remember(book.asked, helloId, to, maxPendingHellos);
  return helloId;
}

/**
 * Intake of a hello (it passed the gate): an ask is owed an answer (with `answer()`'s resume answer,
 * worked out once the ask proved its source); an answer to our ask is a proof.
 */
export function takeHello(
  context: CoreContext,
  envelope: HelloEnvelope,
  signer: Extract<Signer, { verified: true }>,
  answer: () => ResumeList | undefined = () => undefined,
): TaskEndpoint | undefined {
  const book = context.proofs;
  const hello = envelope.payload.payload;
  learnSealKey(context, signer.key, hello.seal, hello.binding);
  if (hello.inReplyTo === undefined) {
    // An ask is signed by the key at its source, for us, now: a proof of that endpoint too.
    recordProof(context, envelope.source, signer.key, signer.claimedName);
    if (book.owed.length >= maxHellosPerPass) return envelope.source;
    const resume = answer();
    book.owed.push({ to: envelope.source, inReplyTo: hello.helloId, ...(resume === undefined ? {} : { resume }) });
    return envelope.source;
  }
  const asked = book.asked.get(hello.inReplyTo);
  // Only an answer to an ask of ours, from the endpoint asked, proves anything. The ask stays open
  // (bounded by maxPendingHellos): an answer under a key the task does not expect (a relay's own)
  // must not use it up before the real peer's answer arrives.
  if (asked === undefined || !sameEndpoint(asked, envelope.source)) return undefined;
  recordProof(context, envelope.source, signer.key, signer.claimedName);
  return envelope.source;
}

/** Verified task mail proves its source endpoint holds its signer's key (sealed mail carried the seal key). */
export function takeProvenMail(context: CoreContext, envelope: TaskEnvelope, signer: Signer): void {
  if (signer.verified) recordProof(context, envelope.source, signer.key, signer.claimedName);
}

/** The shipping phase's hellos: the answers owed, then asks for every target whose content awaits a proof. */
export async function sayHellos(context: CoreContext, scope: WorkScope): Promise<void> {
  const book = context.proofs;
  for (const { to, inReplyTo, resume } of book.owed.splice(0)) {
    if (isClosed(context)) return;
    await sendHello(context, scope, to, { inReplyTo, ...(resume === undefined ? {} : { resume }) }).catch(() => undefined);
  }
  let asked = 0;
  for (const target of awaitingTargets(context)) {
    if (asked >= maxHellosPerPass || scope.expired() || isClosed(context)) break;
    const helloId = await askProof(context, scope, target).catch((raw: unknown) => {
      loseAwaiting(context, target, toTaskError(raw));
      return undefined;
    });
    if (helloId !== undefined) asked += 1;
  }
}

/**
 * Whether what a task sends to its target is asked for here: not a resumed task's (its resume
 * question asks, resume.ts), nor one that looks for its peer after a relay restart (its old
 * endpoint is gone with the old relay; the peer found again is asked by reconnect.ts).
 */
function askedHere(context: CoreContext, taskId: string): boolean {
  const meta = context.store.getTaskMeta(taskId);
  return meta?.resuming !== true && meta?.reconnectingSince === undefined;
}

function awaitingTargets(context: CoreContext): TaskEndpoint[] {
  const targets = new Map<string, TaskEndpoint>();
  for (const entry of context.store.retryHeads()) {
    if (entry.awaiting === true && askedHere(context, entry.taskId)) targets.set(entry.targetKey, entry.target);
  }
  return [...targets.values()];
}

/**
 * The relay does not know `target` (its hello was refused `TARGET_NOT_REGISTERED`): what awaits its
 * proof can never leave. It is quarantined, as a send refused for that reason is — reported once (by
 * the pass that asked), shown on its task, and never asked for again — instead of a hello refused
 * every `helloRetryMs`, each refusal a pass failure on the footer, for as long as the task lives.
 */
function loseAwaiting(context: CoreContext, target: TaskEndpoint, error: TaskError): void {
  if (error.code !== "TARGET_NOT_REGISTERED" || isClosed(context)) return;
  const { store } = context;
  const details = { ...error.details, hello: true, target };
  store.transaction(() => {
    for (const entry of store.pendingOutboxFor(endpointKey(target))) {
      if (entry.awaiting !== true || !askedHere(context, entry.taskId)) continue;
      store.quarantineOutbox(entry.envelopeId, { errorCode: error.code, details, quarantinedAt: context.clock() });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// releasing what waited for a proof
// ---------------------------------------------------------------------------------------------

/**
 * A proof arrived for `endpoint`: every envelope awaiting it is sealed to the proven key (and
 * shipped by this pass) — or, where the task trusts only a known key and this one is unknown, the
 * human is asked (the envelope keeps waiting) or the task fails without its content ever leaving.
 */
export function releaseAwaiting(context: CoreContext, scope: WorkScope, endpoint: TaskEndpoint): void {
  const { store } = context;
  const proof = provenAt(context, endpoint);
  if (proof === undefined) return;
  for (const entry of store.pendingOutboxFor(endpointKey(endpoint))) {
    if (entry.awaiting !== true) continue;
    const carriage = carriageFor(context, entry.taskId, endpoint);
    if (carriage !== "awaiting") {
      seal(context, entry.envelopeId, carriage);
      scope.required.push(entry.envelopeId);
      continue;
    }
    if (expectation(context, entry.taskId) === "trusted") refuseUntrusted(context, entry.taskId, entry.envelopeId, endpoint, proof.key);
  }
}

/** Re-encodes an awaiting envelope (its clear, never-sent text) sealed, under the same id and time. */
function seal(context: CoreContext, envelopeId: string, carriage: Carriage): void {
  const { store } = context;
  const envelope = store.getEnvelope(envelopeId)!;
  const wire = envelope.payload as TaskEnvelope["payload"];
  const encoded = encodeEnvelope(
    envelope.source,
    envelope.target,
    wire.taskId,
    wire.kind,
    wire.payload,
    Date.parse(envelope.createdAt),
    context.trust.options,
    envelopeId,
    carriage,
  );
  store.reencodeOutbox(envelopeId, envelope.target, encoded.text);
}

/** What the human says of a worker key this identity does not trust (a pairing request; default: refuse). */
export function untrustedDecision(context: CoreContext, taskId: string, endpoint: TaskEndpoint, key: string): "refuse" | "pending" {
  return context.trust.options.decideUnknown?.({ key, fingerprint: fingerprintOf(key), taskId, kind: "hello", from: endpoint }) ?? "refuse";
}

/** A first assignment's target holds a key this identity does not trust: ask the human, or fail the task (its content never left). */
function refuseUntrusted(context: CoreContext, taskId: string, envelopeId: string, endpoint: TaskEndpoint, key: string): void {
  const { store } = context;
  if (untrustedDecision(context, taskId, endpoint, key) === "pending") return;
  const stored = store.getStoredTask(taskId);
  store.transaction(() => {
    store.discardUnsentOperation(envelopeId);
    if (stored === undefined || stored.record.status !== "active") return;
    const error = {
      code: "UNKNOWN_PEER",
      message: `the worker at this endpoint is signed by key ${fingerprintOf(key)}, which this identity has not paired with; nothing was sent to it`,
      retryable: false,
    };
    store.enqueueLocalPresentation(
      appendCanonical(
        store,
        stored.record,
        "task.failed",
        { summary: "not sent: the worker's key is not paired", noEffect: true, error },
        context.clock(),
      ),
    );
  });
}
