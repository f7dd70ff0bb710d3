/**
 * The ratio figures: each a ratio of two measurements of the same run — real-client cycles per
 * echo request, acceptance, delivery and a real Pi's insertion per raw loopback POST, relay memory
 * per encoded byte, and a refresh pass per bare receive.
 */
import type { AcceptanceResult } from "../measure/acceptance.ts";
import type { CyclesResult } from "../measure/cycles.ts";
import type { DeliveryResult } from "../measure/delivery.ts";
import type { MemoryResult } from "../measure/memory.ts";
import type { PiResult } from "../measure/pi.ts";
import type { RefreshResult } from "../measure/refresh.ts";
import type { ThroughputResult } from "../measure/throughput.ts";
import { GOALS } from "../goals.ts";
import type { Figure } from "../report.ts";
import { fmt, ratio } from "./format.ts";

/** The measurements the ratios divide. */
export interface RatioInputs {
  readonly throughput: ThroughputResult;
  readonly cycles: CyclesResult;
  readonly acceptance: AcceptanceResult;
  readonly delivery: DeliveryResult;
  readonly memory: MemoryResult;
  readonly refresh: RefreshResult;
  readonly pi: PiResult;
}

type Summary = AcceptanceResult["breakdown"]["rawSendMs"];

/** Requests per delivery by operation, as `watch 1.02, receive 1.01, acknowledge 1`. */
const requestMix = (perDelivery: Readonly<Record<string, number>>) =>
  Object.entries(perDelivery)
    .map(([operation, count]) => `${operation} ${count}`)
    .join(", ");

/** Real-client envelope cycles/s ÷ echo req/s. */
function cyclesPerEchoFigure(t: ThroughputResult, c: CyclesResult): Figure {
  return {
    id: "cycles-per-echo",
    label: "Real-client envelope cycles/s ÷ echo req/s",
    measured: ratio(c.session.cyclesPerSecond, t.echo.perSecond),
    unit: "",
    detail: `${fmt(c.session.cyclesPerSecond)} cycles/s ÷ ${fmt(t.echo.perSecond)} req/s; ${Math.round((c.session.requests / c.session.envelopes) * 100) / 100} requests per cycle`,
    goal: { op: ">=", value: GOALS.cyclesPerEchoRequest },
    anchor: "—",
    how: "the real-client cycles row divided by the echo baseline row of the same run; the receiver acknowledges each page with one `ack-batch-v1` request.",
    evidence: `CPU per cycle: the bench process (the five clients) ${c.session.clientCpuUsPerCycle} µs, the relay ${c.session.relayCpuUsPerCycle} µs; the raw-fetch client reaches ${fmt(c.raw.cyclesPerSecond)} cycles/s (${ratio(c.raw.cyclesPerSecond, t.echo.perSecond)} per echo request) on the same relay.`,
    reason:
      "a cycle is now ≈ 1.1 requests (a send, and a page's receive and batched ACK shared by 48–50 envelopes), so the send dominates: a CPU profile of the clients shows Bun's `fetch` first, then ky's per-request `Request`, clone and header merge, then reply parsing and validation; the relay's share is the send's canonicalization and hash. the client gathers the sends of one tick into one \`send-batch-v1\` request (src/relay-client/send-coalescer.ts), but this workload's sender lanes each wait on the mailbox window before they send, so their sends seldom meet in one tick. What would move it: a transport without ky's per-request \`Request\` construction (ky is a required dependency)",
  };
}

/** `createTask` acceptance p95 ÷ the raw POST p95. */
function createPerPostFigure(a: AcceptanceResult, post: Summary): Figure {
  return {
    id: "create-per-post",
    label: "`createTask` acceptance p95 ÷ raw loopback POST p95",
    measured: ratio(a.createTaskMs.p95, post.p95),
    unit: "×",
    detail: `${a.createTaskMs.p95} ms ÷ ${post.p95} ms`,
    goal: { op: "<=", value: GOALS.createPerRawPost },
    anchor: "—",
    how: "the acceptance row's p95 divided by the p95 of the raw `fetch` POST of a 1 KiB send to the same relay, sampled between the creates of the same run.",
    evidence: `createTask p50 ${a.createTaskMs.p50} ms, p95 ${a.createTaskMs.p95} ms; the same send through the client p50 ${a.breakdown.sessionSendMs.p50}, p95 ${a.breakdown.sessionSendMs.p95} ms; as a raw fetch p50 ${post.p50}, p95 ${post.p95} ms.`,
    reason:
      "one round trip now (the separate resolve is gone), but that round trip through the real client costs about twice the raw POST (ky, lanes, reply validation), and the core adds about half a millisecond of its own (the store transaction, the envelope's canonical JSON, signature and sealing, the outbox bookkeeping before and after the send); the origin also runs its background pass on the same thread between creates. What would move it: a leaner client transport, and writing the task and its envelope without re-reading rows in the same transaction",
  };
}

