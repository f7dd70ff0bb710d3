/**
 * One core's lifetime: from its creation over a store until `close()`. It is fenced when it closes
 * (nothing of it may change state afterwards: late replies and callbacks check `closed()`), and it
 * belongs to one endpoint at a time — the store's cursors and tasks mean nothing on another. The
 * recovering core re-homes a lifetime onto a fresh endpoint after relay loss (`rebind`, reconnect.ts);
 * a rebind of the session underneath it that nobody re-homed is relay loss (`checkEndpoint`).
 */
import { TaskError } from "../protocol/errors.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";

export interface Lifetime {
  /** Aborted when the lifetime closes. */
  readonly signal: AbortSignal;
  closed(): boolean;
  /** Fences the lifetime: every call after this is `RELAY_CLOSED`. */
  close(): void;
  /** The endpoint the lifetime is bound to, once it bound one. */
  endpoint(): TaskEndpoint | undefined;
  /** The first binding is adopted; a different one later throws `RELAY_REBIND_REQUIRED` (the lifetime is lost). */
  checkEndpoint(endpoint: TaskEndpoint): void;
  /** Re-homes the lifetime onto a new endpoint; returns the one it was bound to before. */
  rebind(endpoint: TaskEndpoint): TaskEndpoint | undefined;
}

export function createLifetime(): Lifetime {
  const fence = new AbortController();
  let bound: TaskEndpoint | undefined;
  return {
    signal: fence.signal,
    closed: () => fence.signal.aborted,
    close: () => fence.abort(new TaskError("RELAY_CLOSED")),
    endpoint: () => bound,
    checkEndpoint(endpoint) {
      if (bound === undefined) {
        bound = endpoint;
        return;
      }
      if (bound.relay !== endpoint.relay || bound.id !== endpoint.id) {
        throw new TaskError("RELAY_REBIND_REQUIRED", {
          message: "the relay session was rebound under this lifetime",
          details: { endpoint: bound, rebound: endpoint },
        });
      }
    },
    rebind(endpoint) {
      const previous = bound;
      bound = endpoint;
      return previous;
    },
  };
}
