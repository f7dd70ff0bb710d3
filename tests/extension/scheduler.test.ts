import { afterEach, beforeEach, describe, expect, jest, test } from "bun:test";
import { createMailWatch, createRefreshScheduler, type RefreshScheduler } from "../../extensions/pi-tasks/scheduler.ts";
import type { PassReport } from "../../src/core/pass.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import {
  activePollIntervalMs,
  defaultRequestDeadlineMs,
  idlePollIntervalMs,
  idleWatchedPollIntervalMs,
  leaseRenewMarginMs,
  watchClientWaitMs,
} from "../../src/protocol/limits.ts";
import { FEATURE_WATCH } from "../../src/protocol/wire.ts";
import type { VolatileTaskSession } from "../../src/relay-client/session.ts";
import { flushMicrotasks } from "../../testkit/async.ts";
import { passReport } from "../helpers/extension-fakes.ts";

const REPORT: PassReport = passReport();

interface Harness {
  readonly scheduler: RefreshScheduler;
  /** `Date.now()` of each refresh call. */
  readonly calls: number[];
  readonly passes: PassReport[];
  readonly errors: unknown[];
  busy: boolean;
  /** Whether a watch is held (the scheduler's `watched`). */
  watched: boolean;
  /** How the next refreshes end (default: resolve at once). */
  next: "resolve" | "reject" | "hold";
  /** Settles held refreshes. */
  settleHeld(): void;
}

function harness(): Harness {
  const held: (() => void)[] = [];
  const state: Harness = {
    calls: [],
    passes: [],
    errors: [],
    busy: false,
    watched: false,
    next: "resolve",
    settleHeld: () => {
      for (const settle of held.splice(0)) settle();
    },
    scheduler: undefined as unknown as RefreshScheduler,
  };
  (state as { scheduler: RefreshScheduler }).scheduler = createRefreshScheduler({
    refresh() {
      state.calls.push(Date.now());
      if (state.next === "reject") return Promise.reject(new TaskError("RELAY_UNAVAILABLE", { details: { operation: "receive" } }));
      if (state.next === "hold") return new Promise((resolve) => held.push(() => resolve(REPORT)));
      return Promise.resolve(REPORT);
    },
    busy: () => state.busy,
    watched: () => state.watched,
    onPass: (report) => state.passes.push(report),
    onError: (error) => state.errors.push(error),
  });
  return state;
}

