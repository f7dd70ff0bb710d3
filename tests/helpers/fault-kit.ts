/**
 * Shared pieces of the fault, schedule and regression tests (tests/fault):
 *
 * - `faultSetup()` / `faultRig()`: per test, a fault proxy in front of the file's relay, jump
 *   timers and clock, and observed parties behind the proxy, all closed after the test;
 * - invariant checks: each event a model must see inserted exactly once and nothing else (by the
 *   presentation oracle), the ACK frontier below every pending delivery, one terminal winner.
 * Parties, drains, jump timers and async helpers come from kit/.
 */
import { introduce } from "../../testkit/introduce.ts";
import { expect } from "bun:test";
import type { TaskCore } from "../../src/core/task-core.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { TASK_EVENT_TYPES } from "../../src/protocol/events.ts";
import type { TaskStore } from "../../src/store/task-store.ts";
import { createFaultProxy, type FaultProxy } from "../../testkit/fault-proxy.ts";
import { createJumpClock, createJumpTimers, type JumpClock, type JumpTimers } from "../../testkit/jump-timers.ts";
import type { MemoryHost } from "../../testkit/memory-host.ts";
import { createObservedParty, type ObservedParty, type ObservedPartyOptions } from "../../testkit/observed-party.ts";
import { closeParties } from "../../testkit/party.ts";
import type { ObservedReply } from "../../testkit/observing-fetch.ts";
import { authorsFromReplies, expectedPresentations } from "./presentation-oracle.ts";
import type { RelayFixture } from "./relay-fixture.ts";

export interface FaultSetup {
  readonly proxy: FaultProxy;
  readonly timers: JumpTimers;
  readonly clock: JumpClock;
  /** A party behind the proxy on these timers and clock (closed after the test). */
  party(extra?: Pick<ObservedPartyOptions, "leaseMs" | "now">): Promise<ObservedParty>;
}

/** A fault proxy in front of the fixture's relay (stopped after the test), jump timers and clock. */
export function faultSetup(fx: RelayFixture, requestTimeoutMs: number): FaultSetup {
  const proxy = createFaultProxy({ target: fx.relay.url });
  fx.defer(() => proxy.stop());
  const timers = createJumpTimers();
  const clock = createJumpClock();
  return {
    proxy,
    timers,
    clock,
    async party(extra = {}) {
      const created = await createObservedParty({ url: proxy.url, requestTimeoutMs, timers, clock, ...extra });
      fx.defer(() => closeParties([created]));
      return created;
    },
  };
}

export interface FaultRig extends FaultSetup {
  readonly origin: ObservedParty;
  readonly worker: ObservedParty;
}

/** `faultSetup()` with an origin and a worker party, the origin introduced to the worker (its key proven). */
export async function faultRig(fx: RelayFixture, requestTimeoutMs: number): Promise<FaultRig> {
  const setup = faultSetup(fx, requestTimeoutMs);
  const rig = { ...setup, origin: await setup.party(), worker: await setup.party() };
  await introduce(rig.origin.core, rig.worker.core);
  return rig;
}

/** Each id inserted at most once overall, each expected id exactly once, and no id of `never`. */
export function expectInsertedOnce(host: MemoryHost, expected: readonly string[], label = "host", never: readonly string[] = []): void {
  const ids = host.insertedIds();
  const counts = new Map<string, number>();
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  const twice = [...counts].filter(([, count]) => count > 1).map(([id]) => id);
  expect({ label, insertedTwice: twice }).toEqual({ label, insertedTwice: [] });
  const missing = expected.filter((id) => !counts.has(id));
  expect({ label, missing }).toEqual({ label, missing: [] });
  const unwanted = never.filter((id) => counts.has(id));
  expect({ label, unwanted }).toEqual({ label, unwanted: [] });
}

interface Side {
  readonly core: TaskCore;
  readonly host: MemoryHost;
  readonly replies: readonly ObservedReply[];
}

/**
 * After a full drain with presentable hosts: every event of the origin's tasks to this worker is
 * inserted exactly once by each side that must see it and never by a side that must not (the
 * presentation oracle, from the intents each party's transport was seen sending).
 */
export function expectAllPresentedOnce(origin: Side, worker: Side): void {
  const target = worker.core.endpoint()?.id;
  const tasks = origin.core.listTasks().filter((task) => task.role === "origin" && task.target.id === target);
  const expected = expectedPresentations(tasks, authorsFromReplies([origin, worker]));
  expectInsertedOnce(worker.host, expected.atTarget, "worker", expected.neverAtTarget);
  expectInsertedOnce(origin.host, expected.atOrigin, "origin", expected.neverAtOrigin);
}

/** The checkpoint frontier lies below every pending delivery's cursor. */
export function expectFrontierBelowPending(store: TaskStore): void {
  const frontier = BigInt(store.checkpoint().frontier);
  for (const row of store.deliveries()) expect(BigInt(row.cursor) > frontier).toBe(true);
}

/** At most one terminal event per task, and the status follows it. */
export function expectOneTerminalWinner(store: TaskStore): void {
  for (const task of store.listTasks()) {
    const terminals = task.events.filter((event) => TASK_EVENT_TYPES[event.type].terminalStatus !== null);
    expect(terminals.length).toBeLessThanOrEqual(1);
    if (terminals.length === 1) expect(task.status).toBe(TASK_EVENT_TYPES[terminals[0]!.type].terminalStatus!);
  }
}

export function isTaskError(value: unknown, code?: string): value is TaskError {
  return value instanceof TaskError && (code === undefined || value.code === code);
}
