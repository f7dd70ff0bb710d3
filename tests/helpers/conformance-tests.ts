/**
 * The relay conformance checks (src/conformance/) as bun tests: one `describe` per group under
 * "volatile-v1 relay conformance", each check a `test.concurrent` — or a plain `test` when the
 * check is serial, or `test.skip` when the run does not require its addition — with the check's
 * deadline. The kit (the relay's epoch) is read in a `beforeAll`, once the relay's URL is known.
 */
import { beforeAll, describe, test } from "bun:test";
import { conformanceChecks } from "../../src/conformance/checks.ts";
import { type ConformanceCheck, type ConformanceKit, createKit, isRequired } from "../../src/conformance/kit.ts";
import { CONFORMANCE_TEST_TIMEOUT_MS } from "../../src/conformance/timing.ts";

function byGroup(checks: readonly ConformanceCheck[]): Map<string, ConformanceCheck[]> {
  const groups = new Map<string, ConformanceCheck[]>();
  for (const check of checks) groups.set(check.group, [...(groups.get(check.group) ?? []), check]);
  return groups;
}

/** Registers every check against the relay at `getBaseUrl()` (read when the tests start), requiring `features`. */
export function describeConformance(getBaseUrl: () => string, features: readonly string[]): void {
  describe("volatile-v1 relay conformance", () => {
    let kit: ConformanceKit | undefined;
    beforeAll(async () => {
      kit = await createKit(getBaseUrl(), features);
    });
    for (const [group, checks] of byGroup(conformanceChecks(features))) {
      describe(group, () => {
        for (const check of checks) {
          const register = !isRequired(check, features) ? test.skip : check.serial === true ? test : test.concurrent;
          register(check.name, () => check.run(kit!), check.timeoutMs ?? CONFORMANCE_TEST_TIMEOUT_MS);
        }
      });
    }
  });
}
