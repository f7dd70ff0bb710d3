/**
 * Envelope cycles with more work per envelope, as a ratio to the same workload without it: the
 * cycles workload of bench/measure/cycles.ts with the real client (`VolatileTaskSession`), each sender
 * preparing each envelope before its send and the receiver checking each received payload before
 * its ACK — both inside the timed loop. Two comparisons, one method (`compareCycles`):
 *
 * - signed ÷ unsigned: each sender signs each envelope's payload (`signPayload`, its own Ed25519
 *   identity, the signed time taken per envelope) and the receiver verifies each received payload
 *   (`verifyPayload`, as the trust gate does). In both variants each sender first computes the
 *   canonical text of the payload, as a core's `encodePayload` does signed or not; the signed
 *   variant hands it to `signPayload` (as `encodePayload` does), so the ratio charges signing only
 *   with what signing adds.
 * - sealed ÷ plain: plain is the signed variant above (signed mail in the clear, as before
 *   sealing); sealed signs the same way, then seals the signed payload to the receiver's seal key
 *   with the core's own `sealSigned` (what `encodePayload` does for sealed carriage), whose text is
 *   spliced into the envelope as the core splices it. The receiver opens each payload with the
 *   core's `openPayload`, checks the sender's seal-key binding on first sight of its key (cached
 *   afterwards, as `learnSealKey` does), then verifies the signature.
 *
 * Rounds: each round runs the base and the treated workload back to back, each on a fresh relay
 * after its own warm-up, the order alternating between rounds so drift and noise hit both alike.
 * The figure is the median of the per-round ratios (treated ÷ base cycles/s).
 */
import { CanonicalText, canonicalBytes, canonicalJson } from "../../src/protocol/canonical-json.ts";
import type { EnvelopeKind, SealedWirePayload, SignatureBlock, TaskEndpoint } from "../../src/protocol/schemas.ts";
import { openPayload, sealSigned } from "../../src/core/envelopes.ts";
import { generateIdentity, type Identity, verifySignature } from "../../src/trust/keys.ts";
import { sealBindingBytes } from "../../src/trust/sealing.ts";
import { type SignablePayload, signPayload, verifyPayload } from "../../src/trust/signing.ts";
import { type CycleHooks, type CycleRun, onFreshRelay, SENDERS, TEXT_CHARS } from "./cycles.ts";
import { envelopeWithText, filler } from "../lib/wire.ts";

/** Rounds of (base, treated); odd, so the median is one round's ratio. */
const ROUNDS = 3;
const QUICK_ROUNDS = 1;
/** Envelopes per run. */
const ENVELOPES = 2_000;
const QUICK_ENVELOPES = 40;
/** Envelopes of the warm-up run on each fresh relay (same kind as the measured run). */
const WARMUP_ENVELOPES = 400;
const QUICK_WARMUP_ENVELOPES = 10;
const RATIO_DIGITS = 1_000;

/** One value per variant of a comparison, named by the variants. */
export type PerVariant<B extends string, T extends string, V> = { readonly [K in B | T]: V };

/** One round: both runs, the treated ÷ base ratio of cycles/s, and which ran first. */
export type CycleComparisonRound<B extends string, T extends string> = PerVariant<B, T, CycleRun> & {
  readonly ratio: number;
  readonly first: B | T;
};

/** A comparison of a base and a treated variant of the cycles workload (fields named by the variants). */
export type CycleComparison<B extends string, T extends string> = {
  readonly rounds: readonly CycleComparisonRound<B, T>[];
  /** Median of the per-round ratios. */
  readonly ratio: number;
  /** Median CPU per cycle over the rounds, µs (bench process: all clients; relay process). */
  readonly clientCpuUsPerCycle: PerVariant<B, T, number>;
  readonly relayCpuUsPerCycle: PerVariant<B, T, number>;
  /** Canonical bytes of the workload's envelope in each variant. */
  readonly envelopeBytes: PerVariant<B, T, number>;
  readonly envelopesPerRun: number;
  /** Sums over every run of both variants (each must be 0). */
  readonly lost: number;
  readonly duplicates: number;
  /** Received payloads that did not open or verify. */
  readonly verifyFailures: number;
  /** Active items left on any relay after its run. */
  readonly relayActiveItemsAfter: number;
} & {
  /** Median cycles/s of each variant over the rounds. */
  readonly [K in `${B | T}CyclesPerSecond`]: number;
};

