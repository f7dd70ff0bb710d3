/**
 * A sweep: many seeds in a row, their coverage summed (operations and their outcomes, faults, end
 * states), the failures shrunk and described. What `npm test` runs bounded and `npm run simulate`
 * runs long.
 */
import { DEFAULT_SIM_OPTIONS, runSeed, type SimOptions, type SimResult } from "./run.ts";
import { describeFailure, shrink } from "./shrink.ts";

export interface SweepFailure {
  readonly seed: number;
  readonly result: SimResult;
  readonly shrunk: SimResult;
  /** Seed, invariant, shortened trace and the replay command, in words. */
  readonly report: string;
}

export interface SweepReport {
  readonly seeds: number;
  readonly seconds: number;
  readonly seedsPerSecond: number;
  readonly virtualSeconds: number;
  readonly coverage: Readonly<Record<string, number>>;
  readonly failures: readonly SweepFailure[];
}

export interface SweepOptions {
  readonly seeds: readonly number[];
  readonly options?: SimOptions;
  /** Stop at the first failure (default true: a failure is shrunk, which takes runs). */
  readonly stopAtFailure?: boolean;
  /** Called after each seed (progress). */
  readonly onSeed?: (result: SimResult) => void;
}

export async function sweep(input: SweepOptions): Promise<SweepReport> {
  const options = input.options ?? DEFAULT_SIM_OPTIONS;
  const started = performance.now();
  const coverage: Record<string, number> = {};
  const failures: SweepFailure[] = [];
  let virtualMs = 0;
  let ran = 0;
  for (const seed of input.seeds) {
    const result = await runSeed(seed, options);
    ran += 1;
    virtualMs += result.virtualMs;
    for (const [key, times] of Object.entries(result.coverage)) coverage[key] = (coverage[key] ?? 0) + times;
    input.onSeed?.(result);
    if (result.violation === undefined) continue;
    const shrunk = await shrink(result);
    failures.push({ seed, result, shrunk, report: describeFailure(result, shrunk) });
    if (input.stopAtFailure !== false) break;
  }
  const seconds = (performance.now() - started) / 1000;
  return { seeds: ran, seconds, seedsPerSecond: ran / seconds, virtualSeconds: virtualMs / 1000, coverage, failures };
}

/** Coverage as lines: each group (call, fault, network, end) with its entries, most frequent first. */
export function coverageLines(coverage: Readonly<Record<string, number>>): string[] {
  const groups = new Map<string, [string, number][]>();
  for (const [key, times] of Object.entries(coverage)) {
    const [group = key, ...rest] = key.split(" ");
    const entries = groups.get(group) ?? [];
    entries.push([rest.join(" "), times]);
    groups.set(group, entries);
  }
  return [...groups.entries()].map(
    ([group, entries]) =>
      `${group}: ${entries
        .sort((a, b) => b[1] - a[1])
        .map(([name, times]) => `${name} ${times}`)
        .join(", ")}`,
  );
}
