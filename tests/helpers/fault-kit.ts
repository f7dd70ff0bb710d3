/**
 * Shared pieces of the fault, schedule and regression tests (tests/fault):
 *
 * - `failure()`: the error a promise rejects with, captured with `.then(…, …)` (never Bun's eager
 *   rejects-matcher, which starves same-process HTTP: reference §6 item 24);
 * - `createJumpTimers()` / `createJumpClock()`: real-time `TaskTimers` and a record clock whose
 *   `now` can jump forward between passes, so capacity cooldowns and task timeouts need no waiting;
 * - `drain()`: passes on every party until nothing is pending locally or at the relay;
 * - invariant checks shared by the fault files: each model-visible event inserted exactly once,
 *   the ACK frontier below every pending delivery, one terminal winner per task.
 */
import { expect } from "bun:test";
import { createTaskCore, type TaskCore } from "../../src/core/task-core.ts";
import type { TaskTimers } from "../../src/core/timers.ts";
import { within } from "../../src/core/within.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { eventTypeRow } from "../../src/protocol/events.ts";
import { capacityCooldownMs } from "../../src/protocol/limits.ts";
import type { TaskEvent } from "../../src/protocol/schemas.ts";
import { createRelaySession } from "../../src/relay-client/session.ts";
import { createTaskStore, type TaskStore } from "../../src/store/task-store.ts";
import { createMemoryHost, type MemoryHost } from "./memory-host.ts";

export { failure } from "./core-kit.ts";

/** Resolves with the promise's value, or fails the test when it has not settled within `ms`. */
export async function settlesWithin<T>(promise: Promise<T>, label: string, ms = 5_000): Promise<T> {
  const settled = await within(promise.then((value) => ({ value })), ms);
  if (settled === undefined) throw new Error(`${label} hung for ${ms} ms`);
  return settled.value;
}

export interface JumpTimers extends TaskTimers {
  /** Moves `now()` forward without waiting (only between passes). */
  jump(ms: number): void;
}

/** System timers whose `now()` can jump forward (cooldowns expire at once). */
export function createJumpTimers(): JumpTimers {
  let offset = 0;
  return {
    now: () => performance.now() + offset,
    elapsed: (since) => performance.now() + offset - since,
    timeout(ms, signal) {
      return new Promise<void>((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason);
        const onAbort = () => {
          clearTimeout(timer);
          reject(signal?.reason);
        };
        const timer = setTimeout(() => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        }, ms);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },
    jump(ms) {
      offset += ms;
    },
  };
}

export interface JumpClock {
  (): number;
  jump(ms: number): void;
}

/** A wall clock for task records that can jump forward (task timeouts without waiting). */
export function createJumpClock(): JumpClock {
  let offset = 0;
  const clock = (() => Date.now() + offset) as JumpClock;
  clock.jump = (ms) => {
    offset += ms;
  };
  return clock;
}

export interface DrainParty {
  readonly core: TaskCore;
}

/** Deliveries the relay still holds for this core's endpoint (read-only: receive never ACKs). */
export async function relayBacklog(core: TaskCore): Promise<number> {
  if (core.closed()) return 0;
  const page = await core.session.receive("0");
  return page.deliveries.length;
}

/**
 * Passes on every party until none has pending work and the relay holds nothing for any of them.
 * Between rounds the jump timers move past any capacity cooldown. Returns the rounds used.
 */
export async function drain(parties: readonly DrainParty[], options: { timers?: JumpTimers; rounds?: number; cooldownMs?: number } = {}): Promise<number> {
  const rounds = options.rounds ?? 30;
  for (let round = 1; round <= rounds; round += 1) {
    for (const party of parties) {
      if (!party.core.closed()) await party.core.refresh().catch(() => undefined);
    }
    let idle = parties.every((party) => party.core.closed() || !party.core.hasPendingWork());
    if (idle) {
      for (const party of parties) if ((await relayBacklog(party.core).catch(() => 1)) > 0) idle = false;
    }
    if (idle) return round;
    options.timers?.jump(options.cooldownMs ?? capacityCooldownMs);
  }
  throw new Error(`drain: still pending after ${rounds} rounds`);
}

/** Whether an event the origin holds is model-visible at the task's target. */
export function visibleAtTarget(event: TaskEvent, workerStore: TaskStore): boolean {
  const row = eventTypeRow(event.type);
  if (!row.modelVisible || row.originLocal) return false;
  const intentId = (event.payload as { intentId?: unknown }).intentId;
  return !(typeof intentId === "string" && workerStore.getIntent(intentId) !== undefined);
}

/** Whether an event the origin holds is presented (visibly) to the origin's own model. */
export function visibleAtOrigin(event: TaskEvent): boolean {
  const row = eventTypeRow(event.type);
  if (!row.modelVisible || row.originLocal) return false;
  return typeof (event.payload as { intentId?: unknown }).intentId === "string" || event.type === "task.timed_out";
}

