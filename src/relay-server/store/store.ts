/**
 * `RelayStore`: everything the relay keeps — registrations, mailboxes, dedupe receipts, budgets,
 * the epoch and the `watch-v1` doorbell — behind one seam. The engine (../engine.ts) reaches
 * state only through it, so one engine runs on the in-process store (memory.ts) or on a store
 * that several relay processes share.
 *
 * Rules for every implementation:
 * - every method returns a Promise and is atomic on its own: no caller sees a half-done call,
 *   and calls from several relay processes serialise (in Redis: one Lua script per method);
 * - outcomes the wire tells apart are returned as tagged values, never thrown: the engine keeps
 *   the check order and maps outcomes to wire errors. A store throws only when it fails (the
 *   relay answers 503 `RELAY_UNAVAILABLE`) or when an invariant breaks (`INVARIANT_VIOLATED`,
 *   answered the same way);
 * - cursors are decimal strings, already well formed when passed in (../../protocol/wire.ts);
 * - binding secrets (`binding-secret-v1`) reach a store only as digests (../binding-secret.ts):
 *   it keeps the digest of a protected registration's secret (the one its client chose) and
 *   compares digests in constant time; `RegistrationView` has no digest, so the engine never
 *   reads one;
 * - `now` is the caller's clock in epoch milliseconds: leases, freshness, receipts, mail expiry
 *   and registration activity of one request follow one clock;
 * - fair shares (`quotas-v1`, `mail-expiry-v1`; limits.ts, "Fair shares"): a sender is the
 *   registration an envelope comes from; its usage is kept beside the relay-wide budgets and
 *   checked in the same atomic admission. Queued mail leaves its mailbox when acknowledged, when the
 *   mailbox is dropped, or when it expires (`maintain`); each frees every budget it held;
 * - the relay owns the store it is given: closing the relay closes the store;
 * - a shared store's state can be lost under the relay (Redis restarted without persistence: a new
 *   epoch). `epoch()` then reads the epoch of the state as it is now, and any other call that finds
 *   its state replaced has no effect and throws `stateReplaced()` (`RELAY_RESET`); the engine then
 *   adopts the new epoch, so every client sees a reset, exactly as after a relay restart.
 */
import { TaskError } from "../../protocol/errors.ts";
import type { TaskEndpoint } from "../../protocol/schemas.ts";

/** What a shared store throws when its state was replaced since the relay last read the epoch. */
export function stateReplaced(): TaskError {
  return new TaskError("RELAY_RESET", { details: { mayHaveBeenDelivered: true, stateReplaced: true } });
}

/** Whether an error is a store's `stateReplaced()`. */
export function isStateReplaced(error: unknown): boolean {
  return error instanceof TaskError && error.code === "RELAY_RESET" && error.details.stateReplaced === true;
}

export type RegistrationState = "active" | "disconnected" | "superseded";

/** What the engine reads of a registration. */
export interface RegistrationView {
  readonly endpointId: string;
  readonly session: string;
  readonly state: RegistrationState;
  readonly leaseExpiresAt: number;
}

/** A registration is live while it is active and its lease has not lapsed. */
export function isLive(registration: RegistrationView, now: number): boolean {
  return registration.state === "active" && registration.leaseExpiresAt > now;
}

export interface ConnectRequest {
  readonly session: string;
  readonly generation: string;
  readonly leaseMs: number;
  readonly now: number;
  /** The digest of the connect's `bindingSecret` (`binding-secret-v1`), the secret its client chose. */
  readonly secretDigest?: string;
}

/**
 * Decided in this order:
 * 1. a protected current registration of the session (`binding-secret-v1`) whose digest the
 *    request's `secretDigest` does not equal (none, or another): `session-protected` while it is
 *    live (with its lease end); `secret-missing` / `secret-mismatch` when the same generation would
 *    revive it after it ended; otherwise the name is free. An equal digest is the same client: its
 *    renewal, its rebind, or its retry after a lost reply, all allowed;
 * 2. `connected`: the same generation renewed its registration (same endpoint id, also after its
 *    lease lapsed or it disconnected, while not reaped), or a new generation got a new endpoint id
 *    and the previous one was retired at once (its mailbox dropped, its watch answered). A new
 *    endpoint that finds the registration budget spent first reclaims one registration that makes
 *    no use of its place (`reclaimVictim` order: never used, then ended, then idle for
 *    `relayRegistrationIdleMs`; never the session's own current one): it is removed as if reaped,
 *    its mail expired and its watch answered. With
 *    `secretDigest` the registration is protected by that digest afterwards (a renewed protected
 *    one already held it); without it a new endpoint is unprotected and a renewal stays so;
 * 3. `generation-retired`: this generation was superseded and may not connect again;
 * 4. `full`: the registration budget is spent and nothing could be reclaimed.
 */
