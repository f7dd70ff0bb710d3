/**
 * `npm run bench`: every performance figure of pi-tasks from one run on this machine, each beside
 * its goal and its Wolfpack anchor (Wolfpack's published relay figures). Writes `bench/results.json` and
 * `docs/performance.md`; exits non-zero only when an integrity check fails (loss, duplicates, a
 * relay left holding mail) — a missed performance goal is reported, not fatal.
 *
 * `runBench({ quick: true })` runs every measurement in a tiny configuration (the smoke test).
 * Every server and process a measurement starts is stopped in its `finally`; nothing keeps the
 * process alive afterwards.
 */
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { relayMaxMailboxItems } from "../src/protocol/limits.ts";
import { join } from "node:path";
import { type AcceptanceResult, measureAcceptance } from "./measure/acceptance.ts";
import { type CyclesResult, measureCycles } from "./measure/cycles.ts";
import { type DeliveryResult, measureDelivery } from "./measure/delivery.ts";
import { measureMemory, type MemoryResult } from "./measure/memory.ts";
import { measureOutage, type OutageResult } from "./measure/outage.ts";
import { measurePi, type PiResult } from "./measure/pi.ts";
import { measureRefresh, type RefreshResult } from "./measure/refresh.ts";
import { measureThroughput, type ThroughputResult } from "./measure/throughput.ts";
import { type Figure, machineFacts, type MachineFacts, performanceMarkdown, verdict } from "./report.ts";

/** Goals of the issue "Benchmarks and the fault matrix, measured side by side". */
export const GOALS = {
  relayRateRatio: 0.5,
  cyclesPerSecond: 5_000,
  acceptanceP95Ms: 1,
  watchDeliveryP95Ms: 50,
  pollDeliveryP95Ms: 1_100,
  outageRequestsPerSend: 3,
  bytesPerQueuedEnvelope: 2_000,
  refreshPassMs: 1,
  piInsertP95Ms: 150,
} as const;

/** Wolfpack's published relay figures (Apple M3 Pro, 11 CPUs). */
export const ANCHORS = {
  acceptanceP95: "6–9 ms p95",
  deliveryAck: "≈ 4,810 ms p95 (5 s poll)",
  outage: "42,224 requests / 300 sends ≈ 140.7",
  memory: "3,130 B encoded",
  insertion: "insertion p95 ≤ 5,044 ms",
} as const;

export interface BenchResults {
  readonly machine: MachineFacts;
  readonly quick: boolean;
  readonly durationSeconds: number;
  readonly figures: readonly (Figure & { readonly verdict: string })[];
  readonly checks: readonly { readonly name: string; readonly ok: boolean; readonly detail: string }[];
  readonly measurements: {
    readonly throughput: ThroughputResult;
    readonly cycles: CyclesResult;
    readonly acceptance: AcceptanceResult;
    readonly delivery: DeliveryResult;
    readonly outage: OutageResult;
    readonly memory: MemoryResult;
    readonly refresh: RefreshResult;
    readonly pi: PiResult;
  };
  /** Seconds each measurement took. */
  readonly timings: Record<string, number>;
}

export interface BenchOptions {
  readonly quick?: boolean;
  /** Progress lines (the CLI prints them to stderr). */
  readonly progress?: (line: string) => void;
}

const fmt = (value: number) => (Math.abs(value) >= 100 ? Math.round(value).toLocaleString("en-US") : String(value));

