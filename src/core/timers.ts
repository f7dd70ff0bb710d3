/**
 * Time for the core: the pass deadline, admission slices and capacity cooldowns run on
 * `TaskTimers`, separate from the `clock` that stamps task records (tests pass virtual timers);
 * and two waits whose timers never outlive them (`within`, `pause`).
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

/** Waiting with a deadline whose timer never outlives the wait (a pending timer keeps Bun alive). */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

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
