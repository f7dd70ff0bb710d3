/**
 * Relay registrations of the memory store (no session broker: `callerSession` is the session
 * name, docs/wire.md).
 *
 * - `connect` with the same generation renews the lease and keeps the endpoint id, even after
 *   expiry while the entry is not reaped; a new generation mints a new endpoint and supersedes
 *   (retires) the old one at once; a retired generation cannot connect again (a late renewal
 *   must not take over from its successor).
 * - A name is alive while its current registration is active and its lease is live.
 * - An ended registration (expired, disconnected or superseded) stays known for the retention
 *   window of the receipts it may pin; maintenance then reaps it unless it pins mail, and one
 *   that pins mail once its mail has expired, `relayMailLifetimeMs` after it ended at the latest
 *   (no mail reaches an ended registration, so all of it is older). Meanwhile the same generation
 *   renews it with its endpoint id, and a superseded one resolves to its successor (`successor-v1`).
 * - Registrations are the relay's scarcest shared budget and the relay cannot tell processes apart
 *   on loopback, so a place is kept only by use (`quotas-v1`): when a new registration finds the
 *   budget spent, it reclaims one that makes no use of its place, never the connecting session's
 *   own current one — an ended one holding no mail (oldest end first); else the first-made one
 *   that never made a bound request, once `relayRegistrationGraceMs` old (what a process
 *   registering names makes; a client's first request comes at once); else the live one idle
 *   longest, once idle `relayRegistrationIdleMs`; else an ended one holding mail (oldest end first).
 * - A protected registration (`binding-secret-v1`) keeps the digest of the secret its client
 *   chose; while it is live only a connect carrying that secret may renew or replace it, and after
 *   it ended only such a connect may revive it with the same generation (a new generation may take
 *   the name). The
 *   digest (64 characters) fits in `relayRegistrationOverheadBytes`, so protection costs no
 *   metadata budget of its own.
 */
import { canonicalBytes } from "../../protocol/canonical-json.ts";
import {
  relayActivityResolutionMs,
  relayMailLifetimeMs,
  maxRelayMetadataBytes,
  maxRelayRegistrations,
  relayRegistrationGraceMs,
  relayRegistrationIdleMs,
  relayRegistrationOverheadBytes,
  relayRegistrationRetentionMs,
} from "../../protocol/limits.ts";
import { sameDigest } from "../binding-secret.ts";
import { type ConnectOutcome, type ConnectRequest, isLive, type RegistrationState } from "./store.ts";

export interface Registration {
  readonly endpointId: string;
  readonly session: string;
  readonly generation: string;
  leaseExpiresAt: number;
  state: RegistrationState;
  /** When the registration stopped being active (superseded or disconnected). */
  retiredAt?: number;
  /** The registration that superseded this one. */
  successorId?: string;
  /** SHA-256 (hex) of the binding secret of a protected registration; never leaves the store. */
  secretDigest?: string;
  /** When it was made. */
  readonly madeAt: number;
  /** When its owner last made a bound request (to `relayActivityResolutionMs`); unset: never. */
  activeAt?: number;
  readonly metadataBytes: number;
}

export interface Registry {
  /**
   * `pinsMail` tells which registrations hold mail (reclaimed last); `onReclaim` is told of a
   * registration reclaimed to make room (it is gone from the registry by then).
   */
  connect(request: ConnectRequest, pinsMail: (endpointId: string) => boolean, onReclaim: (endpointId: string) => void): ConnectOutcome;
  get(endpointId: string): Registration | undefined;
  current(session: string): Registration | undefined;
  disconnect(registration: Registration, now: number): void;
  /** Records a bound request of the registration's owner at `now`. */
  touch(registration: Registration, now: number): void;
  /** The live successor of a superseded endpoint (following a chain of generations). */
  successor(endpointId: string, now: number): Registration | undefined;
  /**
   * Removes registrations that ended `relayRegistrationRetentionMs` ago and pin no mail, or
   * `relayMailLifetimeMs` ago (the caller expires what mail they still hold); returns their ids.
   */
  reap(now: number, pinsMail: (endpointId: string) => boolean): string[];
  /** Every session's current registration. */
  currents(): IterableIterator<Registration>;
  counts(): { registrations: number; sessions: number; metadataBytes: number };
}

/** When a registration ended (meaningful once it is not live). */
function endedAt(registration: Registration): number {
  return registration.state === "superseded" ? (registration.retiredAt ?? registration.leaseExpiresAt) : registration.leaseExpiresAt;
}

