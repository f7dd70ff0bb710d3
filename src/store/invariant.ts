/**
 * The typed error of a broken invariant. The row engine, the indexes and the core assert what they
 * assume with it, so a violation surfaces as `INVARIANT_VIOLATED` (and rolls the transaction back)
 * instead of silently corrupting state.
 */
import { TaskError } from "../protocol/errors.ts";

/** Throws the typed internal error of a broken invariant. */
export function invariant(condition: boolean, what: string, details: Record<string, unknown> = {}): asserts condition {
  if (!condition)
    throw new TaskError("INVARIANT_VIOLATED", { message: `invariant violated: ${what}`, details: { invariant: what, ...details } });
}