/** Advances fake time in steps, letting promise callbacks run in between. */
async function advance(ms: number, step = 50): Promise<void> {
  for (let elapsed = 0; elapsed < ms; elapsed += step) {
    jest.advanceTimersByTime(Math.min(step, ms - elapsed));
    await flushMicrotasks();
  }
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

describe("refresh scheduler", () => {
  test("idle while a watch is held: re-armed every idleWatchedPollIntervalMs (the watches keep the lease), busy at the active cadence", async () => {
    // Each watch goes out as the last one answers: within every window in which a request renews the lease.
    expect(watchClientWaitMs).toBeLessThanOrEqual(defaultRequestDeadlineMs + leaseRenewMarginMs);
    const h = harness();
    h.watched = true;
    h.scheduler.start();
    await advance(1);
    expect(h.calls).toHaveLength(1);
    await advance(idleWatchedPollIntervalMs - 10);
    expect(h.calls).toHaveLength(1);
    await advance(20);
    expect(h.calls).toHaveLength(2);
    h.busy = true;
    expect(h.scheduler.cadenceMs()).toBe(activePollIntervalMs);
    h.busy = false;
    h.watched = false;
    expect(h.scheduler.cadenceMs()).toBe(idlePollIntervalMs);
    h.scheduler.stop();
  });

  test("reconsider(): work made active by a pass outside the chain (the doorbell's) brings the next pass at the active cadence", async () => {
    const h = harness();
    h.watched = true;
    h.scheduler.start();
    await advance(1);
    expect(h.calls).toHaveLength(1);
    // Nothing changed: the idle wait stands.
    h.scheduler.reconsider();
    await advance(activePollIntervalMs * 2);
    expect(h.calls).toHaveLength(1);
    // The doorbell's pass took in an assignment: busy now.
    h.busy = true;
    h.scheduler.reconsider();
    await advance(activePollIntervalMs + 10);
    expect(h.calls).toHaveLength(2);
    h.scheduler.stop();
  });

  test("start runs a pass at once, then re-arms every 5 s while idle", async () => {
    const h = harness();
    const t0 = Date.now();
    h.scheduler.start();
    await advance(0 + 1);
    expect(h.calls).toHaveLength(1);
    await advance(idlePollIntervalMs - 10);
    expect(h.calls).toHaveLength(1);
    await advance(20);
    expect(h.calls).toHaveLength(2);
    expect(h.calls[1]! - h.calls[0]!).toBe(idlePollIntervalMs);
    expect(h.calls[0]! - t0).toBeLessThan(10);
    expect(h.passes).toHaveLength(2);
    h.scheduler.stop();
  });

  test("every 1 s while work is active, and the cadence follows busy() after each pass", async () => {
    const h = harness();
    h.busy = true;
    h.scheduler.start();
    await advance(activePollIntervalMs * 3 + 10);
    expect(h.calls).toHaveLength(4);
    expect(h.calls.slice(1).map((at, index) => at - h.calls[index]!)).toEqual([
      activePollIntervalMs,
      activePollIntervalMs,
      activePollIntervalMs,
    ]);
    expect(h.scheduler.cadenceMs()).toBe(activePollIntervalMs);
    h.busy = false;
    expect(h.scheduler.cadenceMs()).toBe(idlePollIntervalMs);
    // The pass already armed keeps its 1 s; the next one uses the idle cadence.
    await advance(activePollIntervalMs);
    expect(h.calls).toHaveLength(5);
    await advance(idlePollIntervalMs - 10);
    expect(h.calls).toHaveLength(5);
    await advance(20);
    expect(h.calls).toHaveLength(6);
    h.scheduler.stop();
  });

  test("request() refreshes immediately and replaces the pending timer (no extra pass)", async () => {
    const h = harness();
    h.scheduler.start();
    await advance(1);
    await advance(1_000);
    expect(h.calls).toHaveLength(1);
    h.scheduler.request();
    expect(h.calls).toHaveLength(2);
    await flushMicrotasks();
    // The old timer (due at 5 s after the first pass) is gone; the next is 5 s after this one.
    await advance(idlePollIntervalMs - 1_000);
    expect(h.calls).toHaveLength(2);
    await advance(1_000 + 10);
    expect(h.calls).toHaveLength(3);
    h.scheduler.stop();
  });

  test("a failing pass reports the error and keeps the chain alive", async () => {
    const h = harness();
    h.next = "reject";
    h.busy = true;
    h.scheduler.start();
    await advance(activePollIntervalMs + 10);
    expect(h.calls).toHaveLength(2);
    expect(h.errors).toHaveLength(2);
    expect((h.errors[0] as TaskError).code).toBe("RELAY_UNAVAILABLE");
    expect(h.passes).toHaveLength(0);
    h.next = "resolve";
    await advance(activePollIntervalMs);
    expect(h.passes).toHaveLength(1);
    h.scheduler.stop();
  });

  test("history #7: stop() ends the chain; a pass in flight at stop reports nothing and arms nothing", async () => {
    const h = harness();
    h.next = "hold";
    h.scheduler.start();
    await advance(1);
    expect(h.calls).toHaveLength(1);
    h.scheduler.stop();
    h.settleHeld();
    await flushMicrotasks();
    expect(h.passes).toEqual([]);
    h.scheduler.request();
    await advance(idlePollIntervalMs * 2);
    expect(h.calls).toHaveLength(1);
  });

  test("request() before start() does nothing; start() twice runs one chain", async () => {
    const h = harness();
    h.scheduler.request();
    expect(h.calls).toHaveLength(0);
    h.scheduler.start();
    h.scheduler.start();
    await advance(idlePollIntervalMs + 10);
    expect(h.calls).toHaveLength(2);
    h.scheduler.stop();
  });
});

describe("timers never keep a print/json-mode Pi alive", () => {
  test("the scheduler's and the watch's timers are unref'd", async () => {
    jest.useRealTimers();
    const created: { hasRef(): boolean }[] = [];
    const original = globalThis.setTimeout;
    globalThis.setTimeout = ((handler: () => void, ms?: number) => {
      const timer = original(handler, ms);
      created.push(timer as unknown as { hasRef(): boolean });
      return timer;
    }) as typeof setTimeout;
    try {
      const h = harness();
      h.next = "hold";
      h.scheduler.start();
      // An unusable session makes the watch pause on a timer.
      const watch = createMailWatch({
        session: () => undefined,
        cursor: () => "0",
        onMail: async () => undefined,
        onLost: () => undefined,
      });
      watch.start();
      expect(created.length).toBeGreaterThanOrEqual(2);
      for (const timer of created) expect(timer.hasRef()).toBe(false);
      h.scheduler.stop();
      watch.stop();
      h.settleHeld();
    } finally {
      globalThis.setTimeout = original;
    }
  });
});

interface FakeSession {
  readonly session: VolatileTaskSession;
  readonly watches: {
    cursor: string;
    waitMs: number;
    signal: AbortSignal | undefined;
    answer(pending: boolean): void;
    fail(error: unknown): void;
  }[];
  ready: boolean;
  features: Set<string>;
}

function fakeSession(): FakeSession {
  const state: FakeSession = {
    watches: [],
    ready: true,
    features: new Set([FEATURE_WATCH]),
    session: undefined as unknown as VolatileTaskSession,
  };
  (state as { session: VolatileTaskSession }).session = {
    status: () => (state.ready ? "ready" : "unbound"),
    features: () => state.features,
    watch: (cursor: string, waitMs: number, signal?: AbortSignal) =>
      new Promise((resolve, reject) => {
        state.watches.push({ cursor, waitMs, signal, answer: (pending) => resolve({ pending, highestCursor: cursor }), fail: reject });
        signal?.addEventListener("abort", () => reject(new TaskError("ABORTED")), { once: true });
      }),
  } as unknown as VolatileTaskSession;
  return state;
}

describe("mail watch (watch-v1 doorbell)", () => {
  test("one outstanding watch from the highest tracked cursor; pending mail runs a pass at once", async () => {
    const fake = fakeSession();
    let cursor = "7";
    const mail: string[] = [];
    const watch = createMailWatch({
      session: () => fake.session,
      cursor: () => cursor,
      onMail: async () => {
        mail.push(cursor);
        cursor = "9";
      },
      onLost: () => undefined,
    });
    watch.start();
    await flushMicrotasks();
    expect(fake.watches).toHaveLength(1);
    expect(fake.watches[0]).toMatchObject({ cursor: "7", waitMs: watchClientWaitMs });
    fake.watches[0]!.answer(true);
    await flushMicrotasks();
    expect(mail).toEqual(["7"]);
    // The pass took the mail in (the cursor moved): the next watch starts at once, from it.
    expect(fake.watches).toHaveLength(2);
    expect(fake.watches[1]!.cursor).toBe("9");
    // No mail: re-watch without a pass.
    fake.watches[1]!.answer(false);
    await flushMicrotasks();
    expect(mail).toHaveLength(1);
    expect(fake.watches).toHaveLength(3);
    watch.stop();
    await flushMicrotasks();
    expect(fake.watches[2]!.signal?.aborted).toBe(true);
  });

  test("mail the pass could not take in (cursor unchanged) backs off instead of spinning", async () => {
    const fake = fakeSession();
    let passes = 0;
    const watch = createMailWatch({
      session: () => fake.session,
      cursor: () => "3",
      onMail: async () => void (passes += 1),
      onLost: () => undefined,
    });
    watch.start();
    await flushMicrotasks();
    fake.watches[0]!.answer(true);
    await flushMicrotasks();
    expect(passes).toBe(1);
    expect(fake.watches).toHaveLength(1);
    await advance(activePollIntervalMs + 10);
    expect(fake.watches).toHaveLength(2);
    watch.stop();
  });

  test("a relay without watch-v1, or a session not ready, is never watched", async () => {
    const fake = fakeSession();
    fake.features = new Set();
    const watch = createMailWatch({
      session: () => fake.session,
      cursor: () => "0",
      onMail: async () => undefined,
      onLost: () => undefined,
    });
    watch.start();
    await advance(activePollIntervalMs * 3);
    expect(fake.watches).toHaveLength(0);
    fake.features = new Set([FEATURE_WATCH]);
    fake.ready = false;
    await advance(activePollIntervalMs * 2);
    expect(fake.watches).toHaveLength(0);
    fake.ready = true;
    await advance(activePollIntervalMs + 10);
    expect(fake.watches).toHaveLength(1);
    watch.stop();
  });

  test("nudge() ends a wait for readiness at once (the first pass bound the session)", async () => {
    const fake = fakeSession();
    fake.ready = false;
    const watch = createMailWatch({
      session: () => fake.session,
      cursor: () => "0",
      onMail: async () => undefined,
      onLost: () => undefined,
    });
    watch.start();
    await flushMicrotasks();
    expect(fake.watches).toHaveLength(0);
    fake.ready = true;
    // Without a nudge the loop would look again only after activePollIntervalMs.
    watch.nudge();
    await flushMicrotasks();
    expect(fake.watches).toHaveLength(1);
    watch.stop();
  });

  test("live() while a watch is out; one failing after a watch answered asks for a pass, once per outage", async () => {
    const fake = fakeSession();
    let lost = 0;
    const watch = createMailWatch({
      session: () => fake.session,
      cursor: () => "0",
      onMail: async () => undefined,
      onLost: () => void (lost += 1),
    });
    expect(watch.live()).toBe(false);
    watch.start();
    await flushMicrotasks();
    expect(watch.live()).toBe(true);
    fake.watches[0]!.answer(false);
    await flushMicrotasks();
    expect(watch.live()).toBe(true);
    fake.watches[1]!.fail(new TaskError("RELAY_UNAVAILABLE"));
    await flushMicrotasks();
    expect({ live: watch.live(), lost }).toEqual({ live: false, lost: 1 });
    // The next watch goes out after the back-off; failing before any answered (an outage) asks for nothing more.
    await advance(activePollIntervalMs + 10);
    expect(watch.live()).toBe(true);
    fake.watches[2]!.fail(new TaskError("RELAY_UNAVAILABLE"));
    await flushMicrotasks();
    expect({ live: watch.live(), lost }).toEqual({ live: false, lost: 1 });
    watch.stop();
  });

  test("a failing watch backs off and retries; stop() ends the loop", async () => {
    const fake = fakeSession();
    const watch = createMailWatch({
      session: () => fake.session,
      cursor: () => "0",
      onMail: async () => undefined,
      onLost: () => undefined,
    });
    watch.start();
    await flushMicrotasks();
    fake.watches[0]!.fail(new TaskError("RELAY_UNAVAILABLE"));
    await flushMicrotasks();
    expect(fake.watches).toHaveLength(1);
    await advance(activePollIntervalMs + 10);
    expect(fake.watches).toHaveLength(2);
    watch.stop();
    await advance(activePollIntervalMs * 3);
    expect(fake.watches).toHaveLength(2);
  });
});
