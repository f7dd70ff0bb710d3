/**
 * Sign and verify cost per event, in-process, on realistic payloads built by the core's own
 * builders: an assignment carrying a 1 KiB task text and a small intent (a delivery receipt).
 *
 * Per event (fresh ids each time), timed one call at a time:
 * - sign: `signPayload` with the payload's canonical text, exactly the call `encodePayload` makes
 *   with a signer (digest of the canonical payload, the signed bytes, Ed25519, base64url);
 * - verify: `verifyPayload` on the payload parsed from the signed text, as the trust gate calls it
 *   (digest of the canonical payload, the signed bytes, Ed25519 verify; the key already parsed, as
 *   after a peer's first event);
 * - `encodePayload` with and without a signer (what the sender sees end to end, the signature
 *   block's serialization included), in alternating order;
 * - the parts, for the profile: the payload digest, Ed25519 sign alone, Ed25519 verify alone.
 *
 * The canonical text of the inner payload and the receiver's `JSON.parse` are not counted: a
 * sender and a receiver do both whether or not mail is signed.
 */
import { canonicalJson, utf8Bytes } from "../../src/protocol/canonical-json.ts";
import { KiB } from "../../src/protocol/limits.ts";
import type { SignatureBlock, TaskEndpoint, TaskWirePayload } from "../../src/protocol/schemas.ts";
import { encodePayload } from "../../src/core/envelopes.ts";
import { generateIdentity, verifySignature } from "../../src/trust/keys.ts";
import { factsOf, payloadDigest, signedBytes, signPayload, type SignablePayload, verifyPayload } from "../../src/trust/signing.ts";
import { now, roundSummary, type Summary, summarize } from "../lib/stats.ts";
import { assignmentPayload, receiptIntentPayload, type TaskPayload } from "../lib/task-payloads.ts";
import { filler } from "../lib/wire.ts";

/** Timed events per payload kind, after the warm-up. */
const SAMPLES = 3_000;
const QUICK_SAMPLES = 50;
/** Untimed events per payload kind first (JIT, key cache). */
const WARMUP = 500;
const QUICK_WARMUP = 20;
/** Task text of the assignment. */
const TEXT_CHARS = KiB;
const MICROS_PER_MS = 1_000;
/** Rounding of the reported microseconds (0.1 µs). */
const MICRO_DIGITS = 1;

/** Per-event costs of one payload kind, in µs. */
export interface SigningCost {
  readonly kind: string;
  /** Canonical payload bytes without and with the signature block. */
  readonly payloadBytes: { readonly unsigned: number; readonly signed: number };
  readonly signUs: Summary;
  readonly verifyUs: Summary;
  /** Sign + verify of the same event. */
  readonly signVerifyUs: Summary;
  readonly encodeUnsignedUs: Summary;
  readonly encodeSignedUs: Summary;
  readonly digestUs: Summary;
  readonly ed25519SignUs: Summary;
  readonly ed25519VerifyUs: Summary;
  /** Signed payloads that did not verify (must be 0). */
  readonly verifyFailures: number;
}

export interface SigningResult {
  readonly samples: number;
  readonly warmup: number;
  readonly textChars: number;
  readonly assignment: SigningCost;
  readonly intent: SigningCost;
}

type Builder = (from: TaskEndpoint, to: TaskEndpoint, atMs: number) => TaskPayload;

const micros = (startedMs: number) => (now() - startedMs) * MICROS_PER_MS;

/** Who signs an event, and between which endpoints. */
interface Signer {
  readonly identity: ReturnType<typeof generateIdentity>["identity"];
  readonly from: TaskEndpoint;
  readonly to: TaskEndpoint;
}

/** One event's timings (µs), its verify failures (0–2) and its encoded texts. */
interface EventSample {
  readonly sign: number;
  readonly verify: number;
  readonly encodeUnsigned: number;
  readonly encodeSigned: number;
  readonly digest: number;
  readonly edSign: number;
  readonly edVerify: number;
  readonly failures: number;
  readonly unsignedText: string;
  readonly signedText: string;
}

