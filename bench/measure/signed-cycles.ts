/**
 * Envelope cycles with signing, as a ratio to the same workload unsigned: the cycles workload of
 * bench/measure/cycles.ts with the real client (`RelaySession`), where each sender signs each
 * envelope's payload (`signPayload`, its own Ed25519 identity, the signed time taken per envelope)
 * and the receiver verifies each received payload (`verifyPayload`, as the trust gate does) before
 * its ACK — both inside the timed loop.
 *
 * In both variants each sender first computes the canonical text of the payload, as a core's
 * `encodePayload` does signed or not; the signed variant hands it to `signPayload` (as
 * `encodePayload` does), so the ratio charges signing only with what signing adds.
 *
 * Rounds: each round runs the unsigned and the signed workload back to back, each on a fresh relay
 * after its own warm-up, the order alternating between rounds so drift and noise hit both alike.
 * The figure is the median of the per-round ratios (signed ÷ unsigned cycles/s).
 */
import { canonicalBytes, canonicalJson } from "../../src/protocol/canonical-json.ts";
import type { SignatureBlock, TaskEndpoint } from "../../src/protocol/schemas.ts";
import { generateIdentity, type Identity } from "../../src/trust/keys.ts";
import { type SignablePayload, signPayload, verifyPayload } from "../../src/trust/signing.ts";
import { type CycleHooks, type CycleRun, onFreshRelay, SENDERS, TEXT_CHARS } from "./cycles.ts";
import { envelopeWithText, filler } from "../lib/wire.ts";

/** Rounds of (unsigned, signed); odd, so the median is one round's ratio. */
const ROUNDS = 3;
const QUICK_ROUNDS = 1;
/** Envelopes per run. */
const ENVELOPES = 2_000;
const QUICK_ENVELOPES = 40;
/** Envelopes of the warm-up run on each fresh relay (same kind as the measured run). */
const WARMUP_ENVELOPES = 400;
const QUICK_WARMUP_ENVELOPES = 10;
const RATIO_DIGITS = 1_000;

export interface SignedCyclesRound {
  readonly unsigned: CycleRun;
  readonly signed: CycleRun;
  /** Signed ÷ unsigned cycles/s of this round. */
  readonly ratio: number;
  /** Which ran first. */
  readonly first: "unsigned" | "signed";
}

export interface SignedCyclesResult {
  readonly rounds: readonly SignedCyclesRound[];
  /** Median of the per-round ratios. */
  readonly ratio: number;
  /** Median cycles/s over the rounds. */
  readonly unsignedCyclesPerSecond: number;
  readonly signedCyclesPerSecond: number;
  /** Median CPU per cycle over the rounds, µs (bench process: all clients; relay process). */
  readonly clientCpuUsPerCycle: { readonly unsigned: number; readonly signed: number };
  readonly relayCpuUsPerCycle: { readonly unsigned: number; readonly signed: number };
  /** Canonical envelope bytes of the workload without and with the signature block. */
  readonly envelopeBytes: { readonly unsigned: number; readonly signed: number };
  readonly envelopesPerRun: number;
  readonly lost: number;
  readonly duplicates: number;
  readonly verifyFailures: number;
  /** Active items left on any relay after its run (must be 0). */
  readonly relayActiveItemsAfter: number;
}

type SignedWire = SignablePayload & { signature?: SignatureBlock };

/** The unsigned variant: the payload's canonical text, as `encodePayload` computes it unsigned too. */
const unsignedHooks: CycleHooks = {
  signed: false,
  prepare(envelope) {
    canonicalJson((envelope.payload as SignedWire).payload);
  },
  check: () => true,
};

/** The signed variant: each sender (its own identity) signs, the receiver verifies before the ACK. */
function signedHooks(): CycleHooks {
  const identities: Identity[] = Array.from({ length: SENDERS }, () => generateIdentity().identity);
  return {
    signed: true,
    prepare(envelope, senderIndex) {
      const wire = envelope.payload as SignedWire;
      const payloadText = canonicalJson(wire.payload);
      const identity = identities[senderIndex % identities.length]!;
      wire.signature = signPayload(wire, { identity, from: envelope.source as TaskEndpoint, to: envelope.target as TaskEndpoint, atMs: Date.now() }, payloadText);
    },
    check(payload) {
      const wire = payload as SignedWire;
      return wire.signature !== undefined && verifyPayload(wire, wire.signature);
    },
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function envelopeSizes(signing: CycleHooks): { unsigned: number; signed: number } {
  const source = { relay: "r", id: crypto.randomUUID() };
  const target = { relay: "r", id: crypto.randomUUID() };
  const envelope = envelopeWithText(source, target, filler(TEXT_CHARS));
  const unsigned = canonicalBytes(envelope);
  signing.prepare(envelope, 0);
  return { unsigned, signed: canonicalBytes(envelope) };
}

export async function measureSignedCycles(options: { quick?: boolean } = {}): Promise<SignedCyclesResult> {
  const quick = options.quick === true;
  const roundCount = quick ? QUICK_ROUNDS : ROUNDS;
  const total = quick ? QUICK_ENVELOPES : ENVELOPES;
  const warmup = quick ? QUICK_WARMUP_ENVELOPES : WARMUP_ENVELOPES;
  const signing = signedHooks();
  const rounds: SignedCyclesRound[] = [];
  for (let round = 0; round < roundCount; round += 1) {
    const first = round % 2 === 0 ? "unsigned" : "signed";
    const runs: Partial<Record<"unsigned" | "signed", CycleRun>> = {};
    for (const variant of first === "unsigned" ? (["unsigned", "signed"] as const) : (["signed", "unsigned"] as const)) {
      runs[variant] = await onFreshRelay("session", total, warmup, variant === "signed" ? signing : unsignedHooks);
    }
    const unsigned = runs.unsigned!;
    const signed = runs.signed!;
    rounds.push({ unsigned, signed, ratio: Math.round((signed.cyclesPerSecond / unsigned.cyclesPerSecond) * RATIO_DIGITS) / RATIO_DIGITS, first });
  }
  const all = rounds.flatMap((round) => [round.unsigned, round.signed]);
  const sum = (pick: (run: CycleRun) => number) => all.reduce((total, run) => total + pick(run), 0);
  const medianOf = (variant: "unsigned" | "signed", pick: (run: CycleRun) => number) => median(rounds.map((round) => pick(round[variant])));
  return {
    rounds,
    ratio: median(rounds.map((round) => round.ratio)),
    unsignedCyclesPerSecond: medianOf("unsigned", (run) => run.cyclesPerSecond),
    signedCyclesPerSecond: medianOf("signed", (run) => run.cyclesPerSecond),
    clientCpuUsPerCycle: { unsigned: medianOf("unsigned", (run) => run.clientCpuUsPerCycle), signed: medianOf("signed", (run) => run.clientCpuUsPerCycle) },
    relayCpuUsPerCycle: { unsigned: medianOf("unsigned", (run) => run.relayCpuUsPerCycle), signed: medianOf("signed", (run) => run.relayCpuUsPerCycle) },
    envelopeBytes: envelopeSizes(signing),
    envelopesPerRun: total,
    lost: sum((run) => run.lost),
    duplicates: sum((run) => run.duplicates),
    verifyFailures: sum((run) => run.verifyFailures),
    relayActiveItemsAfter: sum((run) => run.relayActiveItemsAfter),
  };
}
