/**
 * What the fault proxy observes: per operation the requests seen, forwarded and faulted, the
 * requests in flight (and the most at once), the arrival log, and which clients disconnected
 * before their answer. `snapshot()` is what `stats()` returns.
 */
import type { OperationStats, ProxyRequest, ProxyStats } from "./types.ts";

export interface Observation {
  /** The counters of `operation` (created at zero on first use). */
  counter(operation: string): OperationStats;
  /** The next 1-based arrival number. */
  nextSeq(): number;
  /** A request arrived at the handler / the handler returned. */
  enter(): void;
  leave(): void;
  /** Logs an arrived request and counts it seen. */
  record(request: ProxyRequest): void;
  /** The client of request `seq` disconnected before the proxy answered it. */
  clientGone(seq: number): void;
  snapshot(held: number): ProxyStats;
  /** Zeroes the counters and the log; `maxInFlight` restarts from the current `inFlight`. */
  reset(): void;
  requests(): readonly ProxyRequest[];
}

export function createObservation(): Observation {
  let operations: Record<string, OperationStats> = {};
  let log: ProxyRequest[] = [];
  /** Arrival numbers of requests whose client disconnected before the answer, and when. */
  const gone = new Map<number, number>();
  let seq = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const counter = (operation: string): OperationStats => (operations[operation] ??= { seen: 0, forwarded: 0, faulted: 0 });
  return {
    counter,
    nextSeq: () => ++seq,
    enter() {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
    },
    leave() {
      inFlight -= 1;
    },
    record(request) {
      log.push(request);
      counter(request.operation).seen += 1;
    },
    clientGone(seq) {
      gone.set(seq, Date.now());
    },
    snapshot(held) {
      const copy: Record<string, OperationStats> = {};
      const total: OperationStats = { seen: 0, forwarded: 0, faulted: 0 };
      for (const [name, value] of Object.entries(operations)) {
        copy[name] = { ...value };
        total.seen += value.seen;
        total.forwarded += value.forwarded;
        total.faulted += value.faulted;
      }
      return { operations: copy, total, inFlight, maxInFlight, held };
    },
    reset() {
      operations = {};
      log = [];
      gone.clear();
      maxInFlight = inFlight;
    },
    requests: () => log.map((request) => (gone.has(request.seq) ? { ...request, clientGoneAt: gone.get(request.seq) } : request)),
  };
}