function figures(m: BenchResults["measurements"]): Figure[] {
  const { throughput: t, cycles: c, acceptance: a, delivery: d, outage: o, memory: mem, refresh: r, pi } = m;
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
      how: "the same client loop and body size against the real relay (CLI child process); each round measures echo and relay back to back and the figure is the median of the per-round ratios; `receive` on an empty mailbox (also `health`). The real-client number drives the same `receive` through `RelaySession` (ky + p-queue + reply validation) instead of raw `fetch`, as a ratio to the raw-fetch loop on the same relay; a third server, the echo reading bodies through a stream reader as the relay does, runs in the same rounds.",
      evidence: `relay receive ${fmt(t.relayReceive.perSecond)} req/s vs echo ${fmt(t.echo.perSecond)} req/s; the same echo reading its bodies the way the relay does (ReadableStream reader, \`bench/echo-server.ts --stream-body\`) runs at ${t.streamBodyRatio}× of the plain echo (${fmt(t.echoStreamBody.perSecond)} req/s).`,
      reason:
        "rounds vary with the machine's load (see the per-round ratios); the relay reads declared-length bodies natively (with the stream reader it used before, the ratio was ≈ 0.44)",
    },
    {
      id: "cycles-session",
      label: "Envelope cycles/s, real client (send + receive + ACK, 1 KiB)",
      measured: c.session.cyclesPerSecond,
      unit: "cycles/s",
      detail: `${c.senders} senders → 1 receiver, ${fmt(c.session.envelopes)} envelopes, lost ${c.session.lost}, duplicates ${c.session.duplicates}, ${fmt(c.session.capacityRefusals)} mailbox-full refusals`,
      goal: { op: ">=", value: GOALS.cyclesPerSecond },
      anchor: "10 accepted/s (normal load)",
      how: `${c.senders} \`RelaySession\` senders (4 sends in flight each, and together at most one mailbox (${relayMaxMailboxItems}) of envelopes sent but not yet ACKed) → one receiver that pages (\`receive\`, 50 per page), ACKs each envelope and waits with \`watch\` when empty; ${c.envelopeBytes}-byte envelopes (${c.payloadBytes}-byte payload with 1 KiB text); a fresh relay per run (each accepted envelope pins a 15-minute dedupe receipt). Every accepted id must be received exactly once and the relay must end empty.`,
      reason:
        "client-bound: the five `RelaySession`s and the relay share the machine's 2 cores, and per request the client spends most of its CPU in ky (a `Request` and merged options on every call; ky is a required dependency and stays), then reply validation and the lanes; with a raw `fetch` client the same relay sustains the rate shown in the next row. Applied after profiling: one deadline timer per request raced by the transport itself (no per-task p-queue timeout), native reads of declared-length replies, the JWT hook only when a secret is configured",
      evidence: `the same workload with a raw \`fetch\` client reaches ${fmt(c.raw.cyclesPerSecond)} cycles/s (${fmt(c.raw.requests)} requests), with \`RelaySession\` ${fmt(c.session.cyclesPerSecond)} cycles/s (${fmt(c.session.requests)} requests incl. ${fmt(c.session.capacityRefusals)} sends refused while the receiver's mailbox was full); the client loop alone runs at ${t.clientRatio}× of raw fetch (${fmt(t.clientReceive.perSecond)} vs ${fmt(t.relayReceive.perSecond)} req/s) — see the relay-ratio row.`,
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
        "at the goal's edge: a cycle is two relay requests (send, and the per-envelope ACK the wire requires) with client and relay on the same 2 cores; each send canonicalizes the envelope and hashes it with WebCrypto for the dedupe digest. Applied: native body reads",
      evidence: `${fmt(c.raw.requests)} requests in ${c.raw.seconds} s = ${fmt(Math.round(c.raw.requests / c.raw.seconds))} relay requests/s (a cycle is ≈ 2.02 requests: send, ACK and 1/50 of a page), against ${fmt(t.relayReceive.perSecond)} req/s for an empty \`receive\` and ${fmt(t.echo.perSecond)} req/s for the echo in this run; client and relay share the machine's ${cpus().length} cores.`,
    },
    {
      id: "acceptance",
      label: "Acceptance latency p95 at 10 sends/s (`createTask`)",
      measured: a.createTaskMs.p95,
      unit: "ms",
      detail: `p50 ${a.createTaskMs.p50}, p99 ${a.createTaskMs.p99}, n=${a.createTaskMs.count}`,
      goal: { op: "<=", value: GOALS.acceptanceP95Ms },
      anchor: ANCHORS.acceptanceP95,
      how: "the origin on the real extension stack (lifecycle, configured core, scheduler, watch) calls `createTask` (1 KiB task text) every 100 ms; each sample runs from the call to its return with the relay's acceptance (what `agent_task_send` reports). Breakdown probes at the same rate, between the creates: bare `RelaySession.resolve`, bare `RelaySession.send` (1 KiB), and that send as a raw `fetch` POST.",
      reason:
        "`createTask` needs two sequential round trips — `resolve` (a definitive refusal must create no task), then `send` — and a single raw loopback POST on this machine already takes most of 1 ms at p95 (see the raw send), so two sequential round trips cannot fit the goal. A message or `done` is one round trip (the client send row)",
      evidence: `createTask p50 ${a.createTaskMs.p50} ms = resolve round trip (p50 ${a.breakdown.resolveMs.p50}, p95 ${a.breakdown.resolveMs.p95}) + send round trip through the client (p50 ${a.breakdown.sessionSendMs.p50}, p95 ${a.breakdown.sessionSendMs.p95}) + the core's own work; the same send as a raw fetch takes p50 ${a.breakdown.rawSendMs.p50}, p95 ${a.breakdown.rawSendMs.p95} ms.`,
    },
    {
      id: "delivery-watch",
      label: "Delivery latency p95, accepted → receiver ACK, `watch-v1`",
      measured: d.watch.ackMs.p95,
      unit: "ms",
      detail: `p50 ${d.watch.ackMs.p50}; accepted → inserted p50 ${d.watch.insertMs.p50}, p95 ${d.watch.insertMs.p95}; n=${d.watch.ackMs.count}`,
      goal: { op: "<=", value: GOALS.watchDeliveryP95Ms },
      anchor: ANCHORS.deliveryAck,
      how: "origin and worker on the real extension stack with their real scheduler and watch; a 1 KiB task every 100 ms; from `createTask` returning to the worker's `acknowledge` reply for that envelope (request log on the worker's fetch); insertion = the `pi-tasks-event` message reaching the (in-memory) Pi session.",
    },
    {
      id: "delivery-poll",
      label: "Delivery latency p95, relay without `features` (1 s cadence)",
      measured: d.poll.ackMs.p95,
      unit: "ms",
      detail: `p50 ${d.poll.ackMs.p50}; inserted p95 ${d.poll.insertMs.p95}; n=${d.poll.ackMs.count}; features seen: ${d.poll.featuresSeen.length === 0 ? "none" : d.poll.featuresSeen.join(",")}`,
      goal: { op: "<=", value: GOALS.pollDeliveryP95Ms },
      anchor: ANCHORS.deliveryAck,
      how: "the same, with both parties behind the fault proxy rewriting the profile reply to drop `features` (a plain Wolfpack relay): no watch, the worker's pass runs at the 1 s active cadence.",
    },
    {
      id: "outage",
      label: `Relay requests per offered send, ${o.outageMs / 1000} s outage`,
      measured: o.duringOutage.requestsPerOfferedSend,
      unit: "req/send",
      detail: `${fmt(o.duringOutage.requests)} requests for ${o.offered.total} sends; afterwards ${o.afterOutage.messagesPresented} messages presented in ${fmt(o.afterOutage.drainMs)} ms, lost ${o.afterOutage.lost}, duplicates ${o.afterOutage.duplicatePresentations}`,
      goal: { op: "<=", value: GOALS.outageRequestsPerSend },
      anchor: ANCHORS.outage,
      how: `origin + ${Object.keys(o.duringOutage.byParty).length - 1} workers on the real extension stack (passes and watches at their real cadence) behind the fault proxy; for ${o.outageMs / 1000} s the proxy answers every request 503 without a relay body (transient \`RELAY_UNAVAILABLE\`); meanwhile the origin offers ${o.offered.total} evenly spaced sends (${o.offered.createTask} \`createTask\`, ${o.offered.message} \`message\` on the workers' active tasks); every request of every party in the window counts (client-side log; the proxy saw ${fmt(o.duringOutage.requestsAtProxy)}).`,
      evidence: `requests by operation: ${Object.entries(o.duringOutage.byOperation).map(([name, value]) => `${name} ${value}`).join(", ")}; by party: ${Object.entries(o.duringOutage.byParty).map(([name, value]) => `${name} ${value}`).join(", ")}.`,
      reason:
        "a failed foreground send requests a pass, and that pass's own requests fail the same way; applied: a pass that finds the relay unreachable (lease or receive `RELAY_UNAVAILABLE`/`RELAY_TIMEOUT`) skips old-work retry",
    },
    {
      id: "memory",
      label: "Relay memory per queued 1 KiB envelope",
      measured: mem.bytesPerEnvelope,
      unit: "B",
      detail: `trials ${mem.trialBytesPerEnvelope.join(", ")}; encoded ${mem.encodedBytesPerEnvelope} B; ${fmt(mem.envelopes)} envelopes`,
      goal: { op: "<=", value: GOALS.bytesPerQueuedEnvelope },
      anchor: ANCHORS.memory,
      how: "in-process relay (`startRelayServer`), requests handed to its engine as the HTTP layer does (body text → `JSON.parse`); JS heap (`bun:jsc` heapStats after `Bun.gc(true)`) before and after queueing the envelopes unacknowledged over 16 mailboxes; median of 3 trials after a warm-up trial.",
      evidence: `heap grows ${mem.bytesPerEnvelope} B per envelope whose canonical text is ${mem.encodedBytesPerEnvelope} B.`,
      reason:
        "beyond the canonical text the relay keeps a mail item and a dedupe receipt (hex digest, acceptance id) with their Map and array entries; applied: the cursor text is derived when a page is built",
    },
    {
      id: "refresh",
      label: "Refresh pass, 16,000 archived events, nothing pending (p50)",
      measured: r.archivedPassMs.p50,
      unit: "ms",
      detail: `p95 ${r.archivedPassMs.p95}; empty store p50 ${r.emptyPassMs.p50}, p95 ${r.emptyPassMs.p95}; one bare receive p50 ${r.receiveMs.p50}; ${r.requestsPerPass} request/pass`,
      goal: { op: "<=", value: GOALS.refreshPassMs },
      anchor: "—",
      how: `a TaskCore whose store holds ${fmt(r.archivedEvents)} archived events (${r.tasks} completed tasks × ${r.archivedEvents / r.tasks} events, ${fmt(r.storeRecords)} records, ${fmt(r.storeEncodedBytes)} encoded bytes; written through the store API), \`refresh()\` timed ${r.passes}× against the real relay after a warm-up; beside it the same on an empty store and a bare \`receive\`.`,
      evidence: `the pass is one relay request (the receive: p50 ${r.receiveMs.p50} ms) plus local work; archived p50 ${r.archivedPassMs.p50} vs empty ${r.emptyPassMs.p50} ms.`,
      reason: "the archive costs nothing measurable (compare with the empty store); what remains is one `receive` round trip through the client stack (see the cycles row for its cost).",
    },
    {
      id: "pi",
      label: "Real Pi: accepted → worker `pi-tasks-event` (p95)",
      measured: pi.insertMs.p95,
      unit: "ms",
      detail: `p50 ${pi.insertMs.p50}, max ${pi.insertMs.max}; by Pi's timestamp p50 ${pi.insertByPiTimestampMs.p50}, p95 ${pi.insertByPiTimestampMs.p95}; n=${pi.insertMs.count}`,
      goal: { op: "<=", value: GOALS.piInsertP95Ms },
      anchor: ANCHORS.insertion,
      how: "a real Pi 1.6 worker (RPC mode under Bun, this extension, the scripted model answering with text) and a TaskCore origin on the relay child process; one task at a time once the worker settled; from `createTask` returning to the arrival of the worker's `message_end` RPC record of that task's `pi-tasks-event` (Pi's own message timestamp beside it).",
    },
  ];
}

