/**
 * The outage hold: when a pass finds the relay unreachable (its lease or receive failed with a
 * network failure or a timeout, not a refusal), sends wait for `unreachableHoldMs` instead of each
 * trying the network — the passes keep probing with their receive, and the first request that
 * reaches the relay ends the hold. (A failed send starts no hold: the caller's own retry is tried.) An operation whose send waits reports it deferred (its envelope queued, retried
 * by the passes), exactly as when a pass's budget runs out. Measured in `npm run bench` (`outage`).
 */
import type { TaskError } from "../protocol/errors.ts";
import { unreachableHoldMs } from "../protocol/limits.ts";
import type { CoreContext } from "./context.ts";

/** Failures that say the relay could not be reached at all (not a refusal of one request). */
const UNREACHABLE: ReadonlySet<string> = new Set(["RELAY_UNAVAILABLE", "RELAY_TIMEOUT"]);

export function showsUnreachable(error: TaskError): boolean {
  return UNREACHABLE.has(error.code);
}

/** Notes a pass's failed lease or receive: one that found the relay unreachable starts (or extends) the hold. */
export function noteFailure(context: CoreContext, error: TaskError): void {
  if (showsUnreachable(error)) context.unreachableAt = context.timers.now();
}

/** A request reached the relay: the hold ends. */
export function noteReached(context: CoreContext): void {
  context.unreachableAt = undefined;
}

/** Until when sends wait, or undefined when the relay was not found unreachable just now. */
export function outageHold(context: CoreContext): number | undefined {
  const since = context.unreachableAt;
  if (since === undefined) return undefined;
  const until = since + unreachableHoldMs;
  return context.timers.now() < until ? until : undefined;
}