export type ConnectOutcome =
  | { readonly kind: "connected"; readonly registration: RegistrationView }
  | { readonly kind: "session-protected"; readonly leaseExpiresAt: number }
  | { readonly kind: "secret-missing" }
  | { readonly kind: "secret-mismatch" }
  | { readonly kind: "generation-retired" }
  | { readonly kind: "full"; readonly details: Readonly<Record<string, number>> };

/**
 * A bound request's secret against its endpoint's registration: `ok` when the registration is
 * unprotected and the request carries none, or the digests are equal; `missing` when a protected
 * registration gets none; `mismatch` for another secret, or any secret for an unprotected one.
 */
export type SecretMatch = "ok" | "missing" | "mismatch";

/** The two lookups of a binding check, in one call. */
export interface BindingLookup {
  /** The caller's session name has a registration (in any state). */
  readonly callerKnown: boolean;
  /** The registration of the binding's endpoint id, if known. */
  readonly registration: RegistrationView | undefined;
  /** The request's secret against that registration (`ok` when there is none). */
  readonly secret: SecretMatch;
}

/**
 * Which share of a sender (`quotas-v1`) an admission would exceed: its share of the target's
 * mailbox, of the relay-wide envelope budget, or of the receipt budget (its sends within the
 * receipt window).
 */
export type SenderQuota = "mailbox-share" | "sender-active" | "sender-receipts";

/** A binding to look up, the use recorded at `now` when it passes (see `RelayStore.binding`). */
export interface BindingRequest {
  readonly session: string;
  readonly endpointId: string;
  readonly secretDigest?: string;
  readonly now: number;
}

/** Whether a lookup passes every binding check: the caller known, its own live registration, its secret ok. */
export function bindingPasses(lookup: BindingLookup, session: string, now: number): boolean {
  const registration = lookup.registration;
  return (
    lookup.callerKnown &&
    registration !== undefined &&
    isLive(registration, now) &&
    registration.session === session &&
    lookup.secret === "ok"
  );
}

/** An operation run with its binding in one step (`RelayStore.bound`). */
export type BoundOperation =
  | { readonly kind: "admit"; readonly request: AdmitRequest }
  | { readonly kind: "page"; readonly after: string; readonly limit: number }
  | { readonly kind: "acknowledge"; readonly envelopeId: string }
  | { readonly kind: "acknowledgeBatch"; readonly envelopeIds: readonly string[] }
  | {
      /**
       * `send-batch-v1` / `ack-carry-v1`: each admission on its own, in order; one whose target saw a
       * refusal (or a skip) earlier in the list is skipped. Then, only if every admission was
       * accepted, each of `acknowledge` (the binding's endpoint's deliveries) as `acknowledgeBatch`.
       */
      readonly kind: "admitEach";
      readonly requests: readonly AdmitRequest[];
      readonly acknowledge?: readonly string[];
    };

/** What each bound operation answers. */
export interface BoundOutcomes {
  readonly admit: AdmitOutcome;
  readonly page: PageOutcome;
  readonly acknowledge: AcknowledgeOutcome;
  /** Each id's outcome, in the order given (each acknowledgement atomic on its own). */
  readonly acknowledgeBatch: readonly AcknowledgeOutcome[];
  readonly admitEach: AdmitEachOutcome;
}

/** What `admitEach` did: each admission's outcome in order (`skipped`: not tried), and the acknowledgements when every one was accepted. */
export interface AdmitEachOutcome {
  readonly admitted: readonly (AdmitOutcome | { readonly kind: "skipped" })[];
  readonly acknowledged?: readonly AcknowledgeOutcome[];
}

