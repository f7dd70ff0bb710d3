/**
 * Acceptance latency at 10 sends/s: the origin is the real extension stack (lifecycle, configured
 * core, scheduler and watch; `bench/lib/fake-pi.ts`) and each sample is one `createTask` (a 1 KiB
 * task text) from the call to its return with the relay's acceptance — what `agent_task_send`
 * reports. The worker is a registered endpoint that does not drain (its mailbox holds every sample).
 *
 * Task content goes only to an endpoint that proved which key holds it (src/core/proofs.ts), and a
 * raw relay session never answers the origin's hello, so the worker is a TaskCore over its own
 * session (testkit/party.ts, the origin's identity, no background passes): before the warm-up it runs
 * one pass to answer the origin's hello, the origin takes the proof in, and the worker never runs
 * another pass. Every timed create then leaves at once (`delivery: "accepted"`, checked), sealed to
 * the proven key: the figure stays the one round trip of an assignment to a known worker.
 *
 * Breakdown, sampled at the same rate between the creates: a bare `VolatileTaskSession.send` of a 1 KiB
 * envelope, and the same send as a raw `fetch` POST (the raw loopback POST the ratios compare
 * with). createTask = one send through the client + the core's own work (validation, store
 * transaction, envelope): the send's own target check is the only relay round trip.
 */
import { KiB, msPerSecond } from "../../src/protocol/limits.ts";
import { RELAY_ENDPOINT_PATH } from "../../src/protocol/names.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import type { CreateResult } from "../../src/core/task-core.ts";
import { homeTrust } from "../../src/core/home-trust.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { boundEndpoint, startFakePi } from "../lib/fake-pi.ts";
import { proveEndpoint, requireSentAtOnce } from "../lib/proofs.ts";
import { now, roundSummary, sleepUntil, type Summary, summarize } from "../lib/stats.ts";
import { benchName, boundSession, encodedForSend, envelopeWithText, filler, rawBinding } from "../lib/wire.ts";

const RATE_PER_SECOND = 10;
const SAMPLES = 100;
const QUICK_SAMPLES = 10;
const WARMUP_SENDS = 20;
const QUICK_WARMUP_SENDS = 3;
const TASK_TEXT_CHARS = KiB;

export interface AcceptanceResult {
  readonly ratePerSecond: number;
  readonly createTaskMs: Summary;
  readonly breakdown: {
    readonly sessionSendMs: Summary;
    readonly rawSendMs: Summary;
  };
  readonly failures: number;
}

type Bound = Awaited<ReturnType<typeof boundSession>>;
type RawBound = Awaited<ReturnType<typeof rawBinding>>;

/**
 * The breakdown probe between the creates: a bare `VolatileTaskSession.send` of the same text,
 * then that send as a raw `fetch` POST, each to its own sink; `record` adds their times.
 */
function breakdownProbe(
  relayUrl: string,
  sides: { readonly probe: Bound; readonly sink: Bound; readonly rawProbe: RawBound; readonly rawSink: Bound },
  text: string,
  times: { readonly sends: number[]; readonly raws: number[] },
): (record: boolean) => Promise<void> {
  const { probe, sink, rawProbe, rawSink } = sides;
  const rawBase = { operation: "send", ...rawProbe.base };
  return async (record) => {
    let at = now();
    await probe.session.send(encodedForSend(envelopeWithText(probe.endpoint, sink.endpoint, text)));
    if (record) times.sends.push(now() - at);
    const body = JSON.stringify({ ...rawBase, envelope: envelopeWithText(rawProbe.endpoint, rawSink.endpoint, text) });
    at = now();
    const response = await fetch(`${relayUrl}${RELAY_ENDPOINT_PATH}`, {
      method: "POST",
      body,
      headers: { "content-type": "application/json" },
    });
    await response.text();
    if (record) times.raws.push(now() - at);
  };
}

export async function measureAcceptance(options: { quick?: boolean } = {}): Promise<AcceptanceResult> {
  const quick = options.quick === true;
  const samples = quick ? QUICK_SAMPLES : SAMPLES;
  const warmup = quick ? QUICK_WARMUP_SENDS : WARMUP_SENDS;
  const relay = await startRelayProcess();
  const origin = startFakePi({ url: relay.url, logRequests: false });
  let worker: Party | undefined;
  // Two sinks: each mailbox holds at most maxRelayMailboxItems envelopes.
  const sink = await boundSession(relay.url, "acceptance-sink");
  const rawSink = await boundSession(relay.url, "acceptance-raw-sink");
  const probe = await boundSession(relay.url, "acceptance-probe");
  const rawProbe = await rawBinding(relay.url, "acceptance-raw-probe");
  try {
    await boundEndpoint(origin);
    // The worker: the origin's identity (one user, as two Pis sharing a home), its endpoint proven
    // to the origin by one pass of its own, then no pass again (its mailbox fills with the samples).
    worker = await createParty({ url: relay.url, name: benchName("acceptance-worker"), trust: homeTrust(origin.home) });
    const proving = worker;
    const to = proving.core.endpoint()!;
    await proveEndpoint(() => origin.core(), to, { pass: () => proving.core.refresh().then(() => origin.core().refresh()) });
    const text = filler(TASK_TEXT_CHARS);
    const created: number[] = [];
    const sends: number[] = [];
    const raws: number[] = [];
    let failures = 0;
    const createOnce = async (record: boolean) => {
      const at = now();
      let result: CreateResult;
      try {
        result = await origin.lifecycle.run((core) => core.createTask({ to, task: text }));
      } catch {
        failures += 1;
        return;
      }
      const elapsed = now() - at;
      requireSentAtOnce(result, "acceptance");
      if (record) created.push(elapsed);
    };
    const probeOnce = breakdownProbe(relay.url, { probe, sink, rawProbe, rawSink }, text, { sends, raws });
    for (let index = 0; index < warmup; index += 1) {
      await createOnce(false);
      await probeOnce(false);
    }
    const intervalMs = msPerSecond / RATE_PER_SECOND;
    const start = now() + intervalMs;
    for (let index = 0; index < samples; index += 1) {
      await sleepUntil(start + index * intervalMs);
      await createOnce(true);
      // The breakdown probes run half an interval later, never overlapping a create.
      await sleepUntil(start + index * intervalMs + intervalMs / 2);
      await probeOnce(true);
    }
    return {
      ratePerSecond: RATE_PER_SECOND,
      createTaskMs: roundSummary(summarize(created)),
      breakdown: { sessionSendMs: roundSummary(summarize(sends)), rawSendMs: roundSummary(summarize(raws)) },
      failures,
    };
  } finally {
    await origin.stop().catch(() => undefined);
    if (worker !== undefined) await closeParties([worker]);
    for (const side of [sink, rawSink, probe]) side.session.close();
    await relay.stop().catch(() => undefined);
  }
}
