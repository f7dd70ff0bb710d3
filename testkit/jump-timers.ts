/**
 * Real time that can jump: `TaskTimers` whose `now()` moves forward on demand (capacity cooldowns
 * and delivery budgets expire at once) and a record clock that does the same for task timeouts.
 * Jump only between passes; timeouts still wait in real time.
 */
import { systemTimers, type TaskTimers } from "../src/core/timers.ts";

export interface JumpTimers extends TaskTimers {
  /** Moves `now()` forward without waiting (only between passes). */
  jump(ms: number): void;
}

/** System timers whose `now()` can jump forward (cooldowns expire at once). */
export function createJumpTimers(): JumpTimers {
  let offset = 0;
  return {
    now: () => systemTimers.now() + offset,
    elapsed: (since) => systemTimers.now() + offset - since,
    timeout: (ms, signal) => systemTimers.timeout(ms, signal),
    jump(ms) {
      offset += ms;
    },
  };
}

export interface JumpClock {
  (): number;
  jump(ms: number): void;
}

/** A wall clock for task records that can jump forward (task timeouts without waiting). */
export function createJumpClock(): JumpClock {
  let offset = 0;
  const clock = (() => Date.now() + offset) as JumpClock;
  clock.jump = (ms) => {
    offset += ms;
  };
  return clock;
}
