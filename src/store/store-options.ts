/**
 * The TaskStore's options, checked once at creation: bounds can only be lowered (never above
 * `maxStoreRecords` / `maxStoreEncodedBytes`), and an option asking for persistence is refused by
 * name, since the store lives in RAM for one endpoint lifetime and must never pretend otherwise.
 */
import { TaskError } from "../protocol/errors.ts";
import { maxStoreEncodedBytes, maxStoreRecords } from "../protocol/limits.ts";
import type { StoreLimits } from "./kernel.ts";
import type { TaskStoreOptions } from "./store-types.ts";

const PERSISTENCE_OPTIONS = new Set([
  "path",
  "file",
  "filename",
  "dir",
  "directory",
  "database",
  "db",
  "persist",
  "persistence",
  "sqlite",
  "storage",
]);
const KNOWN_OPTIONS = new Set(["maxRecords", "maxEncodedBytes"]);

function lowerOnlyBound(name: string, value: unknown, ceiling: number): number {
  if (value === undefined) return ceiling;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1 || value > ceiling) {
    throw new TaskError("INVALID_CONFIGURATION", {
      message: `${name} must be an integer from 1 to ${ceiling} (bounds can only be lowered)`,
      details: { option: name, value, maximum: ceiling },
    });
  }
  return value;
}

export function resolveOptions(options: TaskStoreOptions | undefined): StoreLimits {
  const given = (options ?? {}) as Record<string, unknown>;
  for (const name of Object.keys(given)) {
    if (PERSISTENCE_OPTIONS.has(name)) throw new TaskError("PERSISTENCE_UNSUPPORTED", { details: { option: name } });
    if (!KNOWN_OPTIONS.has(name))
      throw new TaskError("INVALID_CONFIGURATION", { message: `unknown TaskStore option ${name}`, details: { option: name } });
  }
  return {
    maxRecords: lowerOnlyBound("maxRecords", given.maxRecords, maxStoreRecords),
    maxEncodedBytes: lowerOnlyBound("maxEncodedBytes", given.maxEncodedBytes, maxStoreEncodedBytes),
  };
}
