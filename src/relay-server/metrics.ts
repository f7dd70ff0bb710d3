/**
 * The relay's metrics for a monitoring system (issue 40): `GET /metrics` answers them in the
 * Prometheus text format, kept by prom-client in a registry of this relay's own. What is there:
 * - the store's state, read once per scrape: registrations, sessions, queued envelopes and their
 *   bytes, receipts, parked watches, and (a shared store) round trips to it;
 * - every request by operation (a `volatile-v1` operation, or the route of a GET), counted and timed
 *   (a latency histogram), and every refusal by its wire code.
 * The route is guarded like the other operator routes (handler.ts: the relay's authentication and
 * its client gate). Metric names start with `pi_tasks_relay_`.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { msPerSecond } from "../protocol/limits.ts";
import type { StoreUsage } from "./store/store.ts";

/** The path of the metrics route. */
export const METRICS_PATH = "/metrics";
/** Upper bounds of the request latency histogram's buckets, in seconds (1 ms to 10 s: a held `watch` is the long tail). */
const LATENCY_BUCKETS_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const PREFIX = "pi_tasks_relay_";

export interface RelayMetrics {
  /** One request answered: its operation (or route), how long it took, in milliseconds. */
  request(operation: string, ms: number): void;
  /** One refusal, by its wire code. */
  refused(code: string): void;
  /** The metrics now, in the Prometheus text format. */
  text(): Promise<string>;
  readonly contentType: string;
}

/** The store gauges: each set from one `usage()` read per scrape. */
const STORE_GAUGES: readonly (readonly [Exclude<keyof StoreUsage, "roundTrips">, string, string])[] = [
  ["registrations", "registrations", "Endpoint registrations the relay holds."],
  ["sessions", "sessions", "Sessions with a live registration."],
  ["activeItems", "queued_envelopes", "Envelopes queued (accepted, not yet acknowledged)."],
  ["activeBytes", "queued_bytes", "Bytes of the queued envelopes."],
  ["receipts", "receipts", "Delivery receipts the relay keeps."],
  ["watching", "watches", "Watches parked, waiting for mail."],
];

export function createRelayMetrics(usage: () => Promise<StoreUsage>): RelayMetrics {
  const registry = new Registry();
  let scraped: Promise<StoreUsage> | undefined;
  // One read of the store per scrape, shared by every gauge's collect.
  const current = () => {
    scraped ??= usage().finally(() => {
      scraped = undefined;
    });
    return scraped;
  };
  for (const [field, name, help] of STORE_GAUGES) {
    new Gauge({
      name: `${PREFIX}${name}`,
      help,
      registers: [registry],
      async collect() {
        this.set((await current())[field]);
      },
    });
  }
  // Only a shared store makes round trips: labelled, so the memory store's relay has no such sample.
  new Gauge({
    name: `${PREFIX}store_round_trips`,
    help: "Round trips to the shared store so far (none for the memory store).",
    labelNames: ["store"],
    registers: [registry],
    async collect() {
      const trips = (await current()).roundTrips;
      if (trips !== undefined) this.set({ store: "shared" }, trips);
    },
  });
  const requests = new Counter({
    name: `${PREFIX}requests_total`,
    help: "Requests answered, by operation.",
    labelNames: ["operation"],
    registers: [registry],
  });
  const latency = new Histogram({
    name: `${PREFIX}request_duration_seconds`,
    help: "Time to answer a request, by operation.",
    labelNames: ["operation"],
    buckets: LATENCY_BUCKETS_SECONDS,
    registers: [registry],
  });
  const refusals = new Counter({
    name: `${PREFIX}refusals_total`,
    help: "Requests refused, by wire code.",
    labelNames: ["code"],
    registers: [registry],
  });
  return {
    request(operation, ms) {
      requests.inc({ operation });
      latency.observe({ operation }, ms / msPerSecond);
    },
    refused: (code) => refusals.inc({ code }),
    text: () => registry.metrics(),
    contentType: registry.contentType,
  };
}
