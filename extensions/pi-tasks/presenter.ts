/**
 * The Pi presentation host: model-visible task events become `pi-tasks-event` custom messages
 * (inserted while Pi is idle with nothing queued, without starting a turn), followed by one hidden
 * `pi-tasks-wake` message that starts the turn. Non-visible events are archived as
 * `pi-tasks-event-record` entries; mail the trust gate (or validation) rejected is archived as a `pi-tasks-rejected`
 * entry — never shown to the model.
 *
 * Evidence: an insertion counts when its entry is in the session branch; a wake counts when Pi
 * emits its `message_end` within `wakeObservationMs`. Our own queued-message count covers what
 * `ctx.hasPendingMessages()` ignores (extension messages).
 *
 * A cancel reaching a busy worker does not wait: it is queued as a steer (read after the current
 * tool batch) and, for gate workers or with `PI_TASKS_CANCEL_ABORTS=1`, the running turn is
 * aborted. Within `cancelAbortGraceMs` the presenter reports what happened (`aborted` when the
 * turn ended, else `busy`). An aborted turn never read the steer — it waits in Pi's queue for the
 * next run — so one hidden wake starts that run: the model reads the cancellation in a turn of its
 * own, the same as a cancel reaching an idle worker, whatever the timing. A steer Pi dropped after
 * all is appended to the session without a turn, never twice. The origin's steer (information it
 * marks `steer`) reaching a busy worker goes the same way, without the abort: Pi reads it after the
 * current tool batch, inside the running turn.
 */
import { nanoid } from "nanoid";
import type { PresentationHost, PresentationItem, RejectionRecord } from "../../src/core/host.ts";
import { cancelAbortGraceMs, cancelIdlePollMs, insertionScanEntries, wakeObservationMs } from "../../src/protocol/limits.ts";
import type { CancelOutcome } from "../../src/protocol/schemas.ts";
import { EVENT_MESSAGE, EVENT_RECORD } from "../../src/protocol/session-entries.ts";
import { isRecord } from "../../src/protocol/validate.ts";
import { renderEvent, renderWake } from "./render.ts";

export { EVENT_MESSAGE, EVENT_RECORD };
export const WAKE_MESSAGE = "pi-tasks-wake";
export const REJECTED_RECORD = "pi-tasks-rejected";

export interface PiMessage {
  readonly customType: string;
  readonly content: string;
  readonly display: boolean;
  readonly details?: unknown;
}

export interface PiSessionView {
  isIdle(): boolean;
  hasPendingMessages(): boolean;
  /** The current branch, oldest first. */
  branch(): readonly unknown[];
  /** Aborts the running turn (Pi's `ctx.abort()`). */
  abort(): void;
}

export interface PresenterDeps {
  sendMessage(message: PiMessage, options: { triggerTurn?: boolean; deliverAs?: "steer" | "followUp" | "nextTurn" }): void;
  appendEntry(customType: string, data: unknown): void;
  /** The live session, or undefined while none is bound. */
  session(): PiSessionView | undefined;
  /** A cancel aborts the worker's running turn (gate workers by default), besides steering it. */
  readonly abortOnCancel: boolean;
}

export interface PiPresenter extends PresentationHost {
  /** Feed every `message_end` here (wake observation and the queued count). */
  onMessageEnd(message: unknown): void;
  queued(): number;
  /** Events whose `pi-tasks-event` insertion this Pi run observed. */
  inserted(eventId: string): boolean;
  dispose(): void;
}

/** The event id of a branch entry that is a `pi-tasks-event` custom message, else undefined. */
export function insertedEventId(entry: unknown): string | undefined {
  if (!isRecord(entry) || entry.type !== "custom_message" || entry.customType !== EVENT_MESSAGE) return undefined;
  const details = entry.details;
  return isRecord(details) && typeof details.eventId === "string" ? details.eventId : undefined;
}

/**
 * What the session keeps of an item (details of its message or archive entry): the event, and at the
 * origin the worker's key it came with — a restarted origin's resume reads both (resume.ts).
 */
function itemDetails(item: PresentationItem): Record<string, unknown> {
  const peerKey = item.role === "origin" && item.peer?.verified === true ? { peerKey: item.peer.key } : {};
  return { taskId: item.taskId, eventId: item.eventId, role: item.role, event: item.event, ...peerKey };
}

/** The `pi-tasks-event` message of an item. */
function eventMessage(item: PresentationItem): PiMessage {
  return { customType: EVENT_MESSAGE, content: renderEvent(item.event, item.task, item.peer), display: true, details: itemDetails(item) };
}

/** Whether the `pi-tasks-event` message of an event is among the latest entries of the session branch. */
function observedInBranch(session: PiSessionView | undefined, eventId: string): boolean {
  const branch = session?.branch() ?? [];
  for (let index = branch.length - 1; index >= 0 && index >= branch.length - insertionScanEntries; index -= 1) {
    if (insertedEventId(branch[index]) === eventId) return true;
  }
  return false;
}

/** Wakes sent and not yet seen: each settles when Pi emits its `message_end`, or after `wakeObservationMs`. */
interface Wakes {
  /** Sends one hidden wake message for the items; resolves whether Pi was seen to take it. */
  send(items: readonly PresentationItem[]): Promise<boolean>;
  /** Pi emitted the wake's `message_end`. */
  seen(wakeId: string): void;
  /** Wakes sent and not yet seen (our own queued count). */
  pending(): number;
  dispose(): void;
}

