/**
 * What things cost: relay requests per offered send during an outage (bench/measure/outage.ts),
 * relay memory per queued envelope (bench/measure/memory.ts), a refresh pass over a store of
 * archived events (bench/measure/refresh.ts), the simulator's seeds per second
 * (bench/measure/simulator.ts), and a sandboxed command's cost (bench/measure/sandbox.ts).
 */
import type { MemoryResult } from "../measure/memory.ts";
import type { OutageResult } from "../measure/outage.ts";
import type { RefreshResult } from "../measure/refresh.ts";
import type { SandboxResult } from "../measure/sandbox.ts";
import type { SimulatorResult } from "../measure/simulator.ts";
import { ANCHORS, GOALS } from "../goals.ts";
import type { Figure } from "../report.ts";
import { round } from "../lib/stats.ts";
import { fmt } from "./format.ts";

/** Relay requests per offered send during the outage. */
export function outageFigure(o: OutageResult): Figure {
  return {
    id: "outage",
    label: `Relay requests per offered send, ${o.outageMs / 1000} s outage`,
    measured: o.duringOutage.requestsPerOfferedSend,
    unit: "req/send",
    detail: `${fmt(o.duringOutage.requests)} requests for ${o.offered.total} sends (${o.duringOutage.queued} queued, ${o.duringOutage.pendingNewTasks} of them new tasks); drain after the outage ${fmt(o.afterOutage.drainMs)} ms (${o.afterOutage.messagesPresented} messages presented, lost ${o.afterOutage.lost}, duplicates ${o.afterOutage.duplicatePresentations})`,
    goal: { op: "<=", value: GOALS.outageRequestsPerSend },
    anchor: ANCHORS.outage,
    how: `origin + ${Object.keys(o.duringOutage.byParty).length - 1} workers on the real extension stack (passes and watches at their real cadence) behind the fault proxy; for ${o.outageMs / 1000} s the proxy answers every request 503 without a relay body (transient \`RELAY_UNAVAILABLE\`); meanwhile the origin offers ${o.offered.total} evenly spaced sends (${o.offered.createTask} \`createTask\`, ${o.offered.message} \`message\` on the workers' active tasks); every request of every party in the window counts (client-side log; the proxy saw ${fmt(o.duringOutage.requestsAtProxy)}). Each worker proved its endpoint to the origin before the setup (untimed), so the new tasks go to known workers and no hello is asked in the window.`,
    evidence: `requests by operation: ${Object.entries(o.duringOutage.byOperation)
      .map(([name, value]) => `${name} ${value}`)
      .join(", ")}; by party: ${Object.entries(o.duringOutage.byParty)
      .map(([name, value]) => `${name} ${value}`)
      .join(", ")}.`,
    reason:
      "what remains are the passes' own probes (lease or receive at the 1 s active cadence, one per party); applied: a pass that finds the relay unreachable skips old-work retry and starts the outage wait — for `outageWaitMs` sends wait without a request (the operation answers `TASK_DELIVERY_DEFERRED`, queued) and ask for no extra pass",
  };
}

/** Relay memory per queued 1 KiB envelope. */
export function memoryFigure(mem: MemoryResult): Figure {
  return {
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
      "beyond the canonical text the relay keeps, per envelope, one object that is both its mailbox item and its receipt (cursor, receipt time, target), the envelope id string that keys the dedupe map, and that map's entry; applied: the acceptance id is a keyed hash of the envelope id, the digest is kept only after the text is dropped, the cursor is a number and budget sizes are recomputed",
  };
}

/** A refresh pass over 16,000 archived events. */
export function refreshFigure(r: RefreshResult): Figure {
  return {
    id: "refresh",
    label: "Refresh pass, 16,000 archived events, nothing pending (p50)",
    measured: r.archivedPassMs.p50,
    unit: "ms",
    detail: `p95 ${r.archivedPassMs.p95}; empty store p50 ${r.emptyPassMs.p50}, p95 ${r.emptyPassMs.p95}; one bare receive p50 ${r.receiveMs.p50}; ${r.requestsPerPass} request/pass`,
    goal: { op: "<=", value: GOALS.refreshPassMs },
    anchor: "—",
    how: `a TaskCore whose store holds ${fmt(r.archivedEvents)} archived events (${r.tasks} completed tasks × ${r.archivedEvents / r.tasks} events, ${fmt(r.storeRecords)} records, ${fmt(r.storeEncodedBytes)} encoded bytes; written through the store API), \`refresh()\` timed ${r.passes}× against the real relay after a warm-up; beside it the same on an empty store and a bare \`receive\`.`,
    evidence: `the pass is one relay request (the receive: p50 ${r.receiveMs.p50} ms) plus local work; archived p50 ${r.archivedPassMs.p50} vs empty ${r.emptyPassMs.p50} ms.`,
    reason:
      "the archive costs nothing measurable (compare with the empty store); what remains is one `receive` round trip through the client stack (see the cycles row for its cost).",
  };
}

/** Seeds per second of the deterministic simulator (a record, no goal: it says how long a sweep takes). */
export function simulatorFigure(sim: SimulatorResult): Figure {
  return {
    id: "simulator",
    label: "Simulator seeds per second (120 steps, 3 sessions, default faults and hostile relay)",
    measured: Math.round(sim.seedsPerSecond * 100) / 100,
    unit: "seeds/s",
    detail: `${sim.seeds} seeds in ${fmt(sim.seconds)} s; ${fmt(sim.virtualPerReal)} virtual s per real s; ${sim.failures.length} broke an invariant`,
    anchor: "—",
    how: "`sweep` of testkit/sim/sweep.ts over fixed seeds in this process: each seed a whole world (real task cores, the real relay engine, the hostile relay and the simulated network) on virtual time, every invariant checked after every step.",
  };
}

/** A granted worker's command in its OS sandbox ÷ the same command run plainly. */
export function sandboxFigure(sb: SandboxResult): Figure {
  return {
    id: "sandbox-ratio",
    label: "A worker's command in its OS sandbox ÷ the same command plainly (p50)",
    measured: round(sb.sandboxedP50Ms / sb.plainP50Ms, 2),
    unit: "×",
    detail: `sandboxed p50 ${fmt(sb.sandboxedP50Ms)} ms, plain p50 ${fmt(sb.plainP50Ms)} ms (+${fmt(round(sb.sandboxedP50Ms - sb.plainP50Ms, 1))} ms a call); ${sb.calls} calls each, interleaved; no per-worker start (a sandbox is made per command)`,
    goal: { op: "<=", value: GOALS.sandboxedPerPlainCall },
    anchor: "—",
    how: "`bash -c` of `git status --porcelain && ls src` in this checkout, plainly and wrapped by `sandboxedCommand` (bubblewrap: read-only root, private /tmp, `src` writable, no network), each call timed from spawn to exit (`spawnSync`).",
    evidence: `+${fmt(round(sb.sandboxedP50Ms - sb.plainP50Ms, 1))} ms per call for making and tearing down the namespaces and mounts.`,
    reason:
      "bubblewrap makes a user, mount, network and PID namespace and a dozen mounts for every command; against a command of a few milliseconds that is most of the call. A longer command (a build, a test run) pays the same few milliseconds once. Proposed: one sandbox per worker that runs its commands (a long-lived shell inside it), made when the worker takes a granted task.",
  };
}