export type SignedCyclesRound = CycleComparisonRound<"unsigned", "signed">;
/** Signed ÷ unsigned. */
export type SignedCyclesResult = CycleComparison<"unsigned", "signed">;
export type SealedCyclesRound = CycleComparisonRound<"plain", "sealed">;
/** Sealed ÷ plain (both signed). */
export type SealedCyclesResult = CycleComparison<"plain", "sealed">;

type SignedWire = SignablePayload & { signature?: SignatureBlock };

/** The unsigned variant: the payload's canonical text, as `encodePayload` computes it unsigned too. */
const unsignedHooks: CycleHooks = {
  label: "unsigned",
  signed: false,
  sealed: false,
  prepare(envelope) {
    canonicalJson((envelope.payload as SignedWire).payload);
    return undefined;
  },
  check: () => true,
};

function senderIdentities(): Identity[] {
  return Array.from({ length: SENDERS }, () => generateIdentity().identity);
}

/** Signs `wire` from the envelope's source to its target with `identity`, given the payload's canonical text. */
function signEnvelope(envelope: Record<string, unknown>, wire: SignablePayload, identity: Identity, payloadText: string): SignatureBlock {
  return signPayload(
    wire,
    { identity, from: envelope.source as TaskEndpoint, to: envelope.target as TaskEndpoint, atMs: Date.now() },
    payloadText,
  );
}

/**
 * The signed variant (the plain one of the sealed comparison): each sender (its own identity) signs
 * and the signature travels beside the payload in the clear; the receiver verifies before the ACK.
 */
function signedHooks(label: string): CycleHooks {
  const identities = senderIdentities();
  return {
    label,
    signed: true,
    sealed: false,
    prepare(envelope, senderIndex) {
      const wire = envelope.payload as SignedWire;
      wire.signature = signEnvelope(envelope, wire, identities[senderIndex % identities.length]!, canonicalJson(wire.payload));
      return undefined;
    },
    check(payload) {
      const wire = payload as SignedWire;
      return wire.signature !== undefined && verifyPayload(wire, wire.signature);
    },
  };
}

/**
 * The sealed variant: each sender signs as the signed variant does, then seals the signed payload
 * to the receiver's seal key with the core's `sealSigned` and sends that text as the payload. The
 * receiver opens it (`openPayload`), checks the sender's binding of the box's seal key on first
 * sight of its key (then cached, as `learnSealKey` caches it), and verifies the signature.
 */
