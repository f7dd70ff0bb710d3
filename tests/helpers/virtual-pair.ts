/**
 * An origin and a worker TaskCore on the in-memory relay fake and virtual timers (unit tests of
 * the core's budgets, deadlines and outbox rules), and a way to settle work while time advances.
 */
import { createTaskCore, type TaskCore } from "../../src/core/task-core.ts";
import { createVirtualTimers, type VirtualTimers } from "../../testkit/virtual-timers.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { createFakeRelay, type FakeRelay } from "./fake-relay.ts";
import { createMemoryHost, type MemoryHost } from "../../testkit/memory-host.ts";
import { introduce } from "../../testkit/introduce.ts";

export interface VirtualPair {
  timers: VirtualTimers;
  relay: FakeRelay;
  origin: TaskCore;
  worker: TaskCore;
  originHost: MemoryHost;
  workerHost: MemoryHost;
  /** The wall clock both cores stamp with (a fixed start, 1 ms per call). */
  clock: () => number;
  /** Moves the wall clock forward (what the origin judges a worker's silence by). */
  advanceWall: (ms: number) => void;
}

export async function virtualPair(): Promise<VirtualPair> {
  const timers = createVirtualTimers(1_000_000);
  const relay = createFakeRelay(timers);
  const originHost = createMemoryHost();
  const workerHost = createMemoryHost();
  let wall = Date.UTC(2026, 10, 30, 12);
  const clock = () => (wall += 1);
  const advanceWall = (ms: number) => void (wall += ms);
  const origin = createTaskCore({ store: createTaskStore(), session: relay.session("origin"), timers, clock, host: originHost });
  const worker = createTaskCore({ store: createTaskStore(), session: relay.session("worker"), timers, clock, host: workerHost });
  await origin.connect();
  await worker.connect();
  // The origin knows the worker's key at its endpoint, as after its first assignment (proofs.ts).
  await introduce(origin, worker, (core) => settleVirtually(timers, core.refresh()));
  // Tests count requests from here on.
  (relay.requests as unknown[]).length = 0;
  return { timers, relay, origin, worker, originHost, workerHost, clock, advanceWall };
}

/** Settles a promise while advancing virtual time in steps (up to `maxMs`). */
export async function settleVirtually<T>(timers: VirtualTimers, promise: Promise<T>, stepMs = 50, maxMs = 120_000): Promise<T> {
  let settled = false;
  const watched = promise.finally(() => {
    settled = true;
  });
  watched.catch(() => undefined);
  for (let spent = 0; !settled && spent < maxMs; spent += stepMs) await timers.advance(stepMs);
  return watched;
}
