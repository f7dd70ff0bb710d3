/**
 * The signing and sealing figures: sign + verify per event (bench/measure/signing.ts), and
 * cycles/s signed ÷ unsigned and sealed ÷ plain on the real client (bench/measure/signed-cycles.ts).
 */
import type { CyclesResult } from "../measure/cycles.ts";
import type { SealedCyclesResult, SignedCyclesResult } from "../measure/signed-cycles.ts";
import type { SigningResult } from "../measure/signing.ts";
import { round } from "../lib/stats.ts";
import { GOALS, MICROS_PER_SECOND } from "../goals.ts";
import type { Figure } from "../report.ts";
import { fmt } from "./format.ts";

/** Share of one core that `usPerCycle` µs of CPU per cycle takes at `perSecond` cycles/s. */
const coreShare = (usPerCycle: number, perSecond: number) => `${Math.round(((usPerCycle * perSecond) / MICROS_PER_SECOND) * 100)}%`;

/** The signing figures (issue 12, "Measure"): per-event cost, and cycles/s signed ÷ unsigned. */
export function signingFigures(c: CyclesResult, sg: SigningResult, sc: SignedCyclesResult): Figure[] {
  const asg = sg.assignment;
  const int = sg.intent;
  const pair = (summary: { p50: number; p95: number }) => `p50 ${summary.p50}, p95 ${summary.p95}`;
  const order = sc.rounds.map((round) => `${round.ratio} (${round.first} first)`).join(", ");
  return [
    {
      id: "sign-verify",
      label: "Sign + verify per event, 1 KiB assignment (p50)",
      measured: asg.signVerifyUs.p50,
      unit: "µs",
      detail: `p95 ${asg.signVerifyUs.p95}; sign ${pair(asg.signUs)}; verify ${pair(asg.verifyUs)}; small intent: sign + verify ${pair(int.signVerifyUs)} (sign ${pair(int.signUs)}, verify ${pair(int.verifyUs)}); n=${asg.signVerifyUs.count} each`,
      goal: { op: "<=", value: GOALS.signVerifyP50Us },
      anchor: "—",
      how: `in-process, ${fmt(sg.samples)} events per payload after ${fmt(sg.warmup)} untimed, fresh ids per event, built by the core's builders: the \`assignment\` of a freshly created task with a ${fmt(sg.textChars)}-character text (${fmt(asg.payloadBytes.unsigned)} B canonical payload, ${fmt(asg.payloadBytes.signed)} B signed) and a delivery-receipt \`intent\` (${int.payloadBytes.unsigned} B, ${int.payloadBytes.signed} B signed). Sign = \`signPayload\` given the payload's canonical text, the call \`encodePayload\` makes with a signer (digest of the canonical payload, the signed bytes, Ed25519 on node:crypto, base64url); verify = \`verifyPayload\` on the payload parsed from the signed text, as the trust gate calls it (digest, signed bytes, Ed25519 verify; the sender's key already parsed, as after its first event). Each call is timed alone (\`performance.now()\`), sign + verify is their sum for the same event, percentiles are nearest-rank samples. The goal is derived from the two cycles goals: the most a cycle may add on a client saturated at ${fmt(GOALS.cyclesPerSecond)} cycles/s for it to keep ≥ ${GOALS.signedCyclesRatio}× (1 s / ${fmt(GOALS.cyclesPerSecond)} × (1 / ${GOALS.signedCyclesRatio} − 1)).`,
      evidence: `the parts, p50/p95 in µs: payload digest (canonical JSON + SHA-256 of the parsed payload) ${asg.digestUs.p50}/${asg.digestUs.p95} for the assignment, ${int.digestUs.p50}/${int.digestUs.p95} for the intent; Ed25519 sign alone ${asg.ed25519SignUs.p50}/${asg.ed25519SignUs.p95}; Ed25519 verify alone ${asg.ed25519VerifyUs.p50}/${asg.ed25519VerifyUs.p95}. \`encodePayload\` of the assignment: ${asg.encodeUnsignedUs.p50} µs p50 unsigned, ${asg.encodeSignedUs.p50} µs signed (the signature block's serialization included).`,
      reason:
        "Ed25519 verification alone (node:crypto) costs more than the whole budget, and a signature costs a fraction of a verification; the rest is the payload digest, which sender and receiver each compute and which grows with the payload (the receiver hashes a native \`JSON.stringify\` of the parsed payload and re-canonicalizes only when that text is not already canonical). The budget assumes a client saturated at the goal rate; whether signing slows the real workload is the next row's measurement",
    },
    {
      id: "cycles-signed",
      label: "Envelope cycles/s signed ÷ unsigned (real client; sign per send, verify per receive)",
      measured: sc.ratio,
      unit: "×",
      detail: `signed ${fmt(sc.signedCyclesPerSecond)} vs unsigned ${fmt(sc.unsignedCyclesPerSecond)} cycles/s (medians over the rounds); per round ${sc.rounds.map((round) => round.ratio).join(", ")}; lost ${sc.lost}, duplicates ${sc.duplicates}, verify failures ${sc.verifyFailures}`,
      goal: { op: ">=", value: GOALS.signedCyclesRatio },
      anchor: "—",
      how: `the real-client cycles workload above (${c.senders} \`VolatileTaskSession\` senders → 1 receiver, 1 KiB text), ${sc.rounds.length} round${sc.rounds.length === 1 ? "" : "s"} of ${fmt(sc.envelopesPerRun)} envelopes per run: each round runs the workload unsigned and signed back to back, each on a fresh relay after its own warm-up, the order alternating between rounds. In both variants each sender computes the payload's canonical text first, as \`encodePayload\` does signed or not; signed, each sender (its own Ed25519 identity) then adds a \`signPayload\` block made from that text to each envelope's payload (signed time per envelope; envelopes grow from ${fmt(sc.envelopeBytes.unsigned)} B to ${fmt(sc.envelopeBytes.signed)} B) and the receiver runs \`verifyPayload\` on each received payload before its ACK, both inside the timed loop. Figure: the median of the per-round ratios of cycles/s; every payload must verify, nothing may be lost or duplicated, every relay must end empty. CPU per cycle: the bench process (\`process.cpuUsage\`) and the relay (\`/proc/<pid>/stat\`) over each timed run.`,
      evidence: `per round ${order}; CPU per cycle (medians over the rounds): bench process (the five clients) ${sc.clientCpuUsPerCycle.unsigned} µs unsigned → ${sc.clientCpuUsPerCycle.signed} µs signed, i.e. ${coreShare(sc.clientCpuUsPerCycle.unsigned, sc.unsignedCyclesPerSecond)} → ${coreShare(sc.clientCpuUsPerCycle.signed, sc.signedCyclesPerSecond)} of a core at the median rates; relay ${sc.relayCpuUsPerCycle.unsigned} → ${sc.relayCpuUsPerCycle.signed} µs per cycle. The clients' added ${sc.clientCpuUsPerCycle.signed - sc.clientCpuUsPerCycle.unsigned} µs per cycle compare with sign + verify measured alone (p50 ${sg.assignment.signVerifyUs.p50}, p95 ${sg.assignment.signVerifyUs.p95} µs, previous row); were the clients' thread the only bottleneck, the ratio would be ${sc.clientCpuUsPerCycle.unsigned} ÷ ${sc.clientCpuUsPerCycle.signed} = ${round(sc.clientCpuUsPerCycle.unsigned / sc.clientCpuUsPerCycle.signed)}.`,
      reason:
        "signing lands on the bench process, which runs all five clients on one JS thread: per cycle one `signPayload` on the sending side (canonical JSON + SHA-256 of the payload, Ed25519 sign) and one `verifyPayload` on the receiving side (the same digest of the parsed payload, Ed25519 verify, several times a signature), all synchronous; they use up the client's spare CPU and the cycles then wait on that thread, while the relay's share barely moves (it only canonicalizes and hashes a larger envelope). A CPU profile of signed runs (`bun --cpu-prof`) shows, among the signing frames, Ed25519 verify first, then Ed25519 sign, then the payload digests of both sides, then the assembly of the signed bytes; the crypto is already native (node:crypto), so no cheaper primitive is at hand. The unsigned workload already keeps that thread close to saturated, so the ratio follows the CPU per cycle. In use a sender and its receiver are separate processes and each pays only its half. Done to lower it: canonical JSON sorts keys only when they are out of order, builds an error path only when it rejects and writes short strings itself (the assignment's canonical text 8.5 → 4.0 µs, byte-identical, property-tested in tests/unit/canonical-json.property.test.ts); the receiver's digest already hashes a native \`JSON.stringify\` of the parsed payload and re-canonicalizes only when that text is not canonical, so hashing the received text would save about 1 µs of a ≈ 55 µs verify. What remains is Ed25519 itself (≈ 14 µs to sign, ≈ 40 µs to verify in node:crypto, measured alone), and in this workload the unsigned clients already use most of their one thread: the ratio is bounded by the clients' CPU per cycle unsigned ÷ signed (the evidence), which no change short of a faster primitive or a second thread for the clients moves. Rounds also vary with other load on the machine's cores (see the per-round ratios)",
    },
  ];
}