function integrity(m: BenchResults["measurements"]): BenchResults["checks"] {
  const { cycles: c, delivery: d, outage: o, pi, refresh: r } = m;
  return [
    { name: "cycles: zero loss, zero duplicates, relay empty", ok: [c.session, c.raw].every((run) => run.lost === 0 && run.duplicates === 0 && run.relayActiveItemsAfter === 0), detail: `session lost ${c.session.lost} dup ${c.session.duplicates} left ${c.session.relayActiveItemsAfter}; raw lost ${c.raw.lost} dup ${c.raw.duplicates} left ${c.raw.relayActiveItemsAfter}` },
    { name: "delivery: every assignment ACKed, none inserted twice", ok: [d.watch, d.poll].every((run) => run.unacknowledged === 0 && run.duplicateInsertions === 0), detail: `watch unacked ${d.watch.unacknowledged} dup ${d.watch.duplicateInsertions}; poll unacked ${d.poll.unacknowledged} dup ${d.poll.duplicateInsertions}` },
    { name: "outage: queued messages all presented once after the outage", ok: o.afterOutage.drained && o.afterOutage.lost === 0 && o.afterOutage.duplicatePresentations === 0, detail: `drained ${o.afterOutage.drained}, presented ${o.afterOutage.messagesPresented}, lost ${o.afterOutage.lost}, duplicates ${o.afterOutage.duplicatePresentations}` },
    { name: "refresh: one request per pass, nothing pending", ok: r.requestsPerPass === 1 && r.pendingAfter === 0, detail: `${r.requestsPerPass} request/pass, pending ${r.pendingAfter}` },
    { name: "real Pi: every task inserted exactly once", ok: pi.missing === 0 && pi.duplicateInsertions === 0, detail: `missing ${pi.missing}, duplicates ${pi.duplicateInsertions}` },
  ];
}

