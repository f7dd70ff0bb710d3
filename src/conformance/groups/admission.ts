/** Bounded admission: `relayMaxConcurrentRequests` slots, then 503 RELAY_CAPACITY with `retryAfterMs`. */
import assert from "node:assert/strict";
import { KiB, relayBodyReadDeadlineMs, relayMaxConcurrentRequests, relayOverloadRetryAfterMs } from "../../protocol/limits.ts";
import { type ConformanceCheck, equal, idsOf, inGroup, sleep } from "../kit.ts";
import { TEST_SLACK_MS } from "../timing.ts";
import { getProfile, openRawRequest, type RawRequest } from "../wire-client.ts";

export const admissionChecks: readonly ConformanceCheck[] = inGroup("bounded admission", [
  {
    name: "relayMaxConcurrentRequests slow requests hold every slot: the next gets 503 RELAY_CAPACITY with retryAfterMs",
    serial: true,
    timeoutMs: relayBodyReadDeadlineMs + TEST_SLACK_MS,
    run: async ({ baseUrl, expectError, expectValue, session }) => {
      const a = await session("admission");
      const held: RawRequest[] = [];
      const hold = () => {
        const request = openRawRequest(baseUrl, { contentLength: KiB, body: "{" });
        held.push(request);
        return request.sent;
      };
      const live = () => held.filter((request) => !request.closed());
      try {
        // Fill every slot with a request stuck in its body; a refused filler is replaced.
        let refused: Awaited<ReturnType<typeof getProfile>> | undefined;
        for (let attempt = 0; attempt < 10 && refused === undefined; attempt += 1) {
          await Promise.all(Array.from({ length: relayMaxConcurrentRequests - live().length }, hold));
          await sleep(150);
          const probe = await getProfile(baseUrl);
          if (probe.status !== 200 && live().length === relayMaxConcurrentRequests) refused = probe;
        }
        assert.notEqual(refused, undefined, "the slow requests never filled the admission slots");
        assert.equal(live().length, relayMaxConcurrentRequests);
        const error = expectError(refused!, "RELAY_CAPACITY");
        assert.equal(error.retryAfterMs, relayOverloadRetryAfterMs);
        expectError(await a.call("health"), "RELAY_CAPACITY");
        // One slot fewer held: requests are worked on again while the others still hold theirs.
        live()[0]!.close();
        let served = false;
        for (let attempt = 0; attempt < 50 && !served; attempt += 1) {
          served = (await getProfile(baseUrl)).status === 200;
          if (!served) await sleep(20);
        }
        equal(served, true, "closing one slow request did not free its slot");
        assert.equal(live().length, relayMaxConcurrentRequests - 1);
        expectValue(await a.call("health"), "health");
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
    },
  },
]);
