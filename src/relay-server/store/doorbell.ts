/**
 * The `watch-v1` doorbell of the memory store: at most one outstanding watch per endpoint, woken
 * when mail is admitted to that endpoint's mailbox, when the endpoint disconnects or is
 * superseded, or when its wait elapses.
 */
import { relayWatchesPerEndpoint } from "../../protocol/limits.ts";

export interface Doorbell {
  /** Resolves true when rung, false on timeout, abort, replacement by a newer watch or close. */
  wait(endpointId: string, waitMs: number, signal?: AbortSignal): Promise<boolean>;
  ring(endpointId: string): void;
  waiting(): number;
  close(): void;
}

interface Waiter {
  readonly settle: (rang: boolean) => void;
}

export function createDoorbell(): Doorbell {
  const waiters = new Map<string, Waiter[]>();

  function take(endpointId: string): Waiter[] {
    const list = waiters.get(endpointId) ?? [];
    waiters.delete(endpointId);
    return list;
  }

  return {
    wait(endpointId, waitMs, signal) {
      const list = waiters.get(endpointId) ?? [];
      // A newer watch replaces the oldest beyond the per-endpoint bound.
      while (list.length >= relayWatchesPerEndpoint) list.shift()?.settle(false);
      return new Promise<boolean>((resolve) => {
        let done = false;
        const timer = setTimeout(() => settle(false), waitMs);
        const onAbort = () => settle(false);
        const waiter: Waiter = { settle };
        function settle(rang: boolean): void {
          if (done) return;
          done = true;
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          const current = waiters.get(endpointId);
          if (current !== undefined) {
            const index = current.indexOf(waiter);
            if (index >= 0) current.splice(index, 1);
            if (current.length === 0) waiters.delete(endpointId);
          }
          resolve(rang);
        }
        if (signal?.aborted) return settle(false);
        signal?.addEventListener("abort", onAbort, { once: true });
        list.push(waiter);
        waiters.set(endpointId, list);
      });
    },
    ring(endpointId) {
      for (const waiter of take(endpointId)) waiter.settle(true);
    },
    waiting: () => [...waiters.values()].reduce((sum, list) => sum + list.length, 0),
    close() {
      for (const endpointId of [...waiters.keys()]) for (const waiter of take(endpointId)) waiter.settle(false);
    },
  };
}
