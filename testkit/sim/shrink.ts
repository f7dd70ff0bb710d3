/**
 * Failures that can be worked with: a failing seed's run made shorter while it still breaks the
 * same invariant — fewer steps first (the steps it keeps are the same draws: a cut run is a prefix
 * of the long one), then each kind of fault switched off in turn (a switched-off fault still draws
 * its number, so the rest of the run draws alike) — and the one-line command that replays it. The
 * fault rates by name (`faultRates`, `withFaultRates`) are what `--faults` sets.
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

/** A failing run, shortened: fewer steps, then fewer kinds of fault, while it still fails alike. */
export async function shrink(failed: SimResult): Promise<SimResult> {
  const invariant = failed.violation?.invariant;
  if (invariant === undefined) return failed;
  const budget = { runs: MAX_SHRINK_RUNS };
  let best = (await fewerSteps(failed.seed, failed.options, invariant, budget)) ?? failed;
  for (const name of Object.keys(faultRates(best.options))) {
    if (budget.runs <= 0) break;
    if (faultRates(best.options)[name] === 0) continue;
    budget.runs -= 1;
    const result = await runSeed(best.seed, withFaultRates(best.options, { [name]: 0 }));
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

/** Every fault rate of a run by its name (what `--faults` sets): the network's, the world's, the hostile relay's. */
export function faultRates(options: SimOptions): Record<string, number> {
  const { partitions, relayRestarts, crashes, restarts, strangers } = options;
  return { ...options.faults, partitions, relayRestarts, crashes, restarts, strangers, ...options.hostile };
}

/** The options with some fault rates changed, by the names `faultRates` gives (an unknown name is a RangeError). */
export function withFaultRates(options: SimOptions, changes: Readonly<Record<string, number>>): SimOptions {
  const rates = faultRates(options);
  for (const name of Object.keys(changes)) if (!(name in rates)) throw new RangeError(`unknown fault "${name}"`);
  const rate = (name: string) => changes[name] ?? rates[name]!;
  const group = <T>(of: T) => Object.fromEntries(Object.keys(of as object).map((name) => [name, rate(name)])) as T;
  return {
    ...options,
    faults: group(options.faults),
    hostile: group(options.hostile),
    partitions: rate("partitions"),
    relayRestarts: rate("relayRestarts"),
    crashes: rate("crashes"),
    restarts: rate("restarts"),
    strangers: rate("strangers"),
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