/** `encodePayload` without and with a signer, in the order `signedFirst` says, each timed alone. */
function timeEncodes(wire: TaskPayload, signing: Parameters<typeof encodePayload>[3], signedFirst: boolean) {
  const inner = wire.payload as TaskWirePayload["payload"];
  const out = { encodeUnsigned: 0, encodeSigned: 0, unsignedText: "", signedText: "" };
  const encodeOnce = (signed: boolean) => {
    const started = now();
    if (signed) {
      out.signedText = encodePayload(wire.taskId, wire.kind, inner, signing);
      out.encodeSigned = micros(started);
    } else {
      out.unsignedText = encodePayload(wire.taskId, wire.kind, inner);
      out.encodeUnsigned = micros(started);
    }
  };
  encodeOnce(signedFirst);
  encodeOnce(!signedFirst);
  return out;
}

/** Builds a fresh event and times its sign, encodes, verify, and the parts: digest, Ed25519 sign, Ed25519 verify. */
function sampleEvent(build: Builder, signer: Signer, index: number): EventSample {
  const { identity, from, to } = signer;
  const atMs = Date.now();
  const wire = build(from, to, atMs);
  const innerText = canonicalJson(wire.payload as TaskWirePayload["payload"]);
  let failures = 0;
  let at = now();
  const block = signPayload(wire, { identity, from, to, atMs }, innerText);
  const sign = micros(at);
  const encodes = timeEncodes(wire, { signer: { identity }, from, to, atMs }, index % 2 === 0);
  const parsed = JSON.parse(encodes.signedText) as SignablePayload & { signature: SignatureBlock };
  at = now();
  const verified = verifyPayload(parsed, parsed.signature);
  const verify = micros(at);
  if (!verified) failures += 1;
  at = now();
  const digest = payloadDigest(parsed);
  const digestUs = micros(at);
  const bytes = signedBytes(factsOf(parsed, block), digest);
  at = now();
  const signature = identity.sign(bytes);
  const edSign = micros(at);
  at = now();
  if (!verifySignature(identity.publicKey, bytes, signature)) failures += 1;
  const edVerify = micros(at);
  return { sign, verify, ...encodes, digest: digestUs, edSign, edVerify, failures };
}

const TIMINGS = ["sign", "verify", "signVerify", "encodeUnsigned", "encodeSigned", "digest", "edSign", "edVerify"] as const;

function measureKind(kind: string, build: Builder, samples: number, warmup: number): SigningCost {
  const signer: Signer = {
    identity: generateIdentity().identity,
    from: { relay: "bench-relay", id: crypto.randomUUID() },
    to: { relay: "bench-relay", id: crypto.randomUUID() },
  };
  const series = Object.fromEntries(TIMINGS.map((name) => [name, [] as number[]])) as Record<(typeof TIMINGS)[number], number[]>;
  let payloadBytes = { unsigned: 0, signed: 0 };
  let verifyFailures = 0;
  for (let index = 0; index < warmup + samples; index += 1) {
    const event = sampleEvent(build, signer, index);
    verifyFailures += event.failures;
    if (index < warmup) continue;
    for (const name of TIMINGS) series[name].push(name === "signVerify" ? event.sign + event.verify : event[name]);
    payloadBytes = { unsigned: utf8Bytes(event.unsignedText), signed: utf8Bytes(event.signedText) };
  }
  const summary = (values: number[]) => roundSummary(summarize(values), MICRO_DIGITS);
  return {
    kind,
    payloadBytes,
    signUs: summary(series.sign),
    verifyUs: summary(series.verify),
    signVerifyUs: summary(series.signVerify),
    encodeUnsignedUs: summary(series.encodeUnsigned),
    encodeSignedUs: summary(series.encodeSigned),
    digestUs: summary(series.digest),
    ed25519SignUs: summary(series.edSign),
    ed25519VerifyUs: summary(series.edVerify),
    verifyFailures,
  };
}

export async function measureSigning(options: { quick?: boolean } = {}): Promise<SigningResult> {
  const quick = options.quick === true;
  const samples = quick ? QUICK_SAMPLES : SAMPLES;
  const warmup = quick ? QUICK_WARMUP : WARMUP;
  const text = filler(TEXT_CHARS);
  const assignment = measureKind("assignment", (from, to, atMs) => assignmentPayload(from, to, text, atMs), samples, warmup);
  const intent = measureKind("intent", () => receiptIntentPayload(crypto.randomUUID(), crypto.randomUUID()), samples, warmup);
  return { samples, warmup, textChars: TEXT_CHARS, assignment, intent };
}
