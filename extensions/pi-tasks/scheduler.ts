/**
 * Background refresh: one `setTimeout` chain re-armed after each pass (`activePollIntervalMs` while
 * work is active; else `idleWatchedPollIntervalMs` while a watch is held, the passes then only
 * keeping the lease; else `idlePollIntervalMs`), immediate refreshes on request (the core's single flight coalesces requests made
 * during a pass into one trailing pass), and, when the relay advertises `watch-v1`, one outstanding
 * watch that triggers a pass as soon as mail waits — and one when a held watch fails, so a relay
 * restart or outage is met at once, not at the next idle pass. Timers are unref'd so print and json
 * modes exit; `stop()` clears everything.
 */
import type { PassReport } from "../../src/core/pass.ts";
import { pause } from "../../src/core/timers.ts";
import { activePollIntervalMs, idlePollIntervalMs, idleWatchedPollIntervalMs, watchClientWaitMs } from "../../src/protocol/limits.ts";
import { FEATURE_WATCH } from "../../src/protocol/wire.ts";
import type { VolatileTaskSession } from "../../src/relay-client/session.ts";

export interface SchedulerDeps {
  refresh(): Promise<PassReport>;
  /** True while a task is active, the outbox is pending or a gated worker waits. */
  busy(): boolean;
  /** True while a `watch-v1` watch is held (the mail watch's `live()`). */
  watched(): boolean;
  onPass(report: PassReport): void;
  onError(error: unknown): void;
}

export interface RefreshScheduler {
  start(): void;
  /** An immediate refresh (single flight; coalesced while one runs). */
  request(): void;
  /**
   * After a pass run outside the chain (the doorbell's): when work became active, the next pass
   * comes at the active cadence instead of after the idle wait armed before.
   */
  reconsider(): void;
  stop(): void;
  /** The current cadence decision. */
  cadenceMs(): number;
}

export function createRefreshScheduler(deps: SchedulerDeps): RefreshScheduler {
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** `Date.now()` at which the armed timer fires. */
  let dueAt = 0;
  let stopped = true;

  const cadenceMs = () => (deps.busy() ? activePollIntervalMs : deps.watched() ? idleWatchedPollIntervalMs : idlePollIntervalMs);

  function arm(delayMs: number): void {
    if (stopped) return;
    if (timer !== undefined) clearTimeout(timer);
    dueAt = Date.now() + delayMs;
    timer = setTimeout(run, delayMs);
    timer.unref?.();
  }

  function run(): void {
    timer = undefined;
    if (stopped) return;
    deps.refresh().then(
      (report) => {
        if (stopped) return;
        deps.onPass(report);
        arm(cadenceMs());
      },
      (error: unknown) => {
        if (stopped) return;
        deps.onError(error);
        arm(cadenceMs());
      },
    );
  }

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      arm(0);
    },
    request() {
      if (stopped) return;
      if (timer !== undefined) clearTimeout(timer);
      run();
    },
    reconsider() {
      if (stopped || timer === undefined) return;
      const cadence = cadenceMs();
      if (dueAt - Date.now() > cadence) arm(cadence);
    },
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
    cadenceMs,
  };
}

export interface MailWatch {
  start(): void;
  stop(): void;
  /** Whether a watch is held now: one is out on a session that can watch, and none failed since. */
  live(): boolean;
  /** Ends a pause early (e.g. after a pass bound the session, so watching can start at once). */
  nudge(): void;
}

export interface WatchDeps {
  session(): VolatileTaskSession | undefined;
  /** The cursor after which new mail matters (the highest tracked cursor). */
  cursor(): string;
  /** Runs (or joins) a refresh because mail waits. */
  onMail(): Promise<void>;
  /** A held watch failed (the relay went away, restarted, refused): a pass should look at once. */
  onLost(): void;
}

/** One outstanding `watch` per endpoint while the relay advertises `watch-v1`. */
export function createMailWatch(deps: WatchDeps): MailWatch {
  let controller: AbortController | undefined;
  let nudged: AbortController | undefined;
  let live = false;
  /** A watch answered since the last failure: the next failure is news (an outage's repeats are not). */
  let answered = false;

  /** Waits `ms` unless stopped or nudged. */
  function rest(ms: number, signal: AbortSignal): Promise<void> {
    nudged = new AbortController();
    return pause(ms, AbortSignal.any([signal, nudged.signal]));
  }

  async function loop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const session = deps.session();
      const usable = session !== undefined && session.status() === "ready" && session.features().has(FEATURE_WATCH);
      if (!usable) {
        live = false;
        await rest(activePollIntervalMs, signal);
        continue;
      }
      try {
        const cursor = deps.cursor();
        // Held from its start: a relay that cannot hold it fails it at once (caught below).
        live = true;
        const result = await session.watch(cursor, watchClientWaitMs, signal);
        answered = true;
        if (!result.pending || signal.aborted) continue;
        await deps.onMail();
        // Mail the pass could not take in yet (held, or the pending bound): don't spin on it.
        if (deps.cursor() === cursor) await rest(activePollIntervalMs, signal);
      } catch {
        // The background pass reports relay failures; the doorbell asks for one and backs off.
        if (answered && !signal.aborted) deps.onLost();
        answered = false;
        live = false;
        await rest(activePollIntervalMs, signal);
      }
    }
  }

  return {
    start() {
      if (controller !== undefined) return;
      controller = new AbortController();
      void loop(controller.signal);
    },
    stop() {
      controller?.abort();
      controller = undefined;
      live = false;
    },
    live: () => live,
    nudge() {
      nudged?.abort();
    },
  };
}
