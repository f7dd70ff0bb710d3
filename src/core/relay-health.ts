/**
 * What the last requests said about the relay, and what relay work must wait for because of it.
 * Two waits, one owner:
 * - the configuration hold: after a refusal about configuration (`RELAY_AUTH_REQUIRED`,
 *   `RELAY_PROFILE_REQUIRED`, `PEER_POLICY_REQUIRED`, …) all relay work waits a bounded backoff
 *   (`configHoldInitialMs` doubling to `maxConfigHoldMs`) instead of resending every pass. Nothing
 *   is quarantined or lost.
 * - the outage wait: when a pass finds the relay unreachable (its lease or receive failed with a
 *   network failure or a timeout, not a refusal), sends wait `outageWaitMs` instead of each
 *   trying the network; the passes keep probing with their receive. A failed send starts no outage
 *   wait: the caller's own retry is tried. An operation whose send waits reports it deferred (its
 *   envelope queued, retried by the passes). Measured in `npm run bench` (`outage`).
 * Any request the relay answered ends both (`answered`).
 */
import { sendRefusal, type TaskError } from "../protocol/errors.ts";
import { configHoldInitialMs, maxConfigHoldMs, outageWaitMs } from "../protocol/limits.ts";
import type { TaskTimers } from "./timers.ts";

export interface ConfigurationHold {
  readonly error: TaskError;
  /** `timers.now()` when relay work may be tried again. */
  readonly until: number;
  readonly delayMs: number;
}

export interface RelayHealth {
  /** The relay answered a request: the configuration works and the relay is reachable. */
  answered(): void;
  /**
   * A request failed. A configuration refusal starts (or doubles) the hold and returns true; when
   * `probe` (a pass's lease or receive), a failure that found the relay unreachable starts the outage wait.
   */
  failed(error: TaskError, how: { readonly probe: boolean }): boolean;
  /** The configuration hold in force now, if any. */
  hold(): ConfigurationHold | undefined;
  /** Until when sends wait for an outage, or undefined when the relay was not found unreachable just now. */
  outageUntil(): number | undefined;
}

/** Failures that say the relay could not be reached at all (not a refusal of one request). */
const UNREACHABLE: ReadonlySet<string> = new Set(["RELAY_UNAVAILABLE", "RELAY_TIMEOUT"]);

export function showsUnreachable(error: TaskError): boolean {
  return UNREACHABLE.has(error.code);
}

export function createRelayHealth(timers: TaskTimers): RelayHealth {
  let hold: ConfigurationHold | undefined;
  let unreachableAt: number | undefined;
  return {
    answered() {
      hold = undefined;
      unreachableAt = undefined;
    },
    failed(error, { probe }) {
      if (probe && showsUnreachable(error)) unreachableAt = timers.now();
      if (sendRefusal(error) !== "hold") return false;
      const delayMs = hold === undefined ? configHoldInitialMs : Math.min(hold.delayMs * 2, maxConfigHoldMs);
      hold = { error, until: timers.now() + delayMs, delayMs };
      return true;
    },
    hold() {
      return hold !== undefined && hold.until > timers.now() ? hold : undefined;
    },
    outageUntil() {
      if (unreachableAt === undefined) return undefined;
      const until = unreachableAt + outageWaitMs;
      return timers.now() < until ? until : undefined;
    },
  };
}
