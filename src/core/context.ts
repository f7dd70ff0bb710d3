/**
 * What one core's operations and pass phases share: the dependencies it was given (store, relay
 * session, clocks, presentation host, refresh request, settings) and one object per concern, each
 * owning its state and changed only through its own functions (no file writes another concern's
 * fields; tests/unit/ownership.test.ts checks it):
 * - `lifetime` (lifetime.ts): the fence and the endpoint this core is bound to;
 * - `health` (relay-health.ts): the configuration hold and the outage wait;
 * - `sends` (send-registry.ts): envelopes in flight and receipts withheld for a wake;
 * - `search` (peer-search.ts): tasks looking for their peer, and the paces of probes and lookups;
 * - `progressPacing` (pacer.ts): how often a task's progress is shown to the model;
 * - `trust` (trust.ts) and `proofs` (proofs.ts, the book's shape in proof-book.ts): who this core
 *   is, whom it trusts, who proved what.
 */
import { TaskError, toTaskError } from "../protocol/errors.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import type { VolatileTaskSession } from "../relay-client/session.ts";
import type { CoreStore } from "./bookkeeping.ts";
import type { PresentationHost } from "./host.ts";
import type { Lifetime } from "./lifetime.ts";
import type { Pacer } from "./pacer.ts";
import type { PeerSearch } from "./peer-search.ts";
import type { ProofBook } from "./proof-book.ts";
import type { RelayHealth } from "./relay-health.ts";
import type { SendRegistry } from "./send-registry.ts";
import type { TaskTimers } from "./timers.ts";
import type { TrustState } from "./trust.ts";

export interface CoreSettings {
  /** Orphaned tasks move by themselves to their lost worker's live successor. */
  readonly autoReassign: boolean;
  /** The most sessions a delegation chain may hold (sending and receiving; see lineage.ts). */
  readonly maxDepth: number;
  /** The most tasks this core may hold active as their origin (the fan-out cap; none when unset). */
  readonly maxActiveTasks?: number;
}

export interface CoreContext {
  readonly store: CoreStore;
  readonly session: VolatileTaskSession;
  /** Stamps task records and envelopes (wall clock, ms). */
  readonly clock: () => number;
  /** Drives deadlines, slices, cooldowns and paces. */
  readonly timers: TaskTimers;
  readonly host: PresentationHost;
  /** Requests a background refresh (the owner coalesces requests). */
  readonly requestRefresh: () => void;
  readonly settings: CoreSettings;
  readonly lifetime: Lifetime;
  readonly health: RelayHealth;
  readonly sends: SendRegistry;
  readonly search: PeerSearch;
  readonly progressPacing: Pacer;
  /** Who this core is and whom it trusts; the gate's memory for this lifetime. */
  readonly trust: TrustState;
  /** Which keys hold which endpoints, and the asks under way. */
  readonly proofs: ProofBook;
}

export function isClosed(context: CoreContext): boolean {
  return context.lifetime.closed();
}

/** Throws `RELAY_CLOSED` once the lifetime is fenced. */
export function assertOpen(context: CoreContext, operation: string): void {
  if (isClosed(context)) throw new TaskError("RELAY_CLOSED", { details: { operation } });
}

/** Rethrows relay loss (the configured core re-homes the lifetime); any other failure is the caller's to record. */
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
