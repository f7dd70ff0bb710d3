/**
 * Signed task events. Every envelope payload a session sends (`{taskId, kind, payload}`) carries a
 * `signature` block next to it; the relay wire is unchanged (the payload is opaque to the relay).
 *
 * The signature covers, domain-separated and length-prefixed:
 *
 *   "pi-tasks-v1" NUL ‖ signer key ‖ sender endpoint (relay, id) ‖ recipient endpoint (relay, id)
 *   ‖ task id ‖ kind ‖ event id ‖ event type ‖ signed time ‖ inReplyTo ‖ supersedes ‖ generation
 *   ‖ lineage ‖ SHA-256 of the canonical JSON of `{taskId, kind, payload}`
 *
 * Each field is a 4-byte big-endian length and its UTF-8 bytes (the digest: its 32 bytes). The
 * digest covers the whole payload, so every field that decides what the receiver does is signed;
 * the listed fields are the ones the trust gate reads. The claimed `name` is not signed: it is
 * untrusted metadata, shown only as a claim. Fields a later protocol adds (supersedes, generation,
 * lineage) are signed as empty strings until then.
 */
import { createHash } from "node:crypto";
import { CanonicalText, canonicalJson } from "../protocol/canonical-json.ts";
import { SIGNATURE_DOMAIN } from "../protocol/names.ts";
import type { EnvelopeKind, SignatureBlock, TaskEndpoint } from "../protocol/schemas.ts";
import { type Identity, verifySignature } from "./keys.ts";

export const SIGNATURE_VERSION = 1 as const;

/** What a signature is over: a task payload of a kind, or a content-free hello (proofs.ts). */
export type SignedKind = EnvelopeKind | "hello";

/** The parts of a wire payload a signature covers, before the signature is added. */
export interface SignablePayload {
  readonly taskId: string;
  readonly kind: SignedKind;
  readonly payload: unknown;
}

/** What the trust gate reads from a verified payload. */
export interface SignedFacts {
  readonly key: string;
  readonly from: TaskEndpoint;
  readonly to: TaskEndpoint;
  readonly taskId: string;
  readonly kind: SignedKind;
  /** The event id (assignment, canonical event), intent id or hello id the payload carries. */
  readonly id: string;
  readonly type: string;
  /** Signed time (ISO). */
  readonly at: string;
  readonly inReplyTo: string;
  readonly supersedes: string;
  readonly generation: string;
  readonly lineage: string;
}

const encoder = new TextEncoder();
const DOMAIN = encoder.encode(`${SIGNATURE_DOMAIN}\u0000`);