/** A bound operation's binding lookup and, when it passed, the operation's outcome. */
export interface BoundResult<K extends BoundOperation["kind"]> {
  readonly lookup: BindingLookup;
  readonly outcome?: BoundOutcomes[K];
}

export interface AdmitRequest {
  readonly envelopeId: string;
  /** SHA-256 of the envelope's canonical JSON (dedupe). */
  readonly digest: string;
  /** The envelope's canonical JSON, stored as is and spliced into pages. */
  readonly text: string;
  readonly source: TaskEndpoint;
  /** A local endpoint (the engine refuses other relays first). */
  readonly target: TaskEndpoint;
  /** Whether `createdAt` is inside the freshness window at `now` (only new admissions need it). */
  readonly fresh: boolean;
  readonly now: number;
}

export type CapacityBudget = "mailbox" | "active" | "receipts" | "cursor";

/**
 * The outcome of one atomic admission, decided in this order:
 * 1. `target-not-live`: the target has no live registration;
 * 2. dedupe by envelope id: another digest, or an envelope whose mailbox was dropped, is
 *    `conflict`; one that expired unacknowledged (`mail-expiry-v1`) is `expired`; otherwise the
 *    same digest answers the earlier acceptance with `duplicate:true`;
 * 3. `stale`: a new envelope that is not `fresh`;
 * 4. `full` with budget `cursor`: the mailbox's cursor space is spent;
 * 5. `quota`: the sender would exceed a share (`SenderQuota`, checked in that order) — nothing is
 *    reserved and nothing evicted;
 * 6. `full`: a budget (mailbox items/bytes, relay-wide items/bytes, receipts count/bytes) is
 *    spent — nothing is reserved and nothing evicted;
 * 7. `accepted`: all budgets and shares reserved, the next cursor of the mailbox assigned, the
 *    receipt kept and the target's doorbell rung. `acceptedAt` is the first acceptance's time (a
 *    duplicate's too): the mail expires `relayMailLifetimeMs` after it.
 */
export type AdmitOutcome =
  | { readonly kind: "accepted"; readonly acceptanceId: string; readonly duplicate: boolean; readonly acceptedAt: number }
  | { readonly kind: "target-not-live" }
  | { readonly kind: "conflict" }
  | { readonly kind: "expired" }
  | { readonly kind: "stale" }
  | { readonly kind: "quota"; readonly quota: SenderQuota; readonly details: Readonly<Record<string, number>> }
  | { readonly kind: "full"; readonly budget: CapacityBudget; readonly details: Readonly<Record<string, number>> };

/** Items after `after` up to `limit` and the page byte budget, as page JSON; `cursor-ahead` past the highest cursor. */
export type PageOutcome =
  | { readonly kind: "page"; readonly itemsJson: string; readonly nextCursor: string; readonly hasMore: boolean }
  | { readonly kind: "cursor-ahead"; readonly highestCursor: string };

/**
 * - `acknowledged`: the item left the mailbox and freed its mailbox and relay-wide budget;
 *   `duplicate:true` when it was acknowledged before, within the receipt window;
 * - `unknown`: no receipt, another endpoint's envelope, or one whose mailbox was dropped;
 * - `gone`: the receipt exists but the item is no longer in the mailbox (it expired).
 */
export type AcknowledgeOutcome =
  | { readonly kind: "acknowledged"; readonly duplicate: boolean }
  | { readonly kind: "unknown" }
  | { readonly kind: "gone" };

export interface WatchRequest {
  readonly endpointId: string;
  readonly after: string;
  readonly waitMs: number;
  readonly signal?: AbortSignal;
  /** Called once, right before the watch starts waiting (the HTTP layer frees its request slot). */
  readonly onPark?: () => void;
}

/**
 * The doorbell. Answers at once when mail after `after` is pending; else waits until mail is
 * admitted to the endpoint, the endpoint disconnects or is superseded, a newer watch of the
 * endpoint replaces this one (at most `relayWatchesPerEndpoint`), the wait elapses, the signal
 * aborts or the store closes — then answers the state at that moment. (A shared store subscribes
 * before it looks, e.g. Redis pub/sub on a channel per endpoint, so no ring is lost in between.)
 */
