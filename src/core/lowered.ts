/**
 * Settings that may only lower a limit (the depth cap, the fan-out caps): a whole number from `min`
 * to the limit; absent means the limit; anything else is `INVALID_CONFIGURATION`, naming the setting.
 */
import { TaskError } from "../protocol/errors.ts";

export function loweredLimit(value: number | undefined, limit: number, min: number, what: string, key: string): number {
  if (value === undefined) return limit;
  if (!Number.isInteger(value) || value < min || value > limit) {
    throw new TaskError("INVALID_CONFIGURATION", {
      message: `${what} must be a whole number from ${min} to ${limit} (it may only be lowered)`,
      details: { [key]: value },
    });
  }
  return value;
}