/** Each id inserted at most once overall, and each expected id exactly once. */
export function expectInsertedOnce(host: MemoryHost, expected: readonly string[], label = "host"): void {
  const ids = host.insertedIds();
  const counts = new Map<string, number>();
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  const twice = [...counts].filter(([, count]) => count > 1).map(([id]) => id);
  expect({ label, insertedTwice: twice }).toEqual({ label, insertedTwice: [] });
  const missing = expected.filter((id) => !counts.has(id));
  expect({ label, missing }).toEqual({ label, missing: [] });
}

/**
 * The model-visible events of the origin's tasks to this worker that each side must have inserted
 * exactly once (after a full drain with presentable hosts).
 */
export function expectAllPresentedOnce(origin: { core: TaskCore; host: MemoryHost }, worker: { core: TaskCore; host: MemoryHost }): void {
  const atWorker: string[] = [];
  const atOrigin: string[] = [];
  const target = worker.core.endpoint()?.id;
  for (const task of origin.core.listTasks()) {
    if (task.role !== "origin" || task.target.id !== target) continue;
    for (const event of task.events) {
      if (visibleAtTarget(event, worker.core.store)) atWorker.push(event.eventId);
      if (visibleAtOrigin(event)) atOrigin.push(event.eventId);
    }
  }
  expectInsertedOnce(worker.host, atWorker, "worker");
  expectInsertedOnce(origin.host, atOrigin, "origin");
}

/** The checkpoint frontier lies below every pending delivery's cursor. */
export function expectFrontierBelowPending(store: TaskStore): void {
  const frontier = BigInt(store.checkpoint().frontier);
  for (const row of store.deliveries()) expect(BigInt(row.cursor) > frontier).toBe(true);
}

/** At most one terminal event per task, and the status follows it. */
export function expectOneTerminalWinner(store: TaskStore): void {
  for (const task of store.listTasks()) {
    const terminals = task.events.filter((event) => eventTypeRow(event.type).terminalStatus !== null);
    expect(terminals.length).toBeLessThanOrEqual(1);
    if (terminals.length === 1) expect(task.status).toBe(eventTypeRow(terminals[0]!.type).terminalStatus!);
  }
}

/** Collects unhandled rejections while `run` executes (and a short while after). */
export async function withUnhandledRejections(run: () => Promise<void>, settleMs = 50): Promise<unknown[]> {
  const seen: unknown[] = [];
  const listener = (reason: unknown) => {
    seen.push(reason);
  };
  process.on("unhandledRejection", listener);
  try {
    await run();
    await Bun.sleep(settleMs);
  } finally {
    process.off("unhandledRejection", listener);
  }
  return seen;
}

export function isTaskError(value: unknown, code?: string): value is TaskError {
  return value instanceof TaskError && (code === undefined || value.code === code);
}

// ---------------------------------------------------------------------------------------------
// Parties whose transport records every relay reply that reaches them
// ---------------------------------------------------------------------------------------------

export interface ObservedReply {
  readonly operation: string;
  /** The parsed request body. */
  readonly request: Record<string, unknown>;
  /** The parsed reply body, or undefined when the reply never arrived complete. */
  readonly reply: Record<string, unknown> | undefined;
  readonly status: number | undefined;
  readonly at: number;
  /** Process-wide order of request starts and reply ends (to order requests of several parties). */
  readonly startSeq: number;
  readonly endSeq: number;
}

let observedSeq = 0;

/** A fetch that records each request with the reply the client got (the reply is not altered). */
export function observingFetch(log: ObservedReply[]): typeof fetch {
  const wrapped = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    let text = typeof init?.body === "string" ? init.body : "";
    if (text === "" && input instanceof Request && input.method === "POST") text = await input.clone().text();
    let request: Record<string, unknown> = {};
    try {
      request = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
    } catch {
      request = {};
    }
    const operation = typeof request.operation === "string" ? request.operation : "other";
    const startSeq = ++observedSeq;
    let response: Response;
    try {
      response = await fetch(input, init);
    } catch (error) {
      log.push({ operation, request, reply: undefined, status: undefined, at: Date.now(), startSeq, endSeq: ++observedSeq });
      throw error;
    }
    let reply: Record<string, unknown> | undefined;
    try {
      reply = JSON.parse(await response.clone().text()) as Record<string, unknown>;
    } catch {
      reply = undefined;
    }
    log.push({ operation, request, reply, status: response.status, at: Date.now(), startSeq, endSeq: ++observedSeq });
    return response;
  };
  return wrapped as typeof fetch;
}

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
  const session = createRelaySession({
    url: options.url,
    callerSession: name,
    fetch: observingFetch(replies),
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
  for (const party of parties) party.core.session.close();
}
