/**
 * `npm run bench`: every performance figure of pi-tasks from one run on this machine, each beside
 * its goal and its Wolfpack anchor (Wolfpack's published relay figures). Writes `bench/results.json` and
 * `docs/performance.md`; exits non-zero only when an integrity check fails (loss, duplicates, a
 * relay left holding mail) — a missed performance goal is reported, not fatal.
 *
 * `runBench({ quick: true })` runs every measurement in a tiny configuration (the smoke test).
 * Every server and process a measurement starts is stopped in its `finally`; nothing keeps the
 * process alive afterwards.
 *
 * The measurements are in bench/measure/, the goals and Wolfpack's anchors in bench/goals.ts, and
 * each group of figures (what a row says: its number, goal, method and reasons) is built in
 * bench/figures/; this file runs the measurements, lists the figures in order and checks integrity.
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { type AcceptanceResult, measureAcceptance } from "./measure/acceptance.ts";
import { type CyclesResult, measureCycles } from "./measure/cycles.ts";
import { type DeliveryResult, measureDelivery } from "./measure/delivery.ts";
import { measureMemory, type MemoryResult } from "./measure/memory.ts";
import { measureNodeCycles, type NodeCyclesMeasurement, nodeCyclesSkipped } from "./measure/node-cycles.ts";
import { measureOutage, type OutageResult } from "./measure/outage.ts";
import { measurePi, type PiResult } from "./measure/pi.ts";
import { type IdleResult, measureIdle } from "./measure/idle.ts";
import { idleFigures } from "./figures/idle.ts";
import { measureWorkerWeight, type WorkerWeightResult } from "./measure/worker-weight.ts";
import { workerWeightFigures } from "./figures/worker-weight.ts";
import { type DelegationPeers, measureDelegationPeers } from "./measure/delegation-peers.ts";
import { measureSpecialists, type SpecialistsResult } from "./measure/specialists.ts";
import { delegationFigures } from "./figures/delegation.ts";
import { type LivenessResult, measureLiveness } from "./measure/liveness.ts";
import { type GrowthResult, growthMarkdown, measureGrowth } from "./measure/growth.ts";
import { isSkipped, measureRedis, type RedisMeasurement, redisChecks, redisFigures } from "./measure/redis.ts";
import { measureRefresh, type RefreshResult } from "./measure/refresh.ts";
import { measureSealedCycles, measureSignedCycles, type SealedCyclesResult, type SignedCyclesResult } from "./measure/signed-cycles.ts";
import { measureSigning, type SigningResult } from "./measure/signing.ts";
import { measureSandbox, type SandboxResult } from "./measure/sandbox.ts";
import { measureSimulator, type SimulatorResult } from "./measure/simulator.ts";
import { measureThroughput, type ThroughputResult } from "./measure/throughput.ts";
import { keptSections } from "./lib/doc.ts";
import { type Figure, machineFacts, type MachineFacts, performanceMarkdown, verdict } from "./report.ts";

import { ANCHORS, GOALS } from "./goals.ts";
import { cyclesFigures, nodeCyclesFigures } from "./figures/cycles.ts";
import { memoryFigure, outageFigure, refreshFigure, sandboxFigure, simulatorFigure } from "./figures/costs.ts";
import { acceptanceFigure, deliveryFigures, livenessFigure, piFigure } from "./figures/latency.ts";
import { ratioFigures } from "./figures/ratios.ts";
import { sealingFigure, signingFigures } from "./figures/signing.ts";
import { throughputFigures } from "./figures/throughput.ts";

export { ANCHORS, GOALS } from "./goals.ts";

export interface BenchResults {
  readonly machine: MachineFacts;
  readonly quick: boolean;
  readonly durationSeconds: number;
  readonly figures: readonly (Figure & { readonly verdict: string })[];
  readonly checks: readonly { readonly name: string; readonly ok: boolean; readonly detail: string }[];
  readonly measurements: {
    readonly throughput: ThroughputResult;
    readonly cycles: CyclesResult;
    readonly nodeCycles: NodeCyclesMeasurement;
    readonly signing: SigningResult;
    readonly signedCycles: SignedCyclesResult;
    readonly sealedCycles: SealedCyclesResult;
    readonly acceptance: AcceptanceResult;
    readonly delivery: DeliveryResult;
    readonly outage: OutageResult;
    readonly memory: MemoryResult;
    readonly refresh: RefreshResult;
    readonly pi: PiResult;
    readonly idle: IdleResult;
    readonly workerWeight: WorkerWeightResult;
    readonly liveness: LivenessResult;
    readonly redis: RedisMeasurement;
    readonly growth: GrowthResult;
    readonly simulator: SimulatorResult;
    readonly sandbox: SandboxResult;
    readonly specialists: SpecialistsResult;
    readonly peers: DelegationPeers;
  };
  /** Markdown sections after the figures (the growth curves). */
  readonly sections: readonly string[];
  /** Measurements that could not run here, with the reason. */
  readonly skipped: readonly { readonly name: string; readonly reason: string }[];
  /** Seconds each measurement took. */
  readonly timings: Record<string, number>;
}

