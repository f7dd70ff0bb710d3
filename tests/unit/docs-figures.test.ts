/**
 * Figures the README states that follow from limits.ts: they must match the limits (a changed
 * limit, or a hopeful number in the prose, fails here).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import {
  activePollIntervalMs,
  heartbeatIntervalMs,
  heartbeatSilenceMs,
  defaultLeaseMs,
  msPerSecond,
  orphanAfterMs,
  orphanProbeIntervalMs,
} from "../../src/protocol/limits.ts";

const README = readFileSync(join(REPO_ROOT, "README.md"), "utf8").replace(/\s+/g, " ");

describe("README figures", () => {
  test("a dead worker is orphaned within its lease plus the probes: the bound the README states", () => {
    // The registration outlives a crash by up to its lease; then `orphanAfterMs` of failed probes,
    // each up to `orphanProbeIntervalMs` apart.
    const worstSeconds = (defaultLeaseMs + orphanAfterMs + orphanProbeIntervalMs) / msPerSecond;
    expect(README).toContain(
      `within about ${worstSeconds} s (its lease lasts up to ${defaultLeaseMs / msPerSecond} s, then ${orphanAfterMs / msPerSecond}–${(orphanAfterMs + orphanProbeIntervalMs) / msPerSecond} s of probes`,
    );
    expect(README).not.toMatch(/orphaned` within about 15 s/);
  });

  test("a worker that reports is orphaned within its heartbeat silence plus one pass: the bound the README states", () => {
    const worstSeconds = (heartbeatSilenceMs + activePollIntervalMs) / msPerSecond;
    expect(README).toContain(
      `orphaned\` within about ${worstSeconds} s (its reports, a heartbeat every ${heartbeatIntervalMs / msPerSecond} s, stop for ${heartbeatSilenceMs / msPerSecond} s;`,
    );
  });
});
