/**
 * `pi-tasks/conformance`: the relay conformance suite, in-process, on Node and Bun alike:
 * `runConformance({ url, features, onOutput })` runs every check against a relay URL and counts the
 * results (what `pi-tasks conformance URL` prints); `conformanceChecks(features)` is the list of
 * checks as data, to run them your own way (each with `run(kit)`, the kit from `createKit`, and
 * `isRequired` telling which to skip). See docs/wire.md ("Checking a relay") and docs/library.md.
 */
export { runConformance, parseFeatures, type CheckFailure, type ConformanceRequest, type ConformanceResult } from "./runner.ts";
export { conformanceChecks } from "./checks.ts";
export {
  ANY_ADDITION,
  checkTitle,
  createKit,
  expectWireError,
  expectWireValue,
  isRequired,
  type ConformanceCheck,
  type ConformanceKit,
  type ErrorExpectation,
  type ReplyLike,
} from "./kit.ts";
export { CONFORMANCE_MAX_CONCURRENT_CHECKS, CONFORMANCE_TEST_TIMEOUT_MS } from "./timing.ts";
