/**
 * The deterministic simulator's speed (testkit/sim/): a sweep of fixed seeds with the default
 * options, timed — seeds per second and virtual seconds per real second. Its integrity check is
 * that every invariant held on those seeds.
 */
import { sweep } from "../../testkit/sim/sweep.ts";

/** Seeds the full run sweeps (quick: the smoke test's). */
const SIMULATOR_SEEDS = 60;
const SIMULATOR_QUICK_SEEDS = 3;
/** Where the sweep starts: the same seeds every run, so runs compare. */
const SIMULATOR_FIRST_SEED = 1_000;

export interface SimulatorResult {
  readonly seeds: number;
  readonly seconds: number;
  readonly seedsPerSecond: number;
  /** Virtual seconds the sweep simulated per real second. */
  readonly virtualPerReal: number;
  /** Seeds that broke an invariant, with the invariant. */
  readonly failures: readonly string[];
}

export async function measureSimulator(options: { readonly quick: boolean }): Promise<SimulatorResult> {
  const count = options.quick ? SIMULATOR_QUICK_SEEDS : SIMULATOR_SEEDS;
  const report = await sweep({ seeds: Array.from({ length: count }, (_, index) => SIMULATOR_FIRST_SEED + index), stopAtFailure: false });
  return {
    seeds: report.seeds,
    seconds: report.seconds,
    seedsPerSecond: report.seedsPerSecond,
    virtualPerReal: report.virtualSeconds / report.seconds,
    failures: report.failures.map((failure) => `seed ${failure.seed}: ${failure.result.violation?.invariant}`),
  };
}