/**
 * The registrations and what indexes them: by endpoint id, each session's current one, the
 * never-used ones oldest first (a Map iterates in insertion order: a squatter's are found at once)
 * and the metadata they take. The registration records themselves are the registry's (below).
 */
interface Table {
  get(endpointId: string): Registration | undefined;
  current(session: string): Registration | undefined;
  setCurrent(registration: Registration): void;
  /** Whether one more registration of `size` metadata bytes fits the budgets. */
  fits(size: number): boolean;
  add(registration: Registration): void;
  remove(registration: Registration): void;
  /** The registration made a bound request: it is no longer never-used. */
  used(endpointId: string): void;
  values(): IterableIterator<Registration>;
  /** Never-used registrations, the first made first. */
  fresh(): IterableIterator<Registration>;
  currents(): IterableIterator<Registration>;
  counts(): { registrations: number; sessions: number; metadataBytes: number };
}

function createTable(): Table {
  const byEndpoint = new Map<string, Registration>();
  const bySession = new Map<string, string>();
  const fresh = new Map<string, Registration>();
  let metadataBytes = 0;

  return {
    get: (endpointId) => byEndpoint.get(endpointId),
    current(session) {
      const id = bySession.get(session);
      return id === undefined ? undefined : byEndpoint.get(id);
    },
    setCurrent: (registration) => void bySession.set(registration.session, registration.endpointId),
    fits: (size) => byEndpoint.size + 1 <= maxRelayRegistrations && metadataBytes + size <= maxRelayMetadataBytes,
    add(registration) {
      byEndpoint.set(registration.endpointId, registration);
      fresh.set(registration.endpointId, registration);
      metadataBytes += registration.metadataBytes;
    },
    remove(registration) {
      byEndpoint.delete(registration.endpointId);
      fresh.delete(registration.endpointId);
      metadataBytes -= registration.metadataBytes;
      if (bySession.get(registration.session) === registration.endpointId) bySession.delete(registration.session);
    },
    used: (endpointId) => void fresh.delete(endpointId),
    values: () => byEndpoint.values(),
    fresh: () => fresh.values(),
    *currents() {
      for (const endpointId of bySession.values()) {
        const registration = byEndpoint.get(endpointId);
        if (registration !== undefined) yield registration;
      }
    },
    counts: () => ({ registrations: byEndpoint.size, sessions: bySession.size, metadataBytes }),
  };
}

/**
 * The registration a new one may take the place of (see the module comment), never `keep`. It
 * scans the registry, which happens only while the registration budget is spent.
 */
function reclaimable(
  table: Table,
  now: number,
  keep: Registration | undefined,
  pinsMail: (endpointId: string) => boolean,
): Registration | undefined {
  let ended: Registration | undefined;
  let pinning: Registration | undefined;
  let idle: Registration | undefined;
  const earlier = (a: Registration, b: Registration | undefined) => b === undefined || endedAt(a) < endedAt(b);
  for (const registration of table.values()) {
    if (registration === keep) continue;
    if (!isLive(registration, now)) {
      if (!pinsMail(registration.endpointId)) {
        if (earlier(registration, ended)) ended = registration;
      } else if (earlier(registration, pinning)) pinning = registration;
    } else if (
      registration.activeAt !== undefined &&
      now - registration.activeAt >= relayRegistrationIdleMs &&
      (idle === undefined || registration.activeAt < idle.activeAt!)
    ) {
      idle = registration;
    }
  }
  if (ended !== undefined) return ended;
  // Never used: the first made (a Map iterates in insertion order) once its grace is over.
  for (const registration of table.fresh()) {
    if (registration === keep || !isLive(registration, now)) continue;
    if (now - registration.madeAt >= relayRegistrationGraceMs) return registration;
    break;
  }
  return idle ?? pinning;
}

/** A new registration, reclaiming places as needed; undefined when the registration budget is spent. */
function mint(
  table: Table,
  request: ConnectRequest,
  keep: Registration | undefined,
  pinsMail: (endpointId: string) => boolean,
  onReclaim: (endpointId: string) => void,
): Registration | undefined {
  const { session, generation, leaseMs, now, secretDigest } = request;
  const endpointId = crypto.randomUUID();
  const size = canonicalBytes({ endpointId, session, generation }) + relayRegistrationOverheadBytes;
  while (!table.fits(size)) {
    const victim = reclaimable(table, now, keep, pinsMail);
    if (victim === undefined) return undefined;
    table.remove(victim);
    onReclaim(victim.endpointId);
  }
  const registration: Registration = {
    endpointId,
    session,
    generation,
    leaseExpiresAt: now + leaseMs,
    state: "active",
    madeAt: now,
    metadataBytes: size,
    ...(secretDigest === undefined ? {} : { secretDigest }),
  };
  table.add(registration);
  return registration;
}

