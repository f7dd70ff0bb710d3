/**
 * A rate limit by key: something keyed (a probe of one worker endpoint, a name lookup of one task,
 * one task's progress shown to the model) happens at most once per interval. The owner asks
 * `due(key)` and calls `mark(key)` when it acts (a pass may find a key due and still not reach it).
 */
import type { TaskTimers } from "./timers.ts";

export interface Pacer {
  /** Whether the key's interval has passed since it was last marked (or it never was). */
  due(key: string): boolean;
  /** Records that the key acted now. */
  mark(key: string): void;
  /** Forgets every key (all are due again). */
  clear(): void;
}

export function createPacer(timers: TaskTimers, intervalMs: number): Pacer {
  const lastAt = new Map<string, number>();
  return {
    due(key) {
      const last = lastAt.get(key);
      return last === undefined || timers.now() - last >= intervalMs;
    },
    mark(key) {
      lastAt.set(key, timers.now());
    },
    clear() {
      lastAt.clear();
    },
  };
}
