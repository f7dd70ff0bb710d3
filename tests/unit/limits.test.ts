import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import * as limits from "../../src/protocol/limits.ts";
import * as names from "../../src/protocol/names.ts";

const ROOT = join(import.meta.dir, "..", "..");
const SOURCE_DIRS = ["src", "extensions"];
/** Values this small are too common (indexes, small counts) to attribute to a limit. */
const SMALLEST_CHECKED = 100;

function sourceFiles(dir: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

/** Removes comments and plain string literals, keeping line numbers. */
function stripCommentsAndStrings(text: string): string {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, (comment) => comment.replace(/[^\n]/g, ""))
    .replace(/"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'/g, '""')
    .replace(/(^|[^:])\/\/.*$/gm, "$1");
}

describe("limits", () => {
  test("the seed's bounds have their values", () => {
    expect([limits.maxInFlightRequests, limits.reservedRequestSlots]).toEqual([8, 2]);
    expect([limits.maxScopedSendsPerPass, limits.maxOldWorkSendsPerPass, limits.maxAckAttemptsPerPass]).toEqual([56, 8, 48]);
    expect([limits.maxReceivePageItems, limits.maxReceivePageBytes, limits.maxFetchedUnacknowledgedDeliveries]).toEqual([
      50,
      256 * 1024,
      200,
    ]);
    expect([limits.passDeadlineMs, limits.passSliceMs, limits.capacityCooldownMs]).toEqual([2000, 250, 5000]);
    expect([limits.maxStoreRecords, limits.maxStoreEncodedBytes]).toEqual([16_384, 32 * 1024 * 1024]);
    expect([limits.activePollIntervalMs, limits.idlePollIntervalMs, limits.waitBackoffInitialMs, limits.maxWaitBackoffMs]).toEqual([
      1000, 5000, 250, 2000,
    ]);
    expect([limits.defaultRequestDeadlineMs, limits.minRequestDeadlineMs, limits.maxRequestDeadlineMs]).toEqual([12_000, 1, 15_000]);
    expect([limits.maxRelayPayloadBytes, limits.maxRequestBodyBytes, limits.maxResponseBodyBytes]).toEqual([
      48 * 1024,
      64 * 1024,
      300 * 1024,
    ]);
    expect([limits.maxTaskTextChars, limits.defaultLeaseMs, limits.maxLeaseMs]).toEqual([16 * 1024, 60_000, 300_000]);
    expect([limits.maxRelayActiveItems, limits.maxRelayActiveBytes, limits.maxRelayMailboxItems, limits.maxRelayMailboxBytes]).toEqual([
      4096,
      64 * 1024 * 1024,
      256,
      8 * 1024 * 1024,
    ]);
    expect([limits.maxRelayReceipts, limits.maxRelayReceiptBytes, limits.relayReceiptRetentionMs, limits.maxRelayRegistrations]).toEqual([
      50_000,
      8 * 1024 * 1024,
      15 * 60 * 1000,
      2048,
    ]);
    expect([limits.maxEnvelopeFutureSkewMs, limits.maxEnvelopeAgeMs, limits.relayBodyReadDeadlineMs]).toEqual([30_000, 150_000, 5000]);
  });

  test("no other source file repeats a limit's number", () => {
    const values = new Set(
      [...Object.values(limits), ...Object.values(names)]
        .filter((value): value is number => typeof value === "number" && value >= SMALLEST_CHECKED)
        .map(String),
    );
    const offenders: string[] = [];
    // limits.ts and names.ts define them; http.ts holds HTTP status codes, protocol constants that happen to
    // share values with some limits (200, 400, …).
    const exempt = new Set(["limits.ts", "names.ts", "http.ts"].map((name) => join(ROOT, "src", "protocol", name)));
    for (const file of SOURCE_DIRS.flatMap((dir) => sourceFiles(join(ROOT, dir)))) {
      if (exempt.has(file)) continue;
      const lines = stripCommentsAndStrings(readFileSync(file, "utf8")).split("\n");
      lines.forEach((line, index) => {
        // HTTP status codes are protocol constants, not limits.
        const checked = line.replace(/\b(status|httpStatus)\b\s*(:|===|!==|=)\s*\d+/g, "");
        for (const match of checked.matchAll(/(?<![\w.])\d[\d_]*(?![\w.])/g)) {
          const value = match[0].replaceAll("_", "");
          if (values.has(value)) offenders.push(`${relative(ROOT, file)}:${index + 1}: ${value}`);
        }
      });
    }
    expect(offenders).toEqual([]);
  });

  test("limits.ts holds bounds only: every export a finite number, named in camelCase (the units KiB and MiB aside)", () => {
    const misnamed = Object.entries(limits)
      .filter(([name, value]) => typeof value !== "number" || !Number.isFinite(value) || !/^[a-z][A-Za-z0-9]*$/.test(name))
      .map(([name]) => name)
      .filter((name) => name !== "KiB" && name !== "MiB");
    expect(misnamed).toEqual([]);
  });

  test("one naming order: a bound's kind (max, min, default) comes first, its unit last", () => {
    const kindInside = Object.keys(limits).filter((name) => /.(Max|Min|Default)(?=[A-Z]|$)/.test(name));
    expect(kindInside).toEqual([]);
  });

  test("names.ts holds no bound: its exports are words and defaults in UPPER_SNAKE, none also in limits.ts", () => {
    const entries = Object.entries(names);
    expect(entries.length).toBeGreaterThan(0);
    expect(entries.map(([name]) => name).filter((name) => !/^[A-Z][A-Z0-9_]*$/.test(name))).toEqual([]);
    expect(entries.map(([name]) => name).filter((name) => name in limits)).toEqual([]);
  });
});
