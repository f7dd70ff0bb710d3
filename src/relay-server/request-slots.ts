/**
 * Request slots: the relay works on at most `maxRelayConcurrentRequests` at once
 * and refuses more with `RELAY_CAPACITY` and `retryAfterMs`, instead of a per-client request
 * bucket (docs/wire.md).
 */
import { TaskError } from "../protocol/errors.ts";
import { maxRelayConcurrentRequests, relayOverloadRetryAfterMs } from "../protocol/limits.ts";

export interface RequestSlots {
  /** Takes a slot, or throws `RELAY_CAPACITY` with `retryAfterMs` when all are busy. */
  enter(): () => void;
  inFlight(): number;
}

export function createRequestSlots(limit = maxRelayConcurrentRequests): RequestSlots {
  let busy = 0;
  return {
    enter() {
      if (busy >= limit) {
        throw new TaskError("RELAY_CAPACITY", { details: { budget: "requests", retryAfterMs: relayOverloadRetryAfterMs } });
      }
      busy += 1;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        busy -= 1;
      };
    },
    inFlight: () => busy,
  };
}
