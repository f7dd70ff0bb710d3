/**
 * The envelope-cycle figures: cycles/s through the real client and through a raw fetch client
 * (bench/measure/cycles.ts), and the relay on Node ÷ on Bun under the raw client
 * (bench/measure/node-cycles.ts).
 */
import { maxRelayMailboxItems } from "../../src/protocol/limits.ts";
import { type CyclesResult, SENDERS } from "../measure/cycles.ts";
import { type NodeCyclesMeasurement, nodeCyclesSkipped } from "../measure/node-cycles.ts";
import { GOALS } from "../goals.ts";
import type { Figure } from "../report.ts";
import { fmt, ratio } from "./format.ts";

/** cycles-session and cycles-raw. */
export function cyclesFigures(c: CyclesResult): Figure[] {
  return [
    {
      id: "cycles-session",
      label: "Envelope cycles/s, real client (send + receive + ACK, 1 KiB)",
      measured: c.session.cyclesPerSecond,
      unit: "cycles/s",
      detail: `${c.senders} senders → 1 receiver, ${fmt(c.session.envelopes)} envelopes, lost ${c.session.lost}, duplicates ${c.session.duplicates}, ${fmt(c.session.capacityRefusals)} mailbox-full refusals`,
      goal: { op: ">=", value: GOALS.cyclesPerSecond },
      anchor: "10 accepted/s (normal load)",
      how: `${c.senders} \`VolatileTaskSession\` senders (4 sends in flight each, and together at most one mailbox (${maxRelayMailboxItems}) of envelopes sent but not yet ACKed) → one receiver that pages (\`receive\`, 50 per page), ACKs each envelope and waits with \`watch\` when empty; ${c.envelopeBytes}-byte envelopes (${c.payloadBytes}-byte payload with 1 KiB text); a fresh relay per run (each accepted envelope pins a 15-minute dedupe receipt). Every accepted id must be received exactly once and the relay must end empty.`,
      reason:
        "client-bound: the five `VolatileTaskSession`s and the relay share the machine's 2 cores; a cycle is ≈ 1.1 requests (the receiver's page is acknowledged with one `ack-batch-v1` request), so the send dominates, and per request the client spends its CPU in Bun's fetch, then ky (a `Request`, a clone and merged headers on every call; ky is a required dependency and stays), then reply validation",
    },
    {
      id: "cycles-raw",
      label: "Envelope cycles/s, relay alone (raw fetch client)",
      measured: c.raw.cyclesPerSecond,
      unit: "cycles/s",
      detail: `lost ${c.raw.lost}, duplicates ${c.raw.duplicates}, ${fmt(c.raw.capacityRefusals)} refusals`,
      goal: { op: ">=", value: GOALS.cyclesPerSecond },
      anchor: "—",
      how: "the same workload and checks with a minimal raw `fetch` client (no ky, no queues, no reply validation): what the relay process sustains when the client costs next to nothing.",
      reason:
        "a cycle is a send plus a share of a page's receive and batched ACK; each send canonicalizes the envelope and hashes it (node:crypto, synchronous)",
    },
  ];
}

/** Envelope cycles/s with the relay on Node ÷ on Bun (issue 27, item 4): the relay on the runtime Pi's users have. */
export function nodeCyclesFigures(nc: NodeCyclesMeasurement): Figure[] {
  if (nodeCyclesSkipped(nc)) return [];
  const relay = nc.relayCpuUsPerCycle;
  const client = nc.clientCpuUsPerCycle;
  return [
    {
      id: "node-cycles-ratio",
      label: "Relay on Node ÷ relay on Bun, envelope cycles/s (raw client; send + receive + ACK, 1 KiB)",
      measured: nc.ratio,
      unit: "×",
      detail: `Node ${nc.nodeVersion}: ${fmt(nc.cyclesPerSecond.node)} vs Bun ${fmt(nc.cyclesPerSecond.bun)} cycles/s (medians over the rounds); relay CPU per cycle Node ${relay.node} µs, Bun ${relay.bun} µs; per round ${nc.rounds.map((item) => item.ratio).join(", ")}; lost ${nc.lost}, duplicates ${nc.duplicates}`,
      goal: { op: ">=", value: GOALS.nodeRelayRatio },
      anchor: "—",
      how: `the raw-client workload of the \`cycles-raw\` row (${SENDERS} senders → 1 receiver, send + receive + one \`ack-batch-v1\` per page, 1 KiB text) against the built relay (\`dist/pi-tasks.js relay\`) on Node ≥ 22.19 and against the Bun relay (the sources under Bun, as in every other row), each in its own child process, one per runtime for the whole measurement. Before the rounds each relay gets the same warm-up: a run of ${fmt(nc.warmup.envelopes)} cycles, then ${fmt(nc.warmup.resends)} resends of accepted envelopes (answered \`duplicate\`: the send's parse, checks, canonical text and digest without a new receipt; the relay on Node keeps getting cheaper over its first several thousand sends, more than its receipt budget leaves room for beside the rounds, and may still be getting cheaper during the rounds: its CPU per cycle round by round is in the evidence). Then ${nc.rounds.length} round${nc.rounds.length === 1 ? "" : "s"} of ${fmt(nc.envelopesPerRun)} envelopes per run, each round both relays back to back, the order alternating; the figure is the median of the per-round ratios. The goal is the \`node-relay-ratio\` row's (≥ ${GOALS.nodeRelayRatio}: no goal was given for the relay on Node; the floor we hold it to). Every accepted id must be received exactly once and both relays must end empty. CPU per cycle: each relay process (\`/proc/<pid>/stat\`) and the bench process (the clients) over each timed run.`,
      evidence: `per round ${nc.rounds.map((item) => `${item.ratio} (${item.first} first)`).join(", ")}; cycles/s (medians) Node ${fmt(nc.cyclesPerSecond.node)}, Bun ${fmt(nc.cyclesPerSecond.bun)}; relay CPU per cycle (medians) Node ${relay.node} µs, Bun ${relay.bun} µs (Bun ÷ Node ${ratio(relay.bun, relay.node)}), per round Node ${nc.rounds.map((item) => item.node.relayCpuUsPerCycle).join(", ")} µs, Bun ${nc.rounds.map((item) => item.bun.relayCpuUsPerCycle).join(", ")} µs; the clients ${client.node} µs per cycle against the relay on Node, ${client.bun} µs against Bun.`,
      reason:
        "the workload is bound by the relay process (the raw client costs a fraction of the relay's CPU per cycle), so the ratio follows the two relays' CPU per cycle. A CPU profile of the relay on Node under this workload (`node --cpu-prof`, from a cold start) puts first the socket writes of the replies (`writev`, head and body), then the garbage collector, then the handler's own code spread over many functions (reading the request, admission, canonical JSON; the same code as on Bun), then node:crypto's hashes and HMACs, then `node:http`'s parser and streams; Bun.serve parses and writes natively. What would move it: fewer allocations per request (the collector's share); the socket writes and the HTTP machinery are Node's own",
    },
  ];
}
