/** Deterministic timers for tests: time moves only through `advance`. */
import type { TaskTimers } from "../src/core/timers.ts";
import { flushMicrotasks } from "./async.ts";

export interface VirtualTimers extends TaskTimers {
  /** Moves time forward, firing due timeouts in order; awaits their continuations. */
  advance(ms: number): Promise<void>;
  pending(): number;
  /** When the earliest pending timeout is due (virtual ms), or undefined when none is. */
  nextAt(): number | undefined;
}

/** Deterministic timers for tests: time moves only through `advance`. */
export function createVirtualTimers(start = 0): VirtualTimers {
  let current = start;
  let serial = 0;
  const waiting: { at: number; serial: number; fire: () => void }[] = [];
  const flush = () => flushMicrotasks(10);
  return {
    now: () => current,
    elapsed: (since) => current - since,
    timeout(ms, signal) {
      return new Promise<void>((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason);
        const entry = {
          at: current + Math.max(0, ms),
          serial: (serial += 1),
          fire: () => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
          },
        };
        const onAbort = () => {
          const index = waiting.indexOf(entry);
          if (index >= 0) waiting.splice(index, 1);
          reject(signal?.reason);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        waiting.push(entry);
      });
    },
    async advance(ms) {
      const target = current + ms;
      for (;;) {
        await flush();
        waiting.sort((a, b) => a.at - b.at || a.serial - b.serial);
        const next = waiting[0];
        if (next === undefined || next.at > target) break;
        waiting.shift();
        current = next.at;
        next.fire();
      }
      current = target;
      await flush();
    },
    pending: () => waiting.length,
    nextAt: () =>
      waiting.reduce<number | undefined>(
        (earliest, entry) => (earliest === undefined || entry.at < earliest ? entry.at : earliest),
        undefined,
      ),
  };
}