/** Delivery p95 with `watch-v1`, the worker in a process of its own, ÷ the raw POST p95. */
function deliveryPerPostFigure(d: DeliveryResult, post: Summary): Figure {
  const across = d.watchProcesses;
  return {
    id: "delivery-per-post",
    label: "Delivery p95 with `watch-v1` (worker, relay and origin in separate processes) ÷ raw loopback POST p95",
    measured: ratio(across.ackMs.p95, post.p95),
    unit: "×",
    detail: `${across.ackMs.p95} ms ÷ ${post.p95} ms`,
    goal: { op: "<=", value: GOALS.deliveryPerRawPost },
    anchor: "—",
    how: "accepted → the worker's ACK returned, the worker a fake Pi (the real extension stack) in a process of its own (bench/scenarios/delivery-worker.ts), the relay in another and the origin in the bench's, 10 sends/s; the two ends' times are wall clock (`performance.timeOrigin + performance.now()`, good to about a millisecond across processes); p95 divided by the raw POST p95 of the acceptance measurement of the same run.",
    evidence: `across processes: delivery p50 ${across.ackMs.p50} ms, p95 ${across.ackMs.p95} ms, accepted → inserted p50 ${across.insertMs.p50}, p95 ${across.insertMs.p95} ms; both parties on the bench's one thread (the watch row): p50 ${d.watch.ackMs.p50}, p95 ${d.watch.ackMs.p95} ms, accepted → the acknowledging request sent p95 ${d.watch.ackStartMs.p95} ms, that request's own time p95 ${d.watch.ackRequestMs.p95} ms, the worker's relay requests per delivery ${requestMix(d.watch.workerRequestsPerDelivery)}; the raw POST p50 ${post.p50} ms, p95 ${post.p95} ms.`,
    reason:
      "a delivery is three sequential exchanges after the acceptance — the watch's reply, the receive, and one ACK request that carries the receipt (`ack-carry-v1`) — plus the worker's presentation (insertion, the wake and its observation) between the second and the third; each exchange through the real client costs about twice a raw POST (ky, lanes, reply validation), and on this machine's two cores the relay, the worker and the origin (with its own background pass after each create) take turns. Separate processes took the shared thread out of the figure; what is left is the client's per-request cost. Proposed: a leaner request path (the same one the idle Pi's figure names)",
  };
}

/** Relay bytes per queued envelope ÷ its encoded size. */
function memoryRatioFigure(mem: MemoryResult): Figure {
  return {
    id: "memory-ratio",
    label: "Relay bytes per queued envelope ÷ its encoded size",
    measured: ratio(mem.bytesPerEnvelope, mem.encodedBytesPerEnvelope),
    unit: "×",
    detail: `${mem.bytesPerEnvelope} B ÷ ${mem.encodedBytesPerEnvelope} B`,
    goal: { op: "<=", value: GOALS.memoryPerEncoded },
    anchor: "—",
    how: "the memory row divided by the canonical size of the envelope it queues.",
    evidence: `${mem.bytesPerEnvelope - mem.encodedBytesPerEnvelope} B per envelope besides its text: the text's string header, the envelope id (≈ 52 B, the dedupe key, held once), the dedupe map's entry (≈ 40 B), one slot of the accepted table's columns (src/relay-server/store/accepted.ts: cursor, acceptance time and flags in typed arrays, the id, text, target and sender as references to strings the relay holds anyway, ≈ 50 B) and the mailbox's and expiry queue's slots. An object per envelope, each with its own copy of the sender's id, measured ≈ 1.18×. A packed id index (the id's 16 bytes in a typed array, an open-addressing table of slots) measured ≈ 1.08×, meeting the goal.`,
    reason:
      "fixed per-envelope costs of the JS heap, which weigh less as envelopes grow: the id string and its map entry are ≈ 90 of them. The packed id index that met the goal (≈ 1.08×) was a hash table written by hand — its own probing, hashing and deletion — to save ≈ 50 B per envelope where the runtime's `Map` does the same job; we kept the `Map` (code a newcomer can carry on, nothing hand-written that the runtime does) and report the miss",
  };
}

/** Issue 16's goals: each figure a ratio of two measurements of this same run. */
export function ratioFigures(m: RatioInputs): Figure[] {
  const { throughput: t, cycles: c, acceptance: a, delivery: d, memory: mem, refresh: r, pi } = m;
  const post = a.breakdown.rawSendMs;
  return [
    cyclesPerEchoFigure(t, c),
    createPerPostFigure(a, post),
    deliveryPerPostFigure(d, post),
    memoryRatioFigure(mem),
    {
      id: "refresh-ratio",
      label: "Refresh pass with 16,000 archived events ÷ one bare receive (p50)",
      measured: ratio(r.archivedPassMs.p50, r.receiveMs.p50),
      unit: "×",
      detail: `${r.archivedPassMs.p50} ms ÷ ${r.receiveMs.p50} ms`,
      goal: { op: "<=", value: GOALS.refreshPerReceive },
      anchor: "—",
      how: "the refresh row's p50 divided by the p50 of a bare `receive` through the client in the same measurement.",
    },
    {
      id: "pi-per-post",
      label: "Real Pi: accepted → inserted p95 ÷ raw loopback POST p95",
      measured: ratio(pi.insertMs.p95, post.p95),
      unit: "×",
      detail: `${pi.insertMs.p95} ms ÷ ${post.p95} ms`,
      anchor: "—",
      how: "the real-Pi row's p95 beside the raw POST p95 of the same run (no goal: a real Pi session inserting a message is more than a round trip).",
    },
  ];
}
