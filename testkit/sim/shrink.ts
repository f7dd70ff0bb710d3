/**
 * Failures that can be worked with: a failing seed's run made shorter while it still breaks the
 * same invariant — fewer steps first (the steps it keeps are the same draws: a cut run is a prefix
 * of the long one), then each kind of fault switched off in turn (a switched-off fault still draws
 * its number, so the rest of the run draws alike) — and the one-line command that replays it.
 */
import { DEFAULT_SIM_OPTIONS, runSeed, type SimOptions, type SimResult } from "./run.ts";

/** Runs a shrink may spend, at most. */
export const MAX_SHRINK_RUNS = 24;

const stillFails = (result: SimResult, invariant: string) => result.violation?.invariant === invariant;

/** The shortest step count (binary search) whose run still breaks `invariant`. */
async function fewerSteps(seed: number, options: SimOptions, invariant: string, budget: { runs: number }): Promise<SimResult | undefined> {
  let low = 1;
  let high = options.steps;
  let best: SimResult | undefined;
  while (low < high && budget.runs > 0) {
    const middle = Math.floor((low + high) / 2);
    budget.runs -= 1;
    const result = await runSeed(seed, { ...options, steps: middle });
    if (stillFails(result, invariant)) {
      best = result;
      high = middle;
    } else low = middle + 1;
  }
  return best;
}

/** The fault switches a run has: the network's four and the world's three. */
const SWITCHES: readonly ((options: SimOptions) => SimOptions)[] = [
  (options) => ({ ...options, relayRestarts: 0 }),
  (options) => ({ ...options, crashes: 0 }),
  (options) => ({ ...options, partitions: 0 }),
  (options) => ({ ...options, strangers: 0 }),
  ...(["delay", "loseRequest", "loseReply", "duplicate"] as const).map((fault) => (options: SimOptions) => ({
    ...options,
    faults: { ...options.faults, [fault]: 0 },
  })),
];

/** A failing run, shortened: fewer steps, then fewer kinds of fault, while it still fails alike. */
export async function shrink(failed: SimResult): Promise<SimResult> {
  const invariant = failed.violation?.invariant;
  if (invariant === undefined) return failed;
  const budget = { runs: MAX_SHRINK_RUNS };
  let best = (await fewerSteps(failed.seed, failed.options, invariant, budget)) ?? failed;
  for (const off of SWITCHES) {
    if (budget.runs <= 0) break;
    budget.runs -= 1;
    const result = await runSeed(best.seed, off(best.options));
    if (stillFails(result, invariant)) best = result;
  }
  return best;
}

/** The command that replays a run exactly (its seed and every option that differs from the default). */
export function replayCommand(result: Pick<SimResult, "seed" | "options">): string {
  const { options } = result;
  const parts = [`npm run simulate -- --seed ${result.seed}`];
  if (options.steps !== DEFAULT_SIM_OPTIONS.steps) parts.push(`--steps ${options.steps}`);
  if (options.sessions !== DEFAULT_SIM_OPTIONS.sessions) parts.push(`--sessions ${options.sessions}`);
  const rates = faultRates(options);
  const defaults = faultRates(DEFAULT_SIM_OPTIONS);
  const changed = Object.entries(rates).filter(([name, rate]) => defaults[name] !== rate);
  if (changed.length > 0) parts.push(`--faults ${changed.map(([name, rate]) => `${name}=${rate}`).join(",")}`);
  return parts.join(" ");
}

/** Every fault rate of a run by its option name (what `--faults` sets). */
export function faultRates(options: SimOptions): Record<string, number> {
  return {
    ...options.faults,
    partitions: options.partitions,
    relayRestarts: options.relayRestarts,
    crashes: options.crashes,
    restarts: options.restarts,
  };
}

/** A failure as a person reads it: seed, invariant, the shortened trace's end, the replay command. */
export function describeFailure(original: SimResult, shrunk: SimResult, traceLines = 40): string {
  const violation = shrunk.violation ?? original.violation!;
  return [
    `seed ${original.seed}: invariant ${violation.invariant} broken at step ${violation.step}`,
    `  ${violation.message}`,
    `shortened: ${original.options.steps} → ${shrunk.options.steps} steps; trace (last ${traceLines} of ${shrunk.trace.length} lines):`,
    ...shrunk.trace.slice(-traceLines).map((line) => `  ${line}`),
    `replay: ${replayCommand(shrunk)}`,
  ].join("\n");
}