function sealedHooks(): CycleHooks {
  const identities = senderIdentities();
  const receiver = generateIdentity().identity;
  const receiverSealKey = receiver.seal!().publicKey;
  /** Signing key → the seal key its binding was checked for. */
  const sealKeys = new Map<string, string>();
  return {
    label: "sealed",
    signed: true,
    sealed: true,
    prepare(envelope, senderIndex) {
      const wire = envelope.payload as SignedWire;
      const identity = identities[senderIndex % identities.length]!;
      const payloadText = canonicalJson(wire.payload);
      const signature = signEnvelope(envelope, wire, identity, payloadText);
      return sealSigned(identity, receiverSealKey, wire.taskId, wire.kind as EnvelopeKind, payloadText, signature);
    },
    check(payload) {
      try {
        const { payload: opened, sealKey, binding } = openPayload(receiver, payload as SealedWirePayload);
        const block = opened.signature;
        if (block === undefined) return false;
        if (sealKeys.get(block.key) !== sealKey) {
          if (!verifySignature(block.key, sealBindingBytes(sealKey), Buffer.from(binding, "base64url"))) return false;
          sealKeys.set(block.key, sealKey);
        }
        return verifyPayload(opened, block);
      } catch {
        return false;
      }
    },
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** Canonical bytes of one workload envelope as `hooks` prepares it (its returned payload text spliced in). */
function envelopeSize(sample: Record<string, unknown>, hooks: CycleHooks): number {
  const envelope = structuredClone(sample);
  const payloadText = hooks.prepare(envelope, 0);
  return canonicalBytes(payloadText === undefined ? envelope : { ...envelope, payload: new CanonicalText(payloadText) });
}

interface Variant<N extends string> {
  readonly name: N;
  readonly hooks: CycleHooks;
}

/**
 * Rounds of the base and the treated variant on the real client, each run on a fresh relay after
 * its own warm-up, the order alternating; medians, CPU per cycle, sizes and the integrity sums.
 */
async function compareCycles<B extends string, T extends string>(
  base: Variant<B>,
  treated: Variant<T>,
  options: { quick?: boolean },
): Promise<CycleComparison<B, T>> {
  const quick = options.quick === true;
  const roundCount = quick ? QUICK_ROUNDS : ROUNDS;
  const total = quick ? QUICK_ENVELOPES : ENVELOPES;
  const warmup = quick ? QUICK_WARMUP_ENVELOPES : WARMUP_ENVELOPES;
  const rounds: CycleComparisonRound<B, T>[] = [];
  for (let round = 0; round < roundCount; round += 1) {
    const order = round % 2 === 0 ? [base, treated] : [treated, base];
    const runs = new Map<string, CycleRun>();
    for (const variant of order) runs.set(variant.name, await onFreshRelay("session", total, warmup, variant.hooks));
    const baseRun = runs.get(base.name)!;
    const treatedRun = runs.get(treated.name)!;
    const ratio = Math.round((treatedRun.cyclesPerSecond / baseRun.cyclesPerSecond) * RATIO_DIGITS) / RATIO_DIGITS;
    rounds.push({ [base.name]: baseRun, [treated.name]: treatedRun, ratio, first: order[0]!.name } as CycleComparisonRound<B, T>);
  }
  const runsOf = (name: B | T) => rounds.map((round) => (round as Record<string, unknown>)[name] as CycleRun);
  const all = [...runsOf(base.name), ...runsOf(treated.name)];
  const sum = (pick: (run: CycleRun) => number) => all.reduce((total, run) => total + pick(run), 0);
  const perVariant = (pick: (run: CycleRun) => number) =>
    ({ [base.name]: median(runsOf(base.name).map(pick)), [treated.name]: median(runsOf(treated.name).map(pick)) }) as PerVariant<
      B,
      T,
      number
    >;
  const sample = envelopeWithText({ relay: "r", id: crypto.randomUUID() }, { relay: "r", id: crypto.randomUUID() }, filler(TEXT_CHARS));
  const cyclesPerSecond = perVariant((run) => run.cyclesPerSecond);
  const perSecond = {
    [`${base.name}CyclesPerSecond`]: cyclesPerSecond[base.name],
    [`${treated.name}CyclesPerSecond`]: cyclesPerSecond[treated.name],
  } as { readonly [K in `${B | T}CyclesPerSecond`]: number };
  return {
    rounds,
    ratio: median(rounds.map((round) => round.ratio)),
    ...perSecond,
    clientCpuUsPerCycle: perVariant((run) => run.clientCpuUsPerCycle),
    relayCpuUsPerCycle: perVariant((run) => run.relayCpuUsPerCycle),
    envelopeBytes: { [base.name]: envelopeSize(sample, base.hooks), [treated.name]: envelopeSize(sample, treated.hooks) } as PerVariant<
      B,
      T,
      number
    >,
    envelopesPerRun: total,
    lost: sum((run) => run.lost),
    duplicates: sum((run) => run.duplicates),
    verifyFailures: sum((run) => run.verifyFailures),
    relayActiveItemsAfter: sum((run) => run.relayActiveItemsAfter),
  };
}

/** Envelope cycles/s signed ÷ unsigned. */
export function measureSignedCycles(options: { quick?: boolean } = {}): Promise<SignedCyclesResult> {
  return compareCycles({ name: "unsigned", hooks: unsignedHooks }, { name: "signed", hooks: signedHooks("signed") }, options);
}

/** Envelope cycles/s sealed ÷ plain (both signed). */
export function measureSealedCycles(options: { quick?: boolean } = {}): Promise<SealedCyclesResult> {
  return compareCycles({ name: "plain", hooks: signedHooks("plain") }, { name: "sealed", hooks: sealedHooks() }, options);
}
