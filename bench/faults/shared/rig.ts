/**
 * The two parties of every fault row and the rig around them: an origin and a worker TaskCore,
 * each on an in-memory Pi host (`testkit/memory-host.ts`), both talking to the real relay through
 * one fault proxy (`testkit/fault-proxy.ts`), on jump timers and a jump clock so that cooldowns,
 * the busy minute and timeouts pass without waiting. A fault scenario makes a rig, injects its
 * fault, runs its workload and closes the rig.
 */
import { createConfiguredTaskCore } from "../../../src/core/configured.ts";
import type { TaskCore } from "../../../src/core/task-core.ts";
import type { RelayProcess } from "../../../src/demo/relay-process.ts";
import { introduce } from "../../../testkit/introduce.ts";
import { createFaultProxy, type FaultProxy } from "../../../testkit/fault-proxy.ts";
import { createJumpClock, createJumpTimers, type JumpClock, type JumpTimers } from "../../../testkit/jump-timers.ts";
import { createMemoryHost, type MemoryHost } from "../../../testkit/memory-host.ts";
import { createObservedParty } from "../../../testkit/observed-party.ts";
import { closeParties } from "../../../testkit/party.ts";
import { type ObservedReply, observingFetch } from "../../../testkit/observing-fetch.ts";

/** Request deadline of every party (a slow relay is slower than this). */
export const REQUEST_TIMEOUT_MS = 400;

export interface Party {
  readonly label: string;
  readonly host: MemoryHost;
  readonly replies: ObservedReply[];
  core(): TaskCore;
  refresh(): Promise<unknown>;
  close(): Promise<void>;
}

export interface Rig {
  readonly proxy: FaultProxy;
  readonly timers: JumpTimers;
  readonly clock: JumpClock;
  readonly origin: Party;
  readonly worker: Party;
}

let serial = 0;
const sessionName = (label: string) => `faults-${label}-${process.pid}-${(serial += 1)}-${crypto.randomUUID().slice(0, 8)}`;

export type FetchWrap = (inner: typeof fetch) => typeof fetch;

export async function plainParty(label: string, url: string, timers: JumpTimers, clock: JumpClock, wrap?: FetchWrap): Promise<Party> {
  const party = await createObservedParty({
    url,
    name: sessionName(label),
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    timers,
    clock,
    ...(wrap === undefined ? {} : { wrapFetch: wrap }),
  });
  return {
    label,
    host: party.host,
    replies: party.replies,
    core: () => party.core,
    refresh: () => party.core.refresh(),
    close: () => closeParties([party]),
  };
}

async function configuredParty(label: string, url: string, timers: JumpTimers, clock: JumpClock): Promise<Party> {
  const replies: ObservedReply[] = [];
  const host = createMemoryHost();
  const configured = createConfiguredTaskCore({
    url,
    callerSession: sessionName(label),
    fetch: observingFetch(replies),
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    host,
    timers,
    clock,
  });
  await configured.run((core) => core.connect());
  return {
    label,
    host,
    replies,
    core: () => configured.current(),
    async refresh() {
      await configured.settled();
      return configured.refresh();
    },
    close: () => configured.close(),
  };
}

/**
 * The worker proves its endpoint to the origin (src/core/proofs.ts: a hello, the worker's pass
 * answering it, the origin's pass taking the proof) before any fault is injected, so that the
 * first assignment leaves with its createTask and the faults hit task mail, as they did before
 * proofs — not the hello round trip a first assignment to an unknown worker now waits for.
 */
export async function introduceParties(origin: Party, worker: Party): Promise<void> {
  await introduce(origin.core(), worker.core(), (core) => (core === origin.core() ? origin : worker).refresh());
}

export async function makeRig(relay: RelayProcess, configured = false, wrap?: (timers: JumpTimers) => FetchWrap): Promise<Rig> {
  const proxy = createFaultProxy({ target: relay.url });
  const timers = createJumpTimers();
  const clock = createJumpClock();
  const make = (label: string) =>
    configured ? configuredParty(label, proxy.url, timers, clock) : plainParty(label, proxy.url, timers, clock, wrap?.(timers));
  const origin = await make("origin");
  const worker = await make("worker");
  await introduceParties(origin, worker);
  return { proxy, timers, clock, origin, worker };
}

export async function closeRig(rig: Rig): Promise<void> {
  await rig.origin.close().catch(() => undefined);
  await rig.worker.close().catch(() => undefined);
  await rig.proxy.stop().catch(() => undefined);
}
