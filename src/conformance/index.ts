/**
 * `pi-tasks/conformance`: the relay conformance suite. `runConformance` runs it in a `bun test`
 * child against a relay URL and counts the results (what `pi-tasks conformance URL` prints);
 * `runRelayConformance` registers the same tests inside your own `bun test` file. See docs/wire.md
 * ("Checking a relay") and docs/library.md.
 */
export { runConformance, parseFeatures, type ConformanceRequest, type ConformanceResult } from "./runner.ts";
export { runRelayConformance, type ConformanceOptions } from "./suite.ts";
