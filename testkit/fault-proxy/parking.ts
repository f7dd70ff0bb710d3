/**
 * Requests the fault proxy keeps waiting: `hold` parks a request until `release()`, `hang` until
 * its client leaves; either ends when its client disconnects or the proxy stops. `stop()` marks
 * the proxy stopping (new requests are refused) and ends every wait.
 */

export interface Parking {
  /** Resolves "gone" when the client disconnects or the proxy stops, else with `extra`'s value. */
  untilGoneOr<T>(signal: AbortSignal, extra?: Promise<T>): Promise<T | "gone">;
  /** Parks a request until `release()` (true: forward it) or its end (false). */
  hold(signal: AbortSignal): Promise<boolean>;
  /** Requests parked by `hold` right now. */
  held(): number;
  /** Forwards the oldest `count` held requests; how many were released. */
  release(count: number): number;
  stopping(): boolean;
  /** Marks the proxy stopping and ends hanging and held requests. */
  stop(): void;
}

export function createParking(): Parking {
  let stopping = false;
  /** Parked `hold` requests, oldest first: resolve(true) = forward, resolve(false) = give up. */
  const held: Array<(forward: boolean) => void> = [];
  /** Wakers of `hang`/`hold` waits, so stop() can end them. */
  const stopWakers = new Set<() => void>();

  /** Resolves when the client disconnects, the proxy stops, or `extra` resolves. */
  function untilGoneOr<T>(signal: AbortSignal, extra?: Promise<T>): Promise<T | "gone"> {
    return new Promise((resolve) => {
      const gone = () => {
        cleanup();
        resolve("gone");
      };
      const cleanup = () => {
        signal.removeEventListener("abort", gone);
        stopWakers.delete(gone);
      };
      if (signal.aborted || stopping) return resolve("gone");
      signal.addEventListener("abort", gone, { once: true });
      stopWakers.add(gone);
      extra?.then((value) => {
        cleanup();
        resolve(value);
      });
    });
  }

  return {
    untilGoneOr,
    async hold(signal) {
      let release: (forward: boolean) => void = () => undefined;
      const released = new Promise<boolean>((resolve) => {
        release = resolve;
      });
      held.push(release);
      const outcome = await untilGoneOr(signal, released);
      const index = held.indexOf(release);
      if (index >= 0) held.splice(index, 1);
      return outcome === true;
    },
    held: () => held.length,
    release(count) {
      let released = 0;
      while (held.length > 0 && released < count) {
        held.shift()!(true);
        released += 1;
      }
      return released;
    },
    stopping: () => stopping,
    stop() {
      stopping = true;
      for (const waker of [...stopWakers]) waker();
      while (held.length > 0) held.shift()!(false);
    },
  };
}
