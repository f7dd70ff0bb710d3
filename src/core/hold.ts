/**
 * The configuration hold: after the relay refuses a request for a reason about configuration
 * (`RELAY_AUTH_REQUIRED`, `RELAY_PROFILE_REQUIRED`, `PEER_POLICY_REQUIRED`, …), this lifetime stops
 * all relay work for a bounded backoff (5 s doubling to 60 s) instead of resending every pass.
 * Nothing is quarantined or lost; the first success ends the hold.
 */
import { sendRefusal, type TaskError } from "../protocol/errors.ts";
import { configHoldInitialMs, configHoldMaxMs } from "../protocol/limits.ts";
import type { CoreContext } from "./context.ts";

export interface Hold {
  readonly error: TaskError;
  /** `timers.now()` when relay work may be tried again. */
  readonly until: number;
  readonly delayMs: number;
}

/** The hold in force now, if any. */
export function activeHold(context: CoreContext): Hold | undefined {
  const hold = context.hold;
  return hold !== undefined && hold.until > context.timers.now() ? hold : undefined;
}

/** Records a refusal; true when it was a configuration refusal (the hold starts or grows). */
export function noteRefusal(context: CoreContext, error: TaskError): boolean {
  if (sendRefusal(error) !== "hold") return false;
  const previous = context.hold;
  const delayMs = previous === undefined ? configHoldInitialMs : Math.min(previous.delayMs * 2, configHoldMaxMs);
  context.hold = { error, until: context.timers.now() + delayMs, delayMs };
  return true;
}

/** A request succeeded: the configuration works again. */
export function endHold(context: CoreContext): void {
  context.hold = undefined;
}
