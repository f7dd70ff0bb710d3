/**
 * TigerStyle assertions for the store's own bookkeeping. A broken invariant is a bug, never a
 * client's fault: it throws `INVARIANT_VIOLATED`, which the relay never puts on the wire (it
 * answers 503 `RELAY_UNAVAILABLE`, as for any unexpected failure).
 *
 * Callers test the condition themselves (`if (bad) throw violation(…)`), so the details object
 * is built only when the invariant is broken, never on the hot path.
 */
import { TaskError } from "../../protocol/errors.ts";

export function violation(rule: string, details: Record<string, unknown>): TaskError {
  return new TaskError("INVARIANT_VIOLATED", { details: { rule, ...details } });
}
