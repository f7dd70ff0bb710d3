/**
 * Fault: relay mail refused for capacity. Every send is refused `RELAY_CAPACITY` with a
 * `retryAfterMs` (503 with a relay body) until six refusals were served, while passes run every
 * second of jump-timer time.
 *
 * Proves that the client honours `retryAfterMs`: a refused envelope is never sent again before
 * its retry time has passed (timed on the jump timers by a fetch wrapper that records each send
 * attempt), the client sees every refusal the proxy served, and everything still arrives once.
 */
import { requestEnvelopes } from "../../src/protocol/wire.ts";
import { activePollIntervalMs, capacityCooldownMs } from "../../src/protocol/limits.ts";
import type { JumpTimers } from "../../testkit/jump-timers.ts";
import { account } from "./shared/accounting.ts";
import { createLedger } from "./shared/ledger.ts";
import { closeRig, type FetchWrap, makeRig } from "./shared/rig.ts";
import type { FaultSpec } from "./shared/scenario.ts";
import { workload } from "./shared/workload.ts";

/** Send attempts with the delivery-budget (jump-timer) time they started at and whether capacity refused them. */
interface SendAttempt {
  readonly envelopeId: string;
  readonly at: number;
  capacity: boolean;
}

function sendRecorder(attempts: SendAttempt[]): (timers: JumpTimers) => FetchWrap {
  return (timers) => (inner) =>
    (async (input: string | URL | Request, init?: RequestInit) => {
      const text = input instanceof Request ? await input.clone().text() : typeof init?.body === "string" ? init.body : "";
      // One attempt per envelope a send carries (a send-batch-v1 request carries several).
      let sent: SendAttempt[] = [];
      try {
        const body = JSON.parse(text) as { operation?: string };
        if (body.operation === "send")
          sent = requestEnvelopes(body)
            .map((envelope) => envelope.envelopeId)
            .filter((envelopeId): envelopeId is string => typeof envelopeId === "string")
            .map((envelopeId) => ({ envelopeId, at: timers.now(), capacity: false }));
      } catch {
        // not a relay POST
      }
      attempts.push(...sent);
      const response = await inner(input, init);
      if (sent.length > 0) {
        const capacity = (await response.clone().text()).includes('"RELAY_CAPACITY"');
        for (const attempt of sent) attempt.capacity = capacity;
      }
      return response;
    }) as typeof fetch;
}

export const capacityRetryAfter: FaultSpec = {
  name: "capacity with retryAfterMs",
  injection: `every send is refused \`RELAY_CAPACITY\` with \`retryAfterMs\` = ${capacityCooldownMs + activePollIntervalMs} ms (503, relay body) until 6 refusals were served; passes run every 1 s of jump-timer time; a send of a refused envelope started (jump-timer time) before its retryAfterMs elapsed counts as an early retry.`,
  async run({ relay, tasks }) {
    const attempts: SendAttempt[] = [];
    const rig = await makeRig(relay, false, sendRecorder(attempts));
    try {
      const retryAfterMs = capacityCooldownMs + activePollIntervalMs;
      const handle = rig.proxy.push({ operation: "send", kind: "capacity", retryAfterMs, times: 6 });
      const ledger = createLedger();
      const drained = await workload(
        rig,
        ledger,
        tasks,
        () => undefined,
        async () => {
          rig.timers.jump(activePollIntervalMs);
          for (const party of [rig.origin, rig.worker]) await party.refresh().catch(() => undefined);
        },
      );
      // A refused envelope may be sent again only retryAfterMs after the refused attempt started.
      let early = 0;
      const refusedAt = new Map<string, number>();
      for (const attempt of attempts) {
        const refused = refusedAt.get(attempt.envelopeId);
        if (refused !== undefined && attempt.at < refused + retryAfterMs) early += 1;
        if (attempt.capacity) refusedAt.set(attempt.envelopeId, attempt.at);
      }
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        handle.hits(),
        [
          { name: "no re-send before retryAfterMs", ok: early === 0 },
          { name: "refusals seen by the client", ok: attempts.filter((attempt) => attempt.capacity).length === handle.hits() },
          { name: "drained", ok: drained },
        ],
        `${early} early re-sends of ${refusedAt.size} refused envelopes`,
      );
    } finally {
      await closeRig(rig);
    }
  },
};