export interface BenchOptions {
  readonly quick?: boolean;
  /** Progress lines (the CLI prints them to stderr). */
  readonly progress?: (line: string) => void;
}

/** Every figure of the run, in the order docs/performance.md lists them. */
function figures(m: BenchResults["measurements"]): Figure[] {
  return [
    ...throughputFigures(m.throughput),
    ...nodeCyclesFigures(m.nodeCycles),
    ...cyclesFigures(m.cycles),
    ...signingFigures(m.cycles, m.signing, m.signedCycles),
    sealingFigure(m.cycles, m.sealedCycles),
    acceptanceFigure(m.acceptance),
    ...ratioFigures(m),
    ...deliveryFigures(m.delivery),
    outageFigure(m.outage),
    memoryFigure(m.memory),
    refreshFigure(m.refresh),
    piFigure(m.pi),
    ...idleFigures(m.idle),
    ...workerWeightFigures(m.workerWeight),
    ...(m.liveness.skipped === undefined ? [livenessFigure(m.liveness)] : []),
    ...redisFigures(m.redis, GOALS, ANCHORS),
    simulatorFigure(m.simulator),
    ...(m.sandbox.skipped === undefined ? [sandboxFigure(m.sandbox)] : []),
    ...delegationFigures(m.specialists, m.peers),
  ];
}

