/**
 * Builders of immutable protocol values: events, intents and relay envelopes. Every id is a random
 * UUID; `createdAt` is fixed at creation. An envelope is encoded once, as canonical JSON: that text
 * is stored and sent byte for byte on every attempt (no re-serialization per retry).
 */
import { CanonicalText, canonicalJson, utf8Bytes } from "../protocol/canonical-json.ts";
import { TaskError } from "../protocol/errors.ts";
import { maxRelayPayloadBytes, sealHeaderReserveBytes, sealTagBytes, signatureReserveBytes } from "../protocol/limits.ts";
import { WIRE_PROTOCOL_VERSION } from "../protocol/names.ts";
import type { EncodedEnvelope } from "../protocol/wire.ts";
import type { Identity } from "../trust/keys.ts";
import { signPayload } from "../trust/signing.ts";
import { open, type SealedBox, seal } from "../trust/sealing.ts";
import { assertValid } from "../protocol/validate.ts";
import {
  type EnvelopeKind,
  type ReceiverIntentType,
  SealedContent,
  type ResumeList,
  type SealedWirePayload,
  type SignatureBlock,
  type TaskEndpoint,
  type TaskEvent,
  type TaskEventType,
  type TaskIntent,
  type TaskRecord,
  type TaskWirePayload,
} from "../protocol/schemas.ts";

export function newId(): string {
  return crypto.randomUUID();
}

/** An ISO timestamp that round-trips exactly through `toISOString`. */
export function isoAt(ms: number): string {
  return new Date(ms).toISOString();
}

export function makeEvent(
  task: TaskRecord,
  type: TaskEventType,
  sequence: string,
  occurredAt: number,
  payload: Record<string, unknown>,
): TaskEvent {
  return { eventId: newId(), taskId: task.taskId, type, sequence, source: task.origin, target: task.target, occurredAt, payload };
}

/** A worker's intent; `generation` is the generation of the assignment it answers (absent: 1). */
export function makeIntent(taskId: string, type: ReceiverIntentType, payload: Record<string, unknown>, generation?: number): TaskIntent {
  return { intentId: newId(), taskId, type, payload, ...(generation === undefined ? {} : { generation }) };
}

/** Who signs what a core sends: its identity, and the name it claims (unsigned). */
export interface EnvelopeSigner {
  readonly identity: Identity;
  readonly claimedName?: string;
}

/**
 * How an envelope's content travels: sealed to the recipient's seal key (every task event between
 * two signing parties), or in the clear — only toward a legacy peer that signs nothing
 * (`PI_TASKS_TRUST=unsigned`), and in tests that forge mail.
 */
export type Carriage = { readonly sealTo: string } | "clear";

interface Signing {
  readonly signer: EnvelopeSigner;
  readonly from: TaskEndpoint;
  readonly to: TaskEndpoint;
  readonly atMs: number;
}

function sizeChecked(text: string, taskId: string, kind: string): string {
  const bytes = utf8Bytes(text);
  if (bytes > maxRelayPayloadBytes)
    throw new TaskError("PAYLOAD_TOO_LARGE", { details: { taskId, kind, bytes, maxBytes: maxRelayPayloadBytes } });
  return text;
}

function signatureOf(taskId: string, kind: EnvelopeKind | "hello", inner: unknown, innerText: string, signing: Signing): SignatureBlock {
  const claimed = signing.signer.claimedName === undefined ? {} : { name: signing.signer.claimedName };
  return signPayload(
    { taskId, kind, payload: inner },
    { identity: signing.signer.identity, from: signing.from, to: signing.to, atMs: signing.atMs, ...claimed },
    innerText,
  );
}

/**
 * Canonical text of a task envelope's payload, size-checked against the payload bound. The inner
 * payload is serialized once: its text is signed (through its digest) and spliced into the result.
 * Sealed: `{taskId, kind, sealed}`, the box holding `{binding, payload, signature}`; in the clear:
 * `{taskId, kind, payload, signature?}`.
 */
export function encodePayload(
  taskId: string,
  kind: EnvelopeKind,
  inner: TaskWirePayload["payload"],
  signing?: Signing,
  carriage: Carriage = "clear",
): string {
  const innerText = canonicalJson(inner);
  const signature = signing === undefined ? undefined : signatureOf(taskId, kind, inner, innerText, signing);
  if (carriage === "clear")
    return sizeChecked(
      canonicalJson({ taskId, kind, payload: new CanonicalText(innerText), ...(signature === undefined ? {} : { signature }) }),
      taskId,
      kind,
    );
  if (signing === undefined || signature === undefined)
    throw new TaskError("SEAL_INVALID", { message: "only signed mail is sealed", details: { taskId, kind } });
  return sizeChecked(sealSigned(signing.signer.identity, carriage.sealTo, taskId, kind, innerText, signature), taskId, kind);
}

/**
 * The sealed payload text `{taskId, kind, sealed}` of signed content: the box, from `identity` (the
 * signer: its seal-key binding travels inside) to the seal key `sealTo`, holds
 * `{binding, payload, signature}`; `payloadText` is the inner payload's canonical text.
 *
 * Both texts are written directly, keys in canonical order: what `canonicalJson` would write (every
 * value but the signature block is a string or the version number), without its generic walk.
 */
