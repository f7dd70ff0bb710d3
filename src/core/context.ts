/**
 * The state one TaskCore lifetime shares between its operations and its pass phases.
 */
import { TaskError, toTaskError } from "../protocol/errors.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import type { RelaySession } from "../relay-client/session.ts";
import type { CoreStore } from "./bookkeeping.ts";
import type { Hold } from "./hold.ts";
import type { PresentationHost } from "./host.ts";
import type { ProofBook } from "./proofs.ts";
import type { TaskTimers } from "./timers.ts";
import type { TrustState } from "./trust.ts";

export interface CoreContext {
  readonly store: CoreStore;
  readonly session: RelaySession;
  /** Stamps task records and envelopes (wall clock, ms). */
  readonly clock: () => number;
  /** Drives deadlines, slices and cooldowns. */
  readonly timers: TaskTimers;
  readonly host: PresentationHost;
  /** Who this core is and whom it trusts; the gate's per-lifetime memory. */
  readonly trust: TrustState;
  /** Which keys hold which endpoints, and the asks under way (proofs.ts owns it). */
  readonly proofs: ProofBook;
  /** Aborted when the lifetime closes: nothing of it may mutate state afterwards. */
  readonly fence: AbortController;
  /** Sends in flight by envelope id: concurrent same-id sends join instead of retransmitting. */
  readonly sending: Map<string, Promise<unknown>>;
  /** Receipts written before a wake, held (never sent) until the wake is observed or withdrawn. */
  readonly withheld: Map<string, Promise<void>>;
  /** Requests a background refresh (the owner coalesces requests). */
  readonly requestRefresh: () => void;
  /** The endpoint this lifetime first bound (set once by `checkEndpoint`). */
  boundEndpoint: TaskEndpoint | undefined;
  /** A configuration refusal holding all relay work (see hold.ts). */
  hold: Hold | undefined;
  /** When each task's progress was last shown to the model (origin side; rate limit). */
  readonly progressShownAt: Map<string, number>;
  /** Orphaned tasks move by themselves to their lost worker's live successor. */
  readonly autoReassign: boolean;
  /** The most sessions a delegation chain may hold (sending and receiving; see lineage.ts). */
  readonly maxDepth: number;
  /** When each task's peer was last probed or looked up (timers clock; rate limit). */
  readonly probedAt: Map<string, number>;
  /** When a request last found the relay unreachable (timers clock), until one reaches it (outage.ts). */
  unreachableAt: number | undefined;
  /**
   * Tasks that may be looking for their peer after a relay restart: a superset of those whose meta
   * has `reconnectingSince` (the meta decides; reconnect.ts drops the others lazily).
   */
  readonly reconnecting: Set<string>;
}

export function isClosed(context: CoreContext): boolean {
  return context.fence.signal.aborted;
}

/** Throws `RELAY_CLOSED` once the lifetime is fenced. */
export function assertOpen(context: CoreContext, operation: string): void {
  if (isClosed(context)) throw new TaskError("RELAY_CLOSED", { details: { operation } });
}

/** Rethrows relay loss (the lifetime must be replaced); any other failure is the caller's to record. */
export function rethrowRelayLoss(error: unknown): void {
  const failure = toTaskError(error);
  if (failure.spec.relayLoss) throw failure;
}

/** This endpoint, as bound on the relay. */
export function me(context: CoreContext): TaskEndpoint {
  const binding = context.session.binding();
  if (binding === undefined) throw new TaskError("RELAY_REBIND_REQUIRED", { message: "the relay session is not bound yet", details: {} });
  return binding.endpoint;
}

/**
 * A lifetime belongs to one endpoint: its store's cursors and tasks mean nothing on another. When
 * the session was rebound underneath it, the lifetime is lost (replace it with a fresh store).
 */
export function checkEndpoint(context: CoreContext, endpoint: TaskEndpoint): void {
  const first = context.boundEndpoint;
  if (first === undefined) {
    context.boundEndpoint = endpoint;
    return;
  }
  if (first.relay !== endpoint.relay || first.id !== endpoint.id) {
    throw new TaskError("RELAY_REBIND_REQUIRED", {
      message: "the relay session was rebound under this lifetime",
      details: { endpoint: first, rebound: endpoint },
    });
  }
}