/** Envelope cycles/s sealed ÷ plain: what sealing adds to signed mail on the real client. */
export function sealingFigure(c: CyclesResult, sl: SealedCyclesResult): Figure {
  const order = sl.rounds.map((round) => `${round.ratio} (${round.first} first)`).join(", ");
  const client = sl.clientCpuUsPerCycle;
  const relay = sl.relayCpuUsPerCycle;
  return {
    id: "cycles-sealed",
    label: "Envelope cycles/s sealed ÷ plain (real client; seal+sign per send, open+verify per receive)",
    measured: sl.ratio,
    unit: "×",
    detail: `sealed ${fmt(sl.sealedCyclesPerSecond)} vs plain ${fmt(sl.plainCyclesPerSecond)} cycles/s (medians over the rounds); per round ${sl.rounds.map((round) => round.ratio).join(", ")}; lost ${sl.lost}, duplicates ${sl.duplicates}, open/verify failures ${sl.verifyFailures}`,
    goal: { op: ">=", value: GOALS.sealedCyclesRatio },
    anchor: "—",
    how: `the real-client cycles workload above (${c.senders} \`VolatileTaskSession\` senders → 1 receiver, 1 KiB text), ${sl.rounds.length} round${sl.rounds.length === 1 ? "" : "s"} of ${fmt(sl.envelopesPerRun)} envelopes per run: each round runs the workload plain and sealed back to back, each on a fresh relay after its own warm-up, the order alternating between rounds. Plain is the signed variant of the previous row (signed mail in the clear, as before sealing). Sealed: each sender (its own Ed25519 identity) computes the payload's canonical text, signs it with \`signPayload\` as plain does, then seals the signed payload to the receiver's X25519 seal key with the core's \`sealSigned\` (what \`encodePayload\` does for sealed carriage: canonical \`{binding, payload, signature}\`, AES-256-GCM under the per-peer key, cached after its first derivation), and that text is spliced into the envelope as the core splices it (no parse); envelopes grow from ${fmt(sl.envelopeBytes.plain)} B to ${fmt(sl.envelopeBytes.sealed)} B. The receiver opens each payload with the core's \`openPayload\` (decrypt, parse, schema check of the content), checks the sender's seal-key binding on first sight of its key (cached afterwards, as \`learnSealKey\` does), then runs \`verifyPayload\`, before its ACK; all inside the timed loop. Figure: the median of the per-round ratios of cycles/s; every payload must open and verify, nothing may be lost or duplicated, every relay must end empty. CPU per cycle: the bench process (\`process.cpuUsage\`) and the relay (\`/proc/<pid>/stat\`) over each timed run.`,
    evidence: `per round ${order}; CPU per cycle (medians over the rounds): bench process (the five clients) ${client.plain} µs plain → ${client.sealed} µs sealed, i.e. ${coreShare(client.plain, sl.plainCyclesPerSecond)} → ${coreShare(client.sealed, sl.sealedCyclesPerSecond)} of a core at the median rates; relay ${relay.plain} → ${relay.sealed} µs per cycle. The clients' added ${client.sealed - client.plain} µs per cycle is seal + open on top of sign + verify; were the clients' thread the only bottleneck, the ratio would be ${client.plain} ÷ ${client.sealed} = ${round(client.plain / client.sealed)}.`,
    reason:
      "sealing lands on the bench process, which runs all five clients on one JS thread already busy with signing: per send one `sealSigned` (the content `{binding, payload, signature}` and then the sealed payload serialized by the generic canonical JSON writer, AES-256-GCM with a fresh cipher and nonce, base64url of the box), per receive one `openPayload` (base64url decode, AES-256-GCM, a parse and an interpreted schema check of the content), all synchronous; the envelope grows by the box's base64url, which fetch, the relay and the reply check each pay a little for. A CPU profile (\`bun --cpu-prof\`) of \`sealSigned\` alone put most of it in canonical JSON and the rest in the cipher; done to lower it: \`sealSigned\` writes its two texts directly (fixed keys, base64url values, an already canonical payload; only the signature block goes through the canonical writer) and canonical JSON sorts only out-of-order keys and builds error paths only when rejecting — \`sealSigned\` 19.7 → 13.4 µs, a signed and sealed \`encodePayload\` 58.5 → 46.6 µs (p50, measured alone), every byte the same. \`openPayload\` splits between the cipher with its base64url and the parse with the schema check (a compiled check is not available inside Pi, whose typebox is 1.x, and would save ≈ 1 µs of ≈ 10). In use a sender and its receiver are separate processes and each pays only its half. Rounds also vary with other load on the machine's cores (see the per-round ratios)",
  };
}