export type WatchOutcome =
  | { readonly kind: "watch"; readonly pending: boolean; readonly highestCursor: string }
  | { readonly kind: "cursor-ahead"; readonly highestCursor: string };

export interface MaintenanceReport {
  /**
   * Registrations removed: ended past `relayRegistrationRetentionMs` and pinning no mail, or ended
   * past `relayMailLifetimeMs` (their mail, if any is left, expired with them).
   */
  readonly reaped: number;
  /**
   * Receipts removed: past `relayReceiptRetentionMs` after acceptance and no longer pinned by a
   * mailbox item; an expired envelope's receipt `relayReceiptRetentionMs` after it expired (so a
   * resend is answered `expired` meanwhile).
   */
  readonly expiredReceipts: number;
  /** Queued envelopes that expired: unacknowledged `relayMailLifetimeMs` after acceptance (`mail-expiry-v1`). */
  readonly expiredMail: number;
}

export interface StoreUsage {
  readonly activeItems: number;
  readonly activeBytes: number;
  readonly receipts: number;
  readonly receiptBytes: number;
  readonly registrations: number;
  readonly sessions: number;
  readonly metadataBytes: number;
  readonly expiryEntries: number;
  readonly watching: number;
  /** Round trips to a shared store so far (the Redis store's commands); absent for the memory store. */
  readonly roundTrips?: number;
}

export interface RelayStore {
  /**
   * The epoch of this store's state: a fresh store has a fresh epoch; it never changes while the
   * state lives. A shared store reads it where the state lives (creating it for a new, empty state).
   */
  epoch(): Promise<string>;

  // -- registrations ----------------------------------------------------------------------------
  connect(request: ConnectRequest): Promise<ConnectOutcome>;
  /**
   * The caller's session and the binding endpoint's registration, for the engine's binding checks;
   * `secretDigest` is the digest of the request's `bindingSecret`, if it carries one. With `now`,
   * a binding that passes (the caller's own live registration, its secret `ok`) counts as the
   * registration's use at `now` (recorded at most every `relayActivityResolutionMs`): a used,
   * recently active registration is not reclaimed under contention.
   */
  binding(session: string, endpointId: string, secretDigest?: string, now?: number): Promise<BindingLookup>;
  registration(endpointId: string): Promise<RegistrationView | undefined>;
  /** The live successor of an endpoint retired by newer generations of its session (`successor-v1`). */
  successor(endpointId: string, now: number): Promise<RegistrationView | undefined>;
  /** Ends the lease now; accepted mail stays; a parked watch of the endpoint is answered. */
  disconnect(endpointId: string, now: number): Promise<void>;
  /** A session's current registration (in any state). */
  sessionRegistration(session: string): Promise<RegistrationView | undefined>;
  /** The current registration of every session whose registration is live. */
  liveRegistrations(now: number): Promise<RegistrationView[]>;

  // -- mail -------------------------------------------------------------------------------------
  /** One atomic admission (see `AdmitOutcome`): two relays racing on one mailbox never over-admit nor share a cursor. */
  admit(request: AdmitRequest): Promise<AdmitOutcome>;
  /**
   * A bound operation in one step: the binding lookup and, when it passes (`bindingPasses`), the
   * operation on the binding's endpoint (an admission, a page, an acknowledgement) — one atomic
   * script for a shared store, so each costs one round trip to it.
   */
  bound<K extends BoundOperation["kind"]>(
    binding: BindingRequest,
    operation: Extract<BoundOperation, { kind: K }>,
  ): Promise<BoundResult<K>>;
  page(endpointId: string, after: string, limit: number): Promise<PageOutcome>;
  acknowledge(endpointId: string, envelopeId: string): Promise<AcknowledgeOutcome>;
  watch(request: WatchRequest): Promise<WatchOutcome>;

  // -- upkeep -----------------------------------------------------------------------------------
  /** Expires queued mail past its lifetime, reaps registrations, expires receipts and checks the budget invariants. */
  maintain(now: number): Promise<MaintenanceReport>;
  usage(): Promise<StoreUsage>;
  /** Answers every parked watch and releases the store's resources. */
  close(): Promise<void>;
}
