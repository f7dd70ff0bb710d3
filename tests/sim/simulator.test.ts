/**
 * The deterministic simulator (testkit/sim/): one seed is one run, byte for byte; a bounded sweep of
 * fixed seeds keeps every invariant while it reaches every kind of tool call, fault and hostile act of the relay; a broken
 * invariant is reported with its seed, a shortened trace and the replay command.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Invariants } from "../../testkit/sim/invariants.ts";
import { DEFAULT_SIM_OPTIONS, runSeed } from "../../testkit/sim/run.ts";
import { describeFailure, replayCommand, shrink } from "../../testkit/sim/shrink.ts";
import { coverageLines, sweep } from "../../testkit/sim/sweep.ts";

setDefaultTimeout(240_000);

/**
 * Seeds every run sweeps, the same each time: 1–30 — each defect of docs/simulator.md's
 * planted-defect table breaks an invariant in them. (A finding's seed names a world of the
 * simulator it was found with; each fixed finding is pinned by a test of its own.)
 */
const FIXED_SEEDS = Array.from({ length: 30 }, (_, index) => index + 1);
/** Fresh seeds, new each run (printed, so a failure can be replayed): what the fixed ones have not met yet. */
const FRESH_SEED_COUNT = 5;
/** Past the fixed seeds and every seed docs/simulator.md names. */
const FRESH_START = 1_000_000 + (Date.now() % 1_000_000_000);

describe("the simulator", () => {
  test("one seed, one run: two runs of a seed give the same trace and coverage, another seed another", async () => {
    const first = await runSeed(11);
    const again = await runSeed(11);
    const other = await runSeed(12);
    expect(again.trace.join("\n")).toBe(first.trace.join("\n"));
    expect(again.coverage).toEqual(first.coverage);
    expect(other.trace.join("\n")).not.toBe(first.trace.join("\n"));
    expect(first.trace.length).toBeGreaterThan(100);
  });

  test("a bounded sweep keeps every invariant and reaches every tool call and fault", async () => {
    const fresh = Array.from({ length: FRESH_SEED_COUNT }, (_, index) => FRESH_START + index);
    console.info(`simulator: fresh seeds ${fresh[0]}..${fresh.at(-1)} (replay one: npm run simulate -- --seed S)`);
    const report = await sweep({ seeds: [...FIXED_SEEDS, ...fresh] });
    // What a failure prints (seed, invariant, shortened trace, replay) is the assertion's message.
    expect(report.failures.map((failure) => failure.report)).toEqual([]);
    const reached = Object.keys(report.coverage);
    for (const call of ["send", "ask", "answer", "progress", "done", "cancel", "ack", "revise", "reassign", "restart", "takes"])
      expect(reached.some((key) => key.startsWith(`call ${call} ok`))).toBe(true);
    for (const fault of ["crash", "restart (resume)", "restart", "partition", "relay-restart", "stranger"])
      expect(report.coverage[`fault ${fault}`]).toBeGreaterThan(0);
    for (const fate of ["delayed", "lost-request", "lost-reply", "duplicated", "partitioned"])
      expect(report.coverage[`network ${fate}`]).toBeGreaterThan(0);
    for (const act of ["withhold", "reorder", "replay", "rewrite", "forge", "junk"])
      expect(report.coverage[`hostile ${act}`]).toBeGreaterThan(0);
    expect(coverageLines(report.coverage).length).toBeGreaterThanOrEqual(4);
  });

  test("a broken invariant is reported with its seed, the invariant, a shortened trace and the command that replays it", async () => {
    // An invariant that breaks once a task completes at its origin: the run fails where it happens.
    const completedBreaks = (): Invariants => ({
      afterStep: (world) => {
        for (const session of world.sessions)
          if (!session.down && session.core.listTasks().some((task) => task.role === "origin" && task.status === "completed"))
            return { invariant: "truthful-end", message: `${session.name} saw a task completed` };
        return undefined;
      },
      callSettled: () => undefined,
      atEnd: () => undefined,
    });
    const options = { ...DEFAULT_SIM_OPTIONS, steps: 200, invariants: completedBreaks };
    let failed = await runSeed(1, options);
    for (let seed = 2; failed.violation === undefined || failed.violation.step >= options.steps; seed += 1)
      failed = await runSeed(seed, options);
    const shrunk = await shrink(failed);
    expect(shrunk.violation?.invariant).toBe("truthful-end");
    expect(shrunk.options.steps).toBeLessThanOrEqual(failed.violation!.step);
    expect(shrunk.trace.length).toBeLessThan(failed.trace.length);
    const report = describeFailure(failed, shrunk);
    expect(report).toContain(`seed ${failed.seed}: invariant truthful-end broken`);
    expect(report).toContain(`replay: npm run simulate -- --seed ${failed.seed} --steps ${shrunk.options.steps}`);
    // The replay command's run is the shortened run.
    expect(replayCommand(shrunk)).toContain(`--seed ${failed.seed}`);
    const replayed = await runSeed(shrunk.seed, shrunk.options);
    expect(replayed.trace.join("\n")).toBe(shrunk.trace.join("\n"));
  });
});