function createWakes(sendMessage: PresenterDeps["sendMessage"]): Wakes {
  const waiters = new Map<string, (seen: boolean) => void>();
  const queued = new Set<string>();
  return {
    send(items) {
      const wakeId = nanoid();
      const observed = new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => settle(false), wakeObservationMs);
        timer.unref?.();
        function settle(seen: boolean): void {
          clearTimeout(timer);
          waiters.delete(wakeId);
          // An unobserved wake must not hold presentation forever.
          queued.delete(wakeId);
          resolve(seen);
        }
        waiters.set(wakeId, settle);
      });
      queued.add(wakeId);
      try {
        sendMessage(
          {
            customType: WAKE_MESSAGE,
            content: renderWake(items.length),
            display: false,
            details: { wakeId, eventIds: items.map((item) => item.eventId) },
          },
          { triggerTurn: true, deliverAs: "followUp" },
        );
      } catch (error) {
        queued.delete(wakeId);
        waiters.get(wakeId)?.(false);
        throw error;
      }
      return observed;
    },
    seen(wakeId) {
      queued.delete(wakeId);
      waiters.get(wakeId)?.(true);
    },
    pending: () => queued.size,
    dispose() {
      for (const settle of [...waiters.values()]) settle(false);
      queued.clear();
    },
  };
}

/** Cancels steered into a busy session, each watched until the session is idle or the grace period ends. */
interface CancelWatches {
  interrupt(item: PresentationItem, report: (outcome: CancelOutcome) => void): boolean;
  dispose(): void;
}

function createCancelWatches(deps: PresenterDeps, wakes: Wakes): CancelWatches {
  const watches = new Set<ReturnType<typeof setInterval>>();
  /** Polls until the session is idle or `cancelAbortGraceMs` passed; then `done(idle)`. */
  function whenIdle(done: (idle: boolean) => void): void {
    const started = Date.now();
    const watch = setInterval(() => {
      const idle = deps.session()?.isIdle() === true;
      if (!idle && Date.now() - started < cancelAbortGraceMs) return;
      clearInterval(watch);
      watches.delete(watch);
      done(idle);
    }, cancelIdlePollMs);
    watches.add(watch);
  }
  /** The model must read the cancel: a steer Pi dropped is appended (no turn), once. */
  const appendIfDropped = (item: PresentationItem) => {
    if (!observedInBranch(deps.session(), item.eventId)) deps.sendMessage(eventMessage(item), { triggerTurn: false });
  };
  return {
    interrupt(item, report) {
      const session = deps.session();
      if (session === undefined) return false;
      deps.sendMessage(eventMessage(item), { triggerTurn: true, deliverAs: "steer" });
      if (deps.abortOnCancel) session.abort();
      whenIdle((idle) => {
        report(idle ? "aborted" : "busy");
        if (!idle) return;
        // Not aborted: the running turn read the steer at its next tool boundary (or Pi dropped it).
        if (!deps.abortOnCancel) return appendIfDropped(item);
        // Aborted before that boundary: the steer waits in Pi's queue for the next run. One wake
        // starts it, so the model reads the cancellation in a turn of its own — as an idle worker
        // woken with it would — and it is inserted once, by Pi, from the queue.
        void wakes.send([item]).then(
          () => whenIdle((again) => (again ? appendIfDropped(item) : undefined)),
          () => undefined,
        );
      });
      return true;
    },
    dispose() {
      for (const watch of watches) clearInterval(watch);
      watches.clear();
    },
  };
}

export function createPiPresenter(deps: PresenterDeps): PiPresenter {
  const wakes = createWakes(deps.sendMessage);
  const cancels = createCancelWatches(deps, wakes);
  const insertedEvents = new Set<string>();
  const inBranch = (eventId: string) => observedInBranch(deps.session(), eventId);

  return {
    canPresent() {
      const session = deps.session();
      return session !== undefined && session.isIdle() && !session.hasPendingMessages() && wakes.pending() === 0;
    },

    insert(item: PresentationItem) {
      deps.sendMessage(eventMessage(item), { triggerTurn: false, deliverAs: "followUp" });
      const seen = inBranch(item.eventId);
      if (seen) insertedEvents.add(item.eventId);
      return seen;
    },

    wake: (items: readonly PresentationItem[]) => wakes.send(items),

    archive(item: PresentationItem) {
      deps.appendEntry(EVENT_RECORD, itemDetails(item));
    },

    interrupt: (item: PresentationItem, report: (outcome: CancelOutcome) => void) => cancels.interrupt(item, report),

    steer(item: PresentationItem) {
      if (deps.session() === undefined) return false;
      deps.sendMessage(eventMessage(item), { triggerTurn: true, deliverAs: "steer" });
      return true;
    },

    recordRejection(record: RejectionRecord) {
      deps.appendEntry(REJECTED_RECORD, {
        envelopeId: record.envelopeId,
        code: record.code,
        message: record.message,
        details: record.details,
      });
    },

    onMessageEnd(message) {
      if (!isRecord(message) || message.role !== "custom") return;
      const details = message.details;
      if (message.customType === WAKE_MESSAGE && isRecord(details) && typeof details.wakeId === "string") wakes.seen(details.wakeId);
      if (message.customType === EVENT_MESSAGE && isRecord(details) && typeof details.eventId === "string")
        insertedEvents.add(details.eventId);
    },

    queued: () => wakes.pending(),
    inserted: (eventId) => insertedEvents.has(eventId) || inBranch(eventId),
    dispose() {
      cancels.dispose();
      wakes.dispose();
    },
  };
}
