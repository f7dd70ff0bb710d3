/**
 * Time for the core: the pass deadline, attempt slices and capacity cooldowns run on
 * `TaskTimers`, separate from the `clock` that stamps task records (tests pass virtual timers);
 * and a pause whose timer never outlives it (`pause`; a wait with a deadline is src/platform/waits.ts).
 */

export interface TaskTimers {
  /** Monotonic milliseconds. */
  now(): number;
  /** Milliseconds since an earlier `now()`. */
  elapsed(since: number): number;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  timeout(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemTimers: TaskTimers = {
  now: () => performance.now(),
  elapsed: (since) => performance.now() - since,
  timeout(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
};

/** Resolves after `ms`, or at once when `signal` aborts; the timer is unref'd and cleared either way. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    timer.unref?.();
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    if (signal?.aborted) return done();
    signal?.addEventListener("abort", done, { once: true });
  });
}
