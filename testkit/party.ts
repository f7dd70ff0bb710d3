/**
 * A party: a TaskCore on a real relay URL with an in-memory presentation host (tests and bench
 * drive both sides of a task this way); and closing parties (their cores, then their sessions).
 */
import { coreInternals, createTaskCore, type TaskCore } from "../src/core/task-core.ts";
import type { TaskTimers } from "../src/core/timers.ts";
import type { TrustOptions } from "../src/core/trust.ts";
import { createVolatileTaskSession } from "../src/relay-client/session.ts";
import { createTaskStore } from "../src/store/task-store.ts";
import { createMemoryHost, type MemoryHost } from "./memory-host.ts";

export interface Party {
  readonly name: string;
  readonly core: TaskCore;
  readonly host: MemoryHost;
}

export interface PartyOptions {
  readonly url: string;
  /** The session name (default: unique per party). */
  readonly name?: string;
  readonly requestTimeoutMs?: number;
  readonly timers?: TaskTimers;
  readonly clock?: () => number;
  readonly leaseMs?: number;
  /** Lease clock of the session (default `Date.now`). */
  readonly now?: () => number;
  /** The session's fetch (default the global one). */
  readonly fetch?: typeof fetch;
  /** Connect before returning (default true). */
  readonly connect?: boolean;
  /** Identity and peers (default: this process's in-memory identity, trusting only itself). */
  readonly trust?: TrustOptions;
  /** The delegation depth cap (default the core's). */
  readonly maxDepth?: number;
  /** See TaskCoreOptions.maxActiveTasks. */
  readonly maxActiveTasks?: number;
}

let serial = 0;

export async function createParty(options: PartyOptions): Promise<Party> {
  serial += 1;
  const name = options.name ?? `party-${process.pid}-${serial}-${crypto.randomUUID().slice(0, 8)}`;
  const host = createMemoryHost();
  const session = createVolatileTaskSession({
    url: options.url,
    callerSession: name,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }),
    ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  const core = createTaskCore({
    store: createTaskStore(),
    session,
    host,
    ...(options.timers === undefined ? {} : { timers: options.timers }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.trust === undefined ? {} : { trust: options.trust }),
    ...(options.maxDepth === undefined ? {} : { maxDepth: options.maxDepth }),
    ...(options.maxActiveTasks === undefined ? {} : { maxActiveTasks: options.maxActiveTasks }),
  });
  if (options.connect !== false) await core.connect();
  return { name, core, host };
}

/** Closes cores (draining them), then their sessions. */
export async function closeParties(parties: readonly { core: TaskCore }[]): Promise<void> {
  await Promise.allSettled(parties.map((party) => party.core.close()));
  for (const party of parties) coreInternals(party.core).session.close();
}