/**
 * The refusal of a connect that does not carry the secret of the session's protected current
 * registration, or undefined when the connect may go on (see `ConnectOutcome`, step 1).
 */
function protection(current: Registration | undefined, request: ConnectRequest): ConnectOutcome | undefined {
  if (current?.secretDigest === undefined) return undefined;
  const presented = request.secretDigest;
  if (presented !== undefined && sameDigest(current.secretDigest, presented)) return undefined;
  if (isLive(current, request.now)) return { kind: "session-protected", leaseExpiresAt: current.leaseExpiresAt };
  const revives = current.generation === request.generation && current.state !== "superseded";
  if (!revives) return undefined;
  return { kind: presented === undefined ? "secret-missing" : "secret-mismatch" };
}

/** Same generation: renew, same endpoint id — even after expiry or disconnect, until reaped. */
function renew(current: Registration, request: ConnectRequest): ConnectOutcome {
  current.leaseExpiresAt = request.now + request.leaseMs;
  current.state = "active";
  delete current.retiredAt;
  // A protected one already holds this digest (step 1); an unprotected one becomes protected.
  if (request.secretDigest !== undefined) current.secretDigest = request.secretDigest;
  return { kind: "connected", registration: current };
}

/** Whether the session's generation was superseded: a late connect of it must not take over from its successor. */
function retired(table: Table, session: string, generation: string): boolean {
  for (const registration of table.values()) {
    if (registration.session === session && registration.generation === generation && registration.state === "superseded") return true;
  }
  return false;
}

function connect(
  table: Table,
  request: ConnectRequest,
  pinsMail: (endpointId: string) => boolean,
  onReclaim: (endpointId: string) => void,
): ConnectOutcome {
  const current = table.current(request.session);
  const refusal = protection(current, request);
  if (refusal !== undefined) return refusal;
  if (current !== undefined && current.generation === request.generation && current.state !== "superseded") return renew(current, request);
  if (retired(table, request.session, request.generation)) return { kind: "generation-retired" };
  const next = mint(table, request, current, pinsMail, onReclaim);
  if (next === undefined) {
    const { registrations, metadataBytes } = table.counts();
    return { kind: "full", details: { registrations, metadataBytes } };
  }
  if (current !== undefined) {
    current.state = "superseded";
    current.retiredAt = request.now;
    current.successorId = next.endpointId;
  }
  table.setCurrent(next);
  return { kind: "connected", registration: next };
}

/** Follows a chain of generations from a superseded endpoint to its live successor. */
function successor(table: Table, endpointId: string, now: number): Registration | undefined {
  let registration = table.get(endpointId);
  const seen = new Set<string>();
  while (registration !== undefined && registration.state === "superseded" && registration.successorId !== undefined) {
    if (seen.has(registration.endpointId)) return undefined;
    seen.add(registration.endpointId);
    registration = table.get(registration.successorId);
  }
  return registration !== undefined && registration.endpointId !== endpointId && isLive(registration, now) ? registration : undefined;
}

function reap(table: Table, now: number, pinsMail: (endpointId: string) => boolean): string[] {
  const reaped: string[] = [];
  for (const registration of [...table.values()]) {
    if (isLive(registration, now)) continue;
    const kept = pinsMail(registration.endpointId) ? relayMailLifetimeMs : relayRegistrationRetentionMs;
    if (now - endedAt(registration) < kept) continue;
    table.remove(registration);
    reaped.push(registration.endpointId);
  }
  return reaped;
}

export function createRegistry(): Registry {
  const table = createTable();
  return {
    connect: (request, pinsMail, onReclaim) => connect(table, request, pinsMail, onReclaim),
    get: (endpointId) => table.get(endpointId),
    current: (session) => table.current(session),
    disconnect(registration, now) {
      registration.leaseExpiresAt = now;
      registration.state = "disconnected";
      registration.retiredAt = now;
    },
    touch(registration, now) {
      if (registration.activeAt !== undefined && now - registration.activeAt < relayActivityResolutionMs) return;
      registration.activeAt = now;
      table.used(registration.endpointId);
    },
    successor: (endpointId, now) => successor(table, endpointId, now),
    reap: (now, pinsMail) => reap(table, now, pinsMail),
    currents: () => table.currents(),
    counts: () => table.counts(),
  };
}
