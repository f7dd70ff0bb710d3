/**
 * Sample statistics for the bench: percentiles from raw samples (nearest-rank), summaries and a
 * small monotonic timer. No smoothing, no histograms: every percentile is one of the samples.
 */

export interface Summary {
  readonly count: number;
  readonly min: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

/** Nearest-rank percentile (`q` in 0..100) of samples sorted ascending (at least one). */
function nearestRank(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((q / 100) * sorted.length))) - 1]!;
}

export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0)
    return { count: 0, min: Number.NaN, p50: Number.NaN, p95: Number.NaN, p99: Number.NaN, max: Number.NaN, mean: Number.NaN };
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => nearestRank(sorted, q);
  return {
    count: sorted.length,
    min: sorted[0]!,
    p50: at(50),
    p95: at(95),
    p99: at(99),
    max: sorted[sorted.length - 1]!,
    mean: sorted.reduce((sum, value) => sum + value, 0) / sorted.length,
  };
}

/** Rounds for reports (keeps small values readable). */
export function round(value: number, digits = 3): number {
  if (!Number.isFinite(value)) return value;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

export function roundSummary(summary: Summary, digits = 3): Summary {
  return {
    count: summary.count,
    min: round(summary.min, digits),
    p50: round(summary.p50, digits),
    p95: round(summary.p95, digits),
    p99: round(summary.p99, digits),
    max: round(summary.max, digits),
    mean: round(summary.mean, digits),
  };
}

/** Monotonic milliseconds (sub-millisecond resolution). */
export const now = (): number => performance.now();

/** Runs `count` async tasks with at most `concurrency` at once; resolves when all settled. */
export async function pool(count: number, concurrency: number, run: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) {
      const index = next;
      next += 1;
      await run(index);
    }
  });
  await Promise.all(lanes);
}

/** Sleeps until the monotonic time `at` (ms); returns at once when it has passed. */
export async function sleepUntil(at: number): Promise<void> {
  const wait = at - now();
  if (wait > 0) await Bun.sleep(wait);
}
