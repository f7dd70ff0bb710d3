/**
 * Time bounds of the conformance suite itself (how long a check waits), not relay limits: those
 * are imported from src/protocol/limits.ts.
 */
import { msPerSecond, maxWatchWaitMs } from "../protocol/limits.ts";

/** Default deadline of one helper request; a check that needs a tighter bound passes `timeoutMs`. */
export const WIRE_TEST_TIMEOUT_MS = 10 * msPerSecond;
/** What a test allows on top of the longest wait it provokes (e.g. the body-read deadline). */
export const TEST_SLACK_MS = 10 * msPerSecond;
/** Deadline of a request that asks to wait long but must be answered at once. */
export const PROMPT_REPLY_MS = 5 * msPerSecond;
/** How far inside a time window a value is clearly inside (freshness edges). */
export const EDGE_MARGIN_MS = msPerSecond;
/**
 * A parked watch woken by its doorbell answers at least this long before its wait would have ended:
 * the doorbell rang (its latency is `npm run bench`'s delivery-watch figure, never a test's bound).
 */
export const DOORBELL_MARGIN_MS = 5 * msPerSecond;
/** A watch wait far longer than any answer in time: only a doorbell answers it before it elapses. */
export const LONG_WATCH_MS = 3 * msPerSecond;
/** Deadline of the doorbell check: its watch may wait `maxWatchWaitMs`, then the reply. */
export const WATCH_CHECK_TIMEOUT_MS = maxWatchWaitMs + 2 * PROMPT_REPLY_MS;
/** Deadline of one conformance check (a check's own `timeoutMs` replaces it). */
export const CONFORMANCE_TEST_TIMEOUT_MS = 30 * msPerSecond;
/**
 * How many non-serial checks run at once (a count of checks). A check keeps up to three requests in
 * flight (a fair-share check eight), so ten checks stay within a relay's admission slots
 * (`maxRelayConcurrentRequests`, 28; Wolfpack's 24) even when they line up: at twenty, a slow run
 * (a loaded machine, a relay on Redis) saw connects refused RELAY_CAPACITY by the suite's own load.
 */
export const CONFORMANCE_MAX_CONCURRENT_CHECKS = 10;