export async function runBench(options: BenchOptions = {}): Promise<BenchResults> {
  const quick = options.quick === true;
  const progress = options.progress ?? (() => undefined);
  const startLoad = loadavg();
  const started = performance.now();
  const timings: Record<string, number> = {};
  async function step<T>(name: string, run: () => Promise<T>): Promise<T> {
    const at = performance.now();
    progress(`${name}…`);
    const result = await run();
    timings[name] = Math.round((performance.now() - at) / 100) / 10;
    progress(`${name}: ${timings[name]} s`);
    return result;
  }
  const measurements = {
    throughput: await step("throughput", () => measureThroughput({ quick })),
    cycles: await step("cycles", () => measureCycles({ quick })),
    acceptance: await step("acceptance", () => measureAcceptance({ quick })),
    delivery: await step("delivery", () => measureDelivery({ quick })),
    outage: await step("outage", () => measureOutage({ quick })),
    memory: await step("memory", () => measureMemory({ quick })),
    refresh: await step("refresh", () => measureRefresh({ quick })),
    pi: await step("pi", () => measurePi({ quick })),
  };
  const list = figures(measurements).map((figure) => ({ ...figure, verdict: verdict(figure) }));
  return {
    machine: machineFacts(startLoad),
    quick,
    durationSeconds: Math.round((performance.now() - started) / 100) / 10,
    figures: list,
    checks: integrity(measurements),
    measurements,
    timings,
  };
}

export const RESULTS_PATH = join(import.meta.dir, "results.json");
export const PERFORMANCE_DOC = join(import.meta.dir, "..", "docs", "performance.md");

if (import.meta.main) {
  const quick = process.argv.includes("--quick");
  const results = await runBench({ quick, progress: (line) => process.stderr.write(`bench: ${line}\n`) });
  if (!quick) {
    writeFileSync(RESULTS_PATH, `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(PERFORMANCE_DOC, performanceMarkdown(results));
  }
  for (const figure of results.figures) {
    process.stdout.write(`${figure.verdict.padEnd(7)} ${figure.label}: ${figure.measured} ${figure.unit}${figure.goal ? ` (goal ${figure.goal.op} ${figure.goal.value})` : ""}\n`);
  }
  for (const check of results.checks) process.stdout.write(`${check.ok ? "ok     " : "FAILED "} ${check.name}: ${check.detail}\n`);
  process.stdout.write(`bench: ${results.durationSeconds} s${quick ? " (quick: nothing written)" : `; wrote ${RESULTS_PATH} and ${PERFORMANCE_DOC}`}\n`);
  if (results.checks.some((check) => !check.ok)) process.exitCode = 1;
}
