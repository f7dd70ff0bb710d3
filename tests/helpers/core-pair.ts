/**
 * Two (or more) TaskCores — an origin and a worker — on a real relay URL (optionally through the
 * fault proxy), with in-memory presentation hosts. `settle()` runs passes on every core until
 * nothing is pending or a bound is reached.
 */
import { createTaskCore, type TaskCore, coreInternals } from "../../src/core/task-core.ts";
import type { TaskTimers } from "../../src/core/timers.ts";
import { createRelaySession } from "../../src/relay-client/session.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { createMemoryHost, type MemoryHost } from "../../kit/memory-host.ts";

export interface Party {
  readonly name: string;
  readonly core: TaskCore;
  readonly host: MemoryHost;
}

export interface PartyOptions {
  readonly url: string;
  readonly name?: string;
  readonly requestTimeoutMs?: number;
  readonly timers?: TaskTimers;
  readonly clock?: () => number;
}

let serial = 0;

export async function createParty(options: PartyOptions): Promise<Party> {
  serial += 1;
  const name = options.name ?? `party-${process.pid}-${serial}-${crypto.randomUUID().slice(0, 8)}`;
  const host = createMemoryHost();
  const core = createTaskCore({
    store: createTaskStore(),
    session: createRelaySession({ url: options.url, callerSession: name, ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }) }),
    host,
    ...(options.timers === undefined ? {} : { timers: options.timers }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
  });
  await core.connect();
  return { name, core, host };
}

export interface Pair {
  readonly origin: Party;
  readonly worker: Party;
  /** Runs passes on all parties until nothing is pending (or `maxRounds`); returns the rounds used. */
  settle(maxRounds?: number): Promise<number>;
  close(): Promise<void>;
}

export async function createPair(options: PartyOptions & { workerUrl?: string }): Promise<Pair> {
  const origin = await createParty({ ...options, name: undefined });
  const worker = await createParty({ ...options, url: options.workerUrl ?? options.url, name: undefined });
  return {
    origin,
    worker,
    settle: (maxRounds) => settle([origin, worker], maxRounds),
    async close() {
      await Promise.allSettled([origin.core.close(), worker.core.close()]);
      coreInternals(origin.core).session.close();
      coreInternals(worker.core).session.close();
    },
  };
}

/** Passes on every party until none has pending work, errors included (they are swallowed per pass). */
export async function settle(parties: readonly Party[], maxRounds = 20): Promise<number> {
  for (let round = 1; round <= maxRounds; round += 1) {
    for (const party of parties) {
      if (party.core.closed()) continue;
      await party.core.refresh().catch(() => undefined);
    }
    if (parties.every((party) => party.core.closed() || !party.core.hasPendingWork())) return round;
  }
  return maxRounds;
}