function integrity(m: BenchResults["measurements"]): BenchResults["checks"] {
  const { cycles: c, signing: sg, signedCycles: sc, sealedCycles: sl, delivery: d, outage: o, pi, refresh: r } = m;
  return [
    {
      name: "cycles: zero loss, zero duplicates, relay empty",
      ok: [c.session, c.raw].every((run) => run.lost === 0 && run.duplicates === 0 && run.relayActiveItemsAfter === 0),
      detail: `session lost ${c.session.lost} dup ${c.session.duplicates} left ${c.session.relayActiveItemsAfter}; raw lost ${c.raw.lost} dup ${c.raw.duplicates} left ${c.raw.relayActiveItemsAfter}`,
    },
    {
      name: "signing: every signed payload verifies; signed cycles lose and duplicate nothing, relays empty",
      ok:
        sg.assignment.verifyFailures === 0 &&
        sg.intent.verifyFailures === 0 &&
        sc.verifyFailures === 0 &&
        sc.lost === 0 &&
        sc.duplicates === 0 &&
        sc.relayActiveItemsAfter === 0,
      detail: `per-event verify failures ${sg.assignment.verifyFailures + sg.intent.verifyFailures}; cycles (all rounds) verify failures ${sc.verifyFailures}, lost ${sc.lost}, dup ${sc.duplicates}, left ${sc.relayActiveItemsAfter}`,
    },
    {
      name: "sealing: every sealed payload opens and verifies; sealed and plain cycles lose and duplicate nothing, relays empty",
      ok: sl.verifyFailures === 0 && sl.lost === 0 && sl.duplicates === 0 && sl.relayActiveItemsAfter === 0,
      detail: `cycles (all rounds, both variants) open/verify failures ${sl.verifyFailures}, lost ${sl.lost}, dup ${sl.duplicates}, left ${sl.relayActiveItemsAfter}`,
    },
    {
      name: "delivery: every assignment ACKed, none inserted twice",
      ok:
        [d.watch, d.poll].every((run) => run.unacknowledged === 0 && run.duplicateInsertions === 0) &&
        d.watchProcesses.unacknowledged === 0,
      detail: `watch unacked ${d.watch.unacknowledged} dup ${d.watch.duplicateInsertions}; poll unacked ${d.poll.unacknowledged} dup ${d.poll.duplicateInsertions}; across processes unacked ${d.watchProcesses.unacknowledged}`,
    },
    {
      name: "outage: queued messages all presented once after the outage",
      ok: o.afterOutage.drained && o.afterOutage.lost === 0 && o.afterOutage.duplicatePresentations === 0,
      detail: `drained ${o.afterOutage.drained}, presented ${o.afterOutage.messagesPresented}, lost ${o.afterOutage.lost}, duplicates ${o.afterOutage.duplicatePresentations}`,
    },
    {
      name: "refresh: one request per pass, nothing pending",
      ok: r.requestsPerPass === 1 && r.pendingAfter === 0,
      detail: `${r.requestsPerPass} request/pass, pending ${r.pendingAfter}`,
    },
    {
      name: "real Pi: every task inserted exactly once",
      ok: pi.missing === 0 && pi.duplicateInsertions === 0,
      detail: `missing ${pi.missing}, duplicates ${pi.duplicateInsertions}`,
    },
    {
      name: "liveness: one lost worker, one orphan report, one wake",
      ok: m.liveness.runs.every((run) => run.orphanEvents === 1 && run.presented === 1 && run.wakes === 1),
      detail: m.liveness.runs.map((run) => `events ${run.orphanEvents} shown ${run.presented} wakes ${run.wakes}`).join("; "),
    },
    ...(nodeCyclesSkipped(m.nodeCycles)
      ? []
      : [
          {
            name: "node-cycles: the relays on Node and on Bun lose and duplicate nothing, end empty",
            ok: m.nodeCycles.lost === 0 && m.nodeCycles.duplicates === 0 && m.nodeCycles.left === 0,
            detail: `lost ${m.nodeCycles.lost}, dup ${m.nodeCycles.duplicates}, left ${m.nodeCycles.left}`,
          },
        ]),
    ...redisChecks(m.redis),
    {
      name: "simulator: every invariant held on the bench's seeds",
      ok: m.simulator.failures.length === 0,
      detail: m.simulator.failures.length === 0 ? `${m.simulator.seeds} seeds` : m.simulator.failures.join("; "),
    },
    ...m.growth.checks.map((check) => ({
      name: check.name.startsWith("growth: ") ? check.name : `growth: ${check.name}`,
      ok: check.ok,
      detail: check.detail,
    })),
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
    nodeCycles: await step("node-cycles", () => measureNodeCycles({ quick })),
    signing: await step("signing", () => measureSigning({ quick })),
    signedCycles: await step("signed-cycles", () => measureSignedCycles({ quick })),
    sealedCycles: await step("sealed-cycles", () => measureSealedCycles({ quick })),
    acceptance: await step("acceptance", () => measureAcceptance({ quick })),
    delivery: await step("delivery", () => measureDelivery({ quick })),
    outage: await step("outage", () => measureOutage({ quick })),
    memory: await step("memory", () => measureMemory({ quick })),
    refresh: await step("refresh", () => measureRefresh({ quick })),
    pi: await step("pi", () => measurePi({ quick })),
    idle: await step("idle", () => measureIdle({ quick })),
    workerWeight: await step("worker-weight", () => measureWorkerWeight({ quick })),
    liveness: await step("liveness", () => measureLiveness({ quick })),
    redis: await step("redis", () => measureRedis({ quick })),
    growth: await step("growth", () => measureGrowth({ quick })),
    simulator: await step("simulator", () => measureSimulator({ quick })),
    sandbox: await step("sandbox", () => measureSandbox({ quick })),
    specialists: await step("specialists", () => measureSpecialists({ quick })),
    peers: await step("delegation-peers", () => measureDelegationPeers({ quick })),
  };
  if (isSkipped(measurements.redis)) progress(`redis: skipped: ${measurements.redis.skipped}`);
  if (nodeCyclesSkipped(measurements.nodeCycles)) progress(`node-cycles: skipped: ${measurements.nodeCycles.skipped}`);
  const skipped = [
    ...(measurements.liveness.skipped === undefined ? [] : [{ name: "liveness", reason: measurements.liveness.skipped }]),
    ...(isSkipped(measurements.redis) ? [{ name: "redis", reason: measurements.redis.skipped }] : []),
    ...(nodeCyclesSkipped(measurements.nodeCycles) ? [{ name: "node-cycles", reason: measurements.nodeCycles.skipped }] : []),
    ...(measurements.sandbox.skipped === undefined ? [] : [{ name: "sandbox", reason: measurements.sandbox.skipped }]),
    ...("skipped" in measurements.idle ? [{ name: "idle", reason: measurements.idle.skipped }] : []),
    ...("skipped" in measurements.workerWeight ? [{ name: "worker-weight", reason: measurements.workerWeight.skipped }] : []),
    ...Object.entries(measurements.peers).flatMap(([name, peer]) => ("absent" in peer ? [{ name, reason: peer.absent }] : [])),
  ];
  const list = figures(measurements).map((figure) => ({ ...figure, verdict: verdict(figure) }));
  return {
    machine: machineFacts(startLoad),
    quick,
    durationSeconds: Math.round((performance.now() - started) / 100) / 10,
    figures: list,
    checks: integrity(measurements),
    skipped,
    sections: [growthMarkdown(measurements.growth)],
    measurements,
    timings,
  };
}

