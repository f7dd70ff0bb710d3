/**
 * A TaskCore on a real relay URL with an in-memory presentation host and a transport that records
 * every relay request with the reply it got (`observingFetch`); and closing such parties.
 */
import { coreInternals, createTaskCore, type TaskCore } from "../src/core/task-core.ts";
import type { TaskTimers } from "../src/core/timers.ts";
import { createRelaySession } from "../src/relay-client/session.ts";
import { createTaskStore } from "../src/store/task-store.ts";
import { createMemoryHost, type MemoryHost } from "./memory-host.ts";
import { type ObservedReply, observingFetch } from "./observing-fetch.ts";

export interface ObservedParty {
  readonly name: string;
  readonly core: TaskCore;
  readonly host: MemoryHost;
  /** Every relay request of this party with the reply it got. */
  readonly replies: ObservedReply[];
}

export interface ObservedPartyOptions {
  readonly url: string;
  readonly name?: string;
  readonly requestTimeoutMs?: number;
  readonly timers?: TaskTimers;
  readonly clock?: () => number;
  readonly leaseMs?: number;
  /** Lease clock of the session (default `Date.now`). */
  readonly now?: () => number;
  /** Wraps the recording fetch (e.g. to fail requests before they leave). */
  readonly wrapFetch?: (inner: typeof fetch) => typeof fetch;
  /** Connect before returning (default true). */
  readonly connect?: boolean;
}

let partySerial = 0;

/** A TaskCore on a real relay URL with an in-memory host and a reply-recording transport. */
export async function createObservedParty(options: ObservedPartyOptions): Promise<ObservedParty> {
  partySerial += 1;
  const name = options.name ?? `fault-${process.pid}-${partySerial}-${crypto.randomUUID().slice(0, 8)}`;
  const replies: ObservedReply[] = [];
  const host = createMemoryHost();
  const recording = observingFetch(replies);
  const session = createRelaySession({
    url: options.url,
    callerSession: name,
    fetch: options.wrapFetch?.(recording) ?? recording,
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
  });
  if (options.connect !== false) await core.connect();
  return { name, core, host, replies };
}

/** Closes cores (draining them) and their sessions. */
export async function closeParties(parties: readonly { core: TaskCore }[]): Promise<void> {
  await Promise.allSettled(parties.map((party) => party.core.close()));
  for (const party of parties) coreInternals(party.core).session.close();
}
