/**
 * A work scope: the shared budget of one refresh pass (or one foreground operation).
 *
 * - at most `maxScopedSendsPerPass` scoped sends + `maxOldWorkSendsPerPass` rotating old-work
 *   sends and `maxAckAttemptsPerPass` ACK attempts; failed attempts consume budget; one send or ACK
 *   identity is never attempted twice in a scope;
 * - a `passDeadlineMs` overall deadline (phased scopes) whose signal aborts started requests that
 *   outlive it; `passSliceMs` attempt slices for retry and ACK repair stop starting new attempts only;
 * - a foreground scope has no overall deadline, but its speculative old-work sends (older mail
 *   offered before the operation's own envelope) get a finite `passDeadlineMs` window that opens at the
 *   first old-work attempt: after it no old work starts and what is in flight is aborted;
 * - the first failure of each kind is kept and reported after the pass.
 */
import { deferral, TaskError, toTaskError } from "../protocol/errors.ts";
import { maxAckAttemptsPerPass, maxOldWorkSendsPerPass, maxScopedSendsPerPass, passDeadlineMs, passSliceMs } from "../protocol/limits.ts";
import type { TaskTimers } from "./timers.ts";

export type ScopeMode = "phased" | "foreground";
export type FailureKind =
  | "lease"
  | "intake"
  | "presentation"
  | "fanout"
  | "receipt"
  | "send"
  | "ack"
  | "repair"
  | "retry"
  | "deferral"
  | "peers";

export interface WorkScope {
  readonly mode: ScopeMode;
  /** Aborts on the pass deadline (phased), the lifetime's close, or the caller's signal. */
  readonly signal: AbortSignal;
  readonly timers: TaskTimers;
  readonly startedAt: number;
  /** Envelopes this scope's work created, in persist order, for `shipRequired`. */
  readonly required: string[];
  /** Receipts `shipRequired` left to leave with this scope's acknowledgement (carry.ts, `ack-carry-v1`), in order. */
  readonly carried: string[];
  /** Send and ACK identities attempted in this scope. */
  readonly attempted: Set<string>;
  /** Targets that refused speculative retry for capacity in this scope. */
  readonly suppressedTargets: Set<string>;
  readonly failures: Map<FailureKind, TaskError>;
  /** Set when a request of this scope found the relay unreachable (network failure or timeout). */
  unreachable: boolean;
  counts(): { scopedSends: number; oldWorkSends: number; ackAttempts: number };
  /** Time left before the overall deadline (Infinity for foreground scopes). */
  remainingMs(): number;
  expired(): boolean;
  /** Takes one unit of a budget if the deadline (and an open slice, when given) allow it. */
  allow(budget: "scoped" | "oldWork" | "ack", slice?: Slice): boolean;
  /** The signal a request allowed under `budget` runs with (old work in a foreground scope: its window). */
  signalFor(budget: "scoped" | "oldWork" | "ack"): AbortSignal;
  openSlice(): Slice;
  fail(kind: FailureKind, error: unknown): void;
  /** Frees the deadline timer. */
  dispose(): void;
}

export interface Slice {
  readonly endsAt: number;
}

export interface ScopeOptions {
  readonly timers: TaskTimers;
  readonly mode: ScopeMode;
  /** Lifetime and caller signals; the scope aborts when any does. */
  readonly signals?: readonly (AbortSignal | undefined)[];
  /** Overall deadline; default 2,000 ms for phased scopes, none for foreground scopes. */
  readonly deadlineMs?: number;
}

const LIMITS = { scoped: maxScopedSendsPerPass, oldWork: maxOldWorkSendsPerPass, ack: maxAckAttemptsPerPass } as const;

export function createTaskWorkScope(options: ScopeOptions): WorkScope {
  const { timers, mode } = options;
  const startedAt = timers.now();
  const deadlineMs = options.deadlineMs ?? (mode === "phased" ? passDeadlineMs : Number.POSITIVE_INFINITY);
  const deadline = new AbortController();
  const disposer = new AbortController();
  if (Number.isFinite(deadlineMs)) {
    timers.timeout(deadlineMs, disposer.signal).then(
      () => deadline.abort(deferral("budget", "pass deadline", { deadlineMs })),
      () => undefined,
    );
  }
  const signals = [deadline.signal, ...(options.signals ?? []).filter((signal): signal is AbortSignal => signal !== undefined)];
  const signal = AbortSignal.any(signals);
  const used = { scoped: 0, oldWork: 0, ack: 0 };
  const failures = new Map<FailureKind, TaskError>();
  /** Foreground only: the old-work window, opened at the first old-work attempt. */
  let oldWorkWindow: AbortController | undefined;
  function openOldWorkWindow(): void {
    if (mode !== "foreground" || oldWorkWindow !== undefined) return;
    const window = new AbortController();
    oldWorkWindow = window;
    timers.timeout(passDeadlineMs, AbortSignal.any([disposer.signal, signal])).then(
      () => window.abort(deferral("budget", "old-work window", { windowMs: passDeadlineMs })),
      () => undefined,
    );
  }

  const scope: WorkScope = {
    mode,
    signal,
    timers,
    startedAt,
    required: [],
    carried: [],
    attempted: new Set(),
    suppressedTargets: new Set(),
    failures,
    unreachable: false,
    counts: () => ({ scopedSends: used.scoped, oldWorkSends: used.oldWork, ackAttempts: used.ack }),
    remainingMs: () => deadlineMs - timers.elapsed(startedAt),
    expired: () => signal.aborted || timers.elapsed(startedAt) >= deadlineMs,
    allow(budget, slice) {
      if (scope.expired()) return false;
      if (slice !== undefined && timers.now() >= slice.endsAt) return false;
      if (used[budget] >= LIMITS[budget]) return false;
      if (budget === "oldWork") {
        openOldWorkWindow();
        if (oldWorkWindow?.signal.aborted === true) return false;
      }
      used[budget] += 1;
      return true;
    },
    signalFor: (budget) => (budget === "oldWork" && oldWorkWindow !== undefined ? AbortSignal.any([signal, oldWorkWindow.signal]) : signal),
    openSlice: () => ({ endsAt: timers.now() + passSliceMs }),
    fail(kind, error) {
      if (!failures.has(kind)) failures.set(kind, toTaskError(error));
    },
    dispose() {
      disposer.abort();
    },
  };
  return scope;
}
