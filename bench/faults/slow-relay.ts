/**
 * Fault: a relay slower than the request deadline. The first three sends and the worker's first
 * two receives are forwarded only after the request deadline has passed: the client gives up
 * (`RELAY_TIMEOUT`, may have been delivered) while the late sends still reach the relay.
 *
 * Proves that a timed-out request is treated as uncertain, not failed: the retries meet the
 * envelopes the relay accepted late (`duplicate:true`) and nothing is lost or shown twice.
 */
import { REQUEST_TIMEOUT_MS } from "./shared/rig.ts";
import { fromEndpoint, ruleFault } from "./shared/scenario.ts";

export const slowRelay = ruleFault(
  "slow relay past the deadline",
  `the first 3 sends and the worker's first 2 receives are forwarded after ${REQUEST_TIMEOUT_MS + 200} ms, past the ${REQUEST_TIMEOUT_MS} ms request deadline (\`RELAY_TIMEOUT\`, may have been delivered); the late sends still reach the relay.`,
  (rig) => [
    { operation: "send", kind: "delay", ms: REQUEST_TIMEOUT_MS + 200, times: 3 },
    { operation: "receive", kind: "delay", ms: REQUEST_TIMEOUT_MS + 200, times: 2, when: fromEndpoint(rig.worker.core().endpoint()!) },
  ],
);