export function sealSigned(
  identity: Identity,
  sealTo: string,
  taskId: string,
  kind: EnvelopeKind,
  payloadText: string,
  signature: SignatureBlock,
): string {
  if (identity.seal === undefined || identity.sealBinding === undefined) {
    throw new TaskError("SEAL_INVALID", { message: "only an identity with seal keys seals", details: { taskId, kind } });
  }
  const binding = JSON.stringify(identity.sealBinding());
  const content = `{"binding":${binding},"payload":${payloadText},"signature":${canonicalJson(signature)}}`;
  return sealedText(taskId, kind, seal(identity.seal(), sealTo, taskId, kind, content));
}

/** `canonicalJson({taskId, kind, sealed})`, written directly: keys in canonical order, string values and the version. */
function sealedText(taskId: string, kind: EnvelopeKind, sealed: SealedBox): string {
  const box = `"box":${JSON.stringify(sealed.box)},"from":${JSON.stringify(sealed.from)},"nonce":${JSON.stringify(sealed.nonce)}`;
  const members = `${box},"to":${JSON.stringify(sealed.to)},"v":${sealed.v}`;
  return `{"kind":${JSON.stringify(kind)},"sealed":{${members}},"taskId":${JSON.stringify(taskId)}}`;
}

function envelopeText(envelopeId: string, source: TaskEndpoint, target: TaskEndpoint, payload: string, createdAtMs: number): string {
  return canonicalJson({
    envelopeId,
    protocolVersion: WIRE_PROTOCOL_VERSION,
    source: { relay: source.relay, id: source.id },
    target: { relay: target.relay, id: target.id },
    payload: new CanonicalText(payload),
    createdAt: isoAt(createdAtMs),
  });
}

/**
 * Encodes an envelope once: its payload (signed by `signer`, at `createdAtMs`, and carried as
 * `carriage` says) is serialized once and spliced in. Without a signer the envelope is unsigned and
 * in the clear (only tests forge such mail).
 */
export function encodeEnvelope(
  source: TaskEndpoint,
  target: TaskEndpoint,
  taskId: string,
  kind: EnvelopeKind,
  inner: TaskWirePayload["payload"],
  createdAtMs: number,
  signer?: EnvelopeSigner,
  envelopeId: string = newId(),
  carriage: Carriage = "clear",
): EncodedEnvelope {
  const signing = signer === undefined ? undefined : { signer, from: source, to: target, atMs: createdAtMs };
  return { envelopeId, text: envelopeText(envelopeId, source, target, encodePayload(taskId, kind, inner, signing, carriage), createdAtMs) };
}

/** What a hello says besides its proof: the ask it answers, and a resume question or answer (resume.ts). */
export interface HelloExtra {
  readonly inReplyTo?: string;
  readonly resume?: ResumeList;
}

/** A hello (proofs.ts): a content-free, signed proof request, or the answer to one (`inReplyTo`). */
export function encodeHello(
  source: TaskEndpoint,
  target: TaskEndpoint,
  signer: EnvelopeSigner,
  atMs: number,
  extra: HelloExtra = {},
): { helloId: string; encoded: EncodedEnvelope } {
  const identity = signer.identity;
  if (identity.seal === undefined || identity.sealBinding === undefined)
    throw new TaskError("SEAL_INVALID", { message: "only an identity with seal keys says hello" });
  const helloId = newId();
  const inner = {
    helloId,
    ...(extra.inReplyTo === undefined ? {} : { inReplyTo: extra.inReplyTo }),
    seal: identity.seal().publicKey,
    binding: identity.sealBinding(),
    ...(extra.resume === undefined ? {} : { resume: extra.resume }),
  };
  const innerText = canonicalJson(inner);
  const signature = signatureOf(helloId, "hello", inner, innerText, { signer, from: source, to: target, atMs });
  const payload = canonicalJson({ taskId: helloId, kind: "hello", payload: new CanonicalText(innerText), signature });
  const envelopeId = newId();
  return { helloId, encoded: { envelopeId, text: envelopeText(envelopeId, source, target, payload, atMs) } };
}

/**
 * The content of a sealed payload, opened with `identity`'s seal keys (the recipient's, or the
 * sender's own): the task payload as the gate reads it, and the sender's seal key and binding.
 */
export function openPayload(identity: Identity, wire: SealedWirePayload): { payload: TaskWirePayload; sealKey: string; binding: string } {
  if (identity.seal === undefined) throw new TaskError("SEAL_INVALID", { message: "this identity cannot open sealed mail" });
  const text = open(identity.seal(), wire.sealed, wire.taskId, wire.kind);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new TaskError("SEAL_INVALID", { message: "the sealed content is not JSON" });
  }
  const content = assertValid(SealedContent, parsed, { code: "INVALID_DELIVERY", pathPrefix: "/payload/sealed" });
  const payload = { taskId: wire.taskId, kind: wire.kind, payload: content.payload, signature: content.signature } as TaskWirePayload;
  return { payload, sealKey: wire.sealed.from, binding: content.binding };
}

/**
 * The payload size of an assignment carrying `history` once signed and sealed (for the reassignment
 * fit): the content with room for its signature and binding, as base64url with the AES-GCM tag,
 * plus room for the sealed header (keys, nonce, field names).
 */
export function assignmentBytes(taskId: string, inner: Record<string, unknown>): number {
  const content = utf8Bytes(canonicalJson({ taskId, kind: "assignment", payload: inner })) + signatureReserveBytes;
  return Math.ceil(((content + sealTagBytes) * BASE64_CHARS_PER_GROUP) / BYTES_PER_BASE64_GROUP) + sealHeaderReserveBytes;
}

/** base64url: 4 characters per 3 bytes. */
const BASE64_CHARS_PER_GROUP = 4;
const BYTES_PER_BASE64_GROUP = 3;