function record(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

/** The id, type and reply reference a payload of each kind carries. */
function payloadFacts(wire: SignablePayload): { id: string; type: string; inReplyTo: string } {
  const inner = record(wire.payload);
  if (wire.kind === "hello") return { id: text(inner.helloId), type: "hello", inReplyTo: text(inner.inReplyTo) };
  const event = wire.kind === "assignment" ? record(inner.event) : inner;
  const id = wire.kind === "intent" ? text(inner.intentId) : text(event.eventId);
  return { id, type: text(event.type), inReplyTo: text(record(event.payload).inReplyTo) };
}

/** The generation an assignment (its task record) or an intent carries, as decimal text. */
function generationText(wire: SignablePayload): string {
  const inner = record(wire.payload);
  const generation = wire.kind === "assignment" ? record(inner.task).generation : wire.kind === "intent" ? inner.generation : undefined;
  return typeof generation === "number" ? String(generation) : "";
}

/** An assignment's lineage as canonical JSON (other kinds carry none). */
function lineageText(wire: SignablePayload): string {
  if (wire.kind !== "assignment") return "";
  const lineage = record(record(wire.payload).task).lineage;
  return lineage === undefined ? "" : canonicalJson(lineage);
}

/** SHA-256 of the canonical JSON of `{taskId, kind, payload}` (an already canonical payload text is embedded as is). */
export function payloadDigest(wire: SignablePayload): Uint8Array {
  return createHash("sha256")
    .update(canonicalJson({ taskId: wire.taskId, kind: wire.kind, payload: wire.payload }))
    .digest();
}

function lengthPrefixed(parts: readonly Uint8Array[]): Uint8Array {
  const total = DOMAIN.length + parts.reduce((sum, part) => sum + 4 + part.length, 0);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  out.set(DOMAIN, 0);
  let offset = DOMAIN.length;
  for (const part of parts) {
    view.setUint32(offset, part.length);
    out.set(part, offset + 4);
    offset += 4 + part.length;
  }
  return out;
}

/** The exact bytes a signature is made over. */
export function signedBytes(facts: SignedFacts, digest: Uint8Array): Uint8Array {
  const fields = [
    facts.key,
    facts.from.relay,
    facts.from.id,
    facts.to.relay,
    facts.to.id,
    facts.taskId,
    facts.kind,
    facts.id,
    facts.type,
    facts.at,
    facts.inReplyTo,
    facts.supersedes,
    facts.generation,
    facts.lineage,
  ];
  return lengthPrefixed([...fields.map((field) => encoder.encode(field)), digest]);
}

/** The facts a signature block states about a payload (whether or not it verifies). */
export function factsOf(wire: SignablePayload, block: SignatureBlock): SignedFacts {
  return {
    key: block.key,
    from: { relay: block.from.relay, id: block.from.id },
    to: { relay: block.to.relay, id: block.to.id },
    taskId: wire.taskId,
    kind: wire.kind,
    ...payloadFacts(wire),
    at: block.at,
    supersedes: "",
    generation: generationText(wire),
    lineage: lineageText(wire),
  };
}

export interface SignOptions {
  readonly identity: Identity;
  readonly from: TaskEndpoint;
  readonly to: TaskEndpoint;
  /** Signed time, ms since the epoch. */
  readonly atMs: number;
  /** A claimed name for the receiver's human (unsigned, untrusted). */
  readonly name?: string;
}

/** Signs a payload; `payloadText` is the canonical JSON of `wire.payload` when the caller has it. */
export function signPayload(wire: SignablePayload, options: SignOptions, payloadText?: string): SignatureBlock {
  const digestInput = payloadText === undefined ? wire : { ...wire, payload: new CanonicalText(payloadText) };
  const unsigned = {
    v: SIGNATURE_VERSION,
    key: options.identity.publicKey,
    at: new Date(options.atMs).toISOString(),
    from: { relay: options.from.relay, id: options.from.id },
    to: { relay: options.to.relay, id: options.to.id },
  };
  const facts = factsOf(wire, { ...unsigned, sig: "" });
  const sig = Buffer.from(options.identity.sign(signedBytes(facts, payloadDigest(digestInput)))).toString("base64url");
  return { ...unsigned, sig, ...(options.name === undefined ? {} : { name: options.name }) };
}

/**
 * The digest of a payload parsed from canonical JSON, computed with the native `JSON.stringify`:
 * parsing keeps the sorted key order, so this is the canonical text — except where JavaScript
 * reorders keys (integer-like keys come first) or writes numbers differently. Then the digest
 * differs and `verifyPayload` falls back to the canonical encoding.
 */
function parsedDigest(wire: SignablePayload): Uint8Array {
  const text = `{"kind":${JSON.stringify(wire.kind)},"payload":${JSON.stringify(wire.payload)},"taskId":${JSON.stringify(wire.taskId)}}`;
  return createHash("sha256").update(text).digest();
}

/** Whether a signature block is its key's signature of this payload. */
export function verifyPayload(wire: SignablePayload, block: SignatureBlock): boolean {
  const signature = Buffer.from(block.sig, "base64url");
  // One text per signature: a non-canonical encoding (other unused low bits) does not verify.
  if (signature.toString("base64url") !== block.sig) return false;
  const facts = factsOf(wire, block);
  if (verifySignature(block.key, signedBytes(facts, parsedDigest(wire)), signature)) return true;
  // The canonical encoding decides; it is only needed when the fast text differs from it.
  return verifySignature(block.key, signedBytes(facts, payloadDigest(wire)), signature);
}