export const RESULTS_PATH = join(import.meta.dir, "results.json");
export const PERFORMANCE_DOC = join(import.meta.dir, "..", "docs", "performance.md");
/** The section `npm run scale` writes at the end of docs/performance.md (bench/scale.ts); kept by this run. */
export const SCALE_HEADING = "## Growth across relays (npm run scale)";

if (import.meta.main) {
  const quick = process.argv.includes("--quick");
  const results = await runBench({ quick, progress: (line) => process.stderr.write(`bench: ${line}\n`) });
  if (!quick) {
    writeFileSync(RESULTS_PATH, `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(PERFORMANCE_DOC, performanceMarkdown(results) + keptSections(PERFORMANCE_DOC, SCALE_HEADING));
  }
  for (const figure of results.figures) {
    process.stdout.write(
      `${figure.verdict.padEnd(7)} ${figure.label}: ${figure.measured} ${figure.unit}${figure.goal ? ` (goal ${figure.goal.op} ${figure.goal.value})` : ""}\n`,
    );
  }
  for (const check of results.checks) process.stdout.write(`${check.ok ? "ok     " : "FAILED "} ${check.name}: ${check.detail}\n`);
  process.stdout.write(
    `bench: ${results.durationSeconds} s${quick ? " (quick: nothing written)" : `; wrote ${RESULTS_PATH} and ${PERFORMANCE_DOC}`}\n`,
  );
  if (results.checks.some((check) => !check.ok)) process.exitCode = 1;
}
