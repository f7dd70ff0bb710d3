/**
 * The request-rate figures: the Bun.serve JSON echo baseline, the relay's `receive` rate as a
 * ratio to it, and the relay on Node as a ratio to the relay on Bun (bench/measure/throughput.ts).
 */
import type { ThroughputResult } from "../measure/throughput.ts";
import { GOALS } from "../goals.ts";
import type { Figure } from "../report.ts";
import { fmt } from "./format.ts";

/** baseline, relay-ratio, and node-relay-ratio when Node was found. */
export function throughputFigures(t: ThroughputResult): Figure[] {
  return [
    {
      id: "baseline",
      label: "Baseline: Bun.serve JSON echo",
      measured: t.echo.perSecond,
      unit: "req/s",
      detail: `p50 ${t.echo.latencyMs.p50} ms, p95 ${t.echo.latencyMs.p95} ms at ${t.concurrency} in flight`,
      anchor: "—",
      how: `a raw \`fetch\` loop (${t.concurrency} requests in flight, ${fmt(t.requestsPerRound)} requests × ${t.rounds} rounds after a warm-up) POSTing a ${t.requestBytes.echo}-byte JSON body to a \`Bun.serve\` child process that parses and re-serialises it (\`bench/echo-server.ts\`).`,
    },
    {
      id: "relay-ratio",
      label: "Relay request rate ÷ baseline (`receive`, empty mailbox)",
      measured: t.ratio,
      unit: "×",
      detail: `${fmt(t.relayReceive.perSecond)} req/s; per round ${t.roundRatios.join(", ")}; \`health\` ${t.healthRatio}×; the real client reaches ${t.clientRatio}× of the raw-fetch rate`,
      goal: { op: ">=", value: GOALS.relayRateRatio },
      anchor: "—",
      how: `the same client loop and body size against the real relay (CLI child process); each of the ${t.rounds} rounds measures echo and relay back to back and the figure is the median of the per-round ratios; \`receive\` on an empty mailbox (also \`health\`). The real-client number drives the same \`receive\` through \`VolatileTaskSession\` (ky + p-queue + reply validation) instead of raw \`fetch\`, as a ratio to the raw-fetch loop on the same relay; a third server, the echo reading bodies through a stream reader as the relay does, runs in the same rounds.`,
      evidence: `relay receive ${fmt(t.relayReceive.perSecond)} req/s vs echo ${fmt(t.echo.perSecond)} req/s; the same echo reading its bodies the way the relay does (ReadableStream reader, \`bench/echo-server.ts --stream-body\`) runs at ${t.streamBodyRatio}× of the plain echo (${fmt(t.echoStreamBody.perSecond)} req/s).`,
      reason:
        "the relay's JS work per `receive` (≈ 8 µs in-process against ≈ 2.5 µs for the echo's parse and re-serialise: the request checks, the compiled schema check, the binding lookup, the page) lands on the same 2 cores as the client loop; rounds vary with the machine's load. Applied: declared bodies read natively under one swept deadline (no timer or AbortController per request), no URL object without a query, loopback peers and the JSON content type checked first, no JWT call without a secret, the epoch compared before any await. What would move it further: an operation router on Bun.serve's native `routes`, and one schema-and-fields check instead of two passes",
    },
    ...(t.nodeRelayRatio === undefined || t.nodeRelayReceive === undefined
      ? []
      : [
          {
            id: "node-relay-ratio",
            label: "Relay on Node (what Pi's users run) ÷ relay on Bun, `receive` rate",
            measured: t.nodeRelayRatio,
            unit: "×",
            detail: `Node ${t.nodeVersion}: ${fmt(t.nodeRelayReceive.perSecond)} req/s (p95 ${t.nodeRelayReceive.latencyMs.p95} ms) vs Bun ${fmt(t.relayReceive.perSecond)} req/s`,
            goal: { op: ">=" as const, value: GOALS.nodeRelayRatio },
            anchor: "—",
            how: "the built relay (`dist/pi-tasks.js relay`) on Node ≥ 22.19 — `node:http` under the same handler — in its own child process, driven by the same raw `fetch` loop in the same rounds as the Bun relay; the figure is the median of the per-round ratios.",
            reason:
              "Node's `node:http` parses and writes in JavaScript where Bun.serve does it natively, and each request is adapted to the handler (headers read in place, the body collected once): the handler's own work is the same on both. What would move it: an `undici`-free path for replies (already: one `writeHead` + `end`), fewer promise hops per request",
          },
        ]),
  ];
}
