/**
 * Bounded admission: a relay works on a bounded number of requests and refuses the next with 503
 * `RELAY_CAPACITY`. Wolfpack's relay refuses at its `wolfpackHttpSlots` pre-body slots without
 * `retryAfterMs`; ours admits `maxRelayConcurrentRequests` and names `retryAfterMs` (the strict check).
 */
import assert from "node:assert/strict";
import {
  KiB,
  relayBodyReadDeadlineMs,
  maxRelayConcurrentRequests,
  relayOverloadRetryAfterMs,
  wolfpackHttpSlots,
} from "../../protocol/limits.ts";
import { FEATURE_STRICT_ANSWERS } from "../../protocol/wire.ts";
import { type ConformanceCheck, type ConformanceKit, contains, equal, idsOf, inGroup, sleep } from "../kit.ts";
import { TEST_SLACK_MS } from "../timing.ts";
import { getProfile, openRawRequest, type RawRequest } from "../wire-client.ts";

/** What a full relay showed: how many slow requests it held, and the error of the refused probe. */
interface Full {
  readonly slots: number;
  readonly error: { readonly retryAfterMs?: number };
}

/** Holds slow requests (stuck in their body) until a probe is refused; a refused filler is replaced. */
async function fill(kit: ConformanceKit, held: RawRequest[]): Promise<Full> {
  const live = () => held.filter((request) => !request.closed());
  const hold = () => {
    const request = openRawRequest(kit.baseUrl, { contentLength: KiB, body: "{" });
    held.push(request);
    return request.sent;
  };
  for (let attempt = 0; attempt < 10; attempt += 1) {
    await Promise.all(Array.from({ length: maxRelayConcurrentRequests - live().length }, hold));
    await sleep(150);
    const probe = await getProfile(kit.baseUrl);
    if (probe.status !== 200) return { slots: live().length, error: kit.expectError(probe, "RELAY_CAPACITY") };
  }
  assert.fail("the slow requests never filled the admission slots");
}

/** Fills the slots, lets `judge` read them, frees one (served again), then all (everything served). */
async function admission(kit: ConformanceKit, judge: (full: Full) => void): Promise<void> {
  const a = await kit.session("admission");
  const held: RawRequest[] = [];
  try {
    const full = await fill(kit, held);
    judge(full);
    kit.expectError(await a.call("health"), "RELAY_CAPACITY");
    // One slot fewer held: requests are worked on again while the others still hold theirs.
    held.find((request) => !request.closed())!.close();
    let served = false;
    for (let attempt = 0; attempt < 50 && !served; attempt += 1) {
      served = (await getProfile(kit.baseUrl)).status === 200;
      if (!served) await sleep(20);
    }
    equal(served, true, "closing one slow request did not free its slot");
    kit.expectValue(await a.call("health"), "health");
  } finally {
    for (const request of held) request.close();
  }
  // Once all are closed, everything is served again.
  let recovered = false;
  for (let attempt = 0; attempt < 50 && !recovered; attempt += 1) {
    const replies = await Promise.all(Array.from({ length: 4 }, () => a.call("health")));
    recovered = replies.every((reply) => reply.status === 200);
    if (!recovered) await sleep(20);
  }
  assert.equal(recovered, true);
  const { envelope } = await a.sendOk(a.endpoint);
  assert.deepEqual(idsOf(await a.drain()), [envelope.envelopeId]);
}

export const admissionChecks: readonly ConformanceCheck[] = inGroup("bounded admission", [
  {
    name: `slow requests hold every slot (${wolfpackHttpSlots} or ${maxRelayConcurrentRequests}): the next gets 503 RELAY_CAPACITY; a freed slot serves again`,
    serial: true,
    timeoutMs: relayBodyReadDeadlineMs + TEST_SLACK_MS,
    run: (kit) =>
      admission(kit, ({ slots, error }) => {
        contains([wolfpackHttpSlots, maxRelayConcurrentRequests], slots, "slots held when the relay refused");
        contains([undefined, relayOverloadRetryAfterMs], error.retryAfterMs, "retryAfterMs");
      }),
  },
  {
    name: `strict answers: exactly maxRelayConcurrentRequests (${maxRelayConcurrentRequests}) slots, refused with retryAfterMs ${relayOverloadRetryAfterMs}`,
    feature: FEATURE_STRICT_ANSWERS,
    serial: true,
    timeoutMs: relayBodyReadDeadlineMs + TEST_SLACK_MS,
    run: (kit) =>
      admission(kit, ({ slots, error }) => {
        equal(slots, maxRelayConcurrentRequests, "slots held when the relay refused");
        equal(error.retryAfterMs, relayOverloadRetryAfterMs, "retryAfterMs");
      }),
  },
]);
