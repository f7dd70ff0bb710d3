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
 *   window of the receipts it may pin; maintenance then reaps it unless it pins mail. Meanwhile
 *   the same generation renews it with its endpoint id, and a superseded one resolves to its
 *   successor (`successor-v1`).
 * - A protected registration (`binding-secret-v1`) keeps the digest of the secret its client
 *   chose; while it is live only a connect carrying that secret may renew or replace it, and after
 *   it ended only such a connect may revive it with the same generation (a new generation may take
 *   the name). The
 *   digest (64 characters) fits in `relayRegistrationOverheadBytes`, so protection costs no
 *   metadata budget of its own.
 */
import { canonicalBytes } from "../../protocol/canonical-json.ts";
import {
  relayMaxMetadataBytes,
  relayMaxRegistrations,
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
  readonly metadataBytes: number;
}

export interface Registry {
  connect(request: ConnectRequest): ConnectOutcome;
  get(endpointId: string): Registration | undefined;
  current(session: string): Registration | undefined;
  disconnect(registration: Registration, now: number): void;
  /** The live successor of a superseded endpoint (following a chain of generations). */
  successor(endpointId: string, now: number): Registration | undefined;
  /** Removes registrations that are expired (or retired past retention) and pin no mail. */
  reap(now: number, pinsMail: (endpointId: string) => boolean): string[];
  /** Every session's current registration. */
  currents(): IterableIterator<Registration>;
  counts(): { registrations: number; sessions: number; metadataBytes: number };
}

export function createRegistry(): Registry {
  const byEndpoint = new Map<string, Registration>();
  const bySession = new Map<string, string>();
  let metadataBytes = 0;

  /** A new registration, or undefined when the registration budget is spent. */
  function mint(session: string, generation: string, leaseExpiresAt: number, secretDigest: string | undefined): Registration | undefined {
    const endpointId = crypto.randomUUID();
    const size = canonicalBytes({ endpointId, session, generation }) + relayRegistrationOverheadBytes;
    if (byEndpoint.size + 1 > relayMaxRegistrations || metadataBytes + size > relayMaxMetadataBytes) return undefined;
    const registration: Registration = {
      endpointId,
      session,
      generation,
      leaseExpiresAt,
      state: "active",
      metadataBytes: size,
      ...(secretDigest === undefined ? {} : { secretDigest }),
    };
    byEndpoint.set(endpointId, registration);
    metadataBytes += size;
    return registration;
  }

  function* currents(): IterableIterator<Registration> {
    for (const endpointId of bySession.values()) {
      const registration = byEndpoint.get(endpointId);
      if (registration !== undefined) yield registration;
    }
  }

  function remove(registration: Registration): void {
    byEndpoint.delete(registration.endpointId);
    metadataBytes -= registration.metadataBytes;
    if (bySession.get(registration.session) === registration.endpointId) bySession.delete(registration.session);
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

  return {
    connect(request) {
      const { session, generation, leaseMs, now, secretDigest } = request;
      const leaseExpiresAt = now + leaseMs;
      const currentId = bySession.get(session);
      const current = currentId === undefined ? undefined : byEndpoint.get(currentId);
      const refusal = protection(current, request);
      if (refusal !== undefined) return refusal;
      if (current !== undefined && current.generation === generation && current.state !== "superseded") {
        // Same generation: renew, same endpoint id — even after expiry or disconnect, until reaped.
        current.leaseExpiresAt = leaseExpiresAt;
        current.state = "active";
        delete current.retiredAt;
        // A protected one already holds this digest (step 1); an unprotected one becomes protected.
        if (secretDigest !== undefined) current.secretDigest = secretDigest;
        return { kind: "connected", registration: current };
      }
      // A late connect of a retired generation must not take over from its successor.
      for (const registration of byEndpoint.values()) {
        if (registration.session === session && registration.generation === generation && registration.state === "superseded") {
          return { kind: "generation-retired" };
        }
      }
      const next = mint(session, generation, leaseExpiresAt, secretDigest);
      if (next === undefined) return { kind: "full", details: { registrations: byEndpoint.size, metadataBytes } };
      if (current !== undefined) {
        current.state = "superseded";
        current.retiredAt = now;
        current.successorId = next.endpointId;
      }
      bySession.set(session, next.endpointId);
      return { kind: "connected", registration: next };
    },
    get: (endpointId) => byEndpoint.get(endpointId),
    current(session) {
      const id = bySession.get(session);
      return id === undefined ? undefined : byEndpoint.get(id);
    },
    disconnect(registration, now) {
      registration.leaseExpiresAt = now;
      registration.state = "disconnected";
      registration.retiredAt = now;
    },
    successor(endpointId, now) {
      let registration = byEndpoint.get(endpointId);
      const seen = new Set<string>();
      while (registration !== undefined && registration.state === "superseded" && registration.successorId !== undefined) {
        if (seen.has(registration.endpointId)) return undefined;
        seen.add(registration.endpointId);
        registration = byEndpoint.get(registration.successorId);
      }
      return registration !== undefined && registration.endpointId !== endpointId && isLive(registration, now) ? registration : undefined;
    },
    reap(now, pinsMail) {
      const reaped: string[] = [];
      for (const registration of [...byEndpoint.values()]) {
        const endedAt = registration.state === "superseded" ? (registration.retiredAt ?? now) : registration.leaseExpiresAt;
        const expired = now - endedAt >= relayRegistrationRetentionMs;
        if (!expired || pinsMail(registration.endpointId)) continue;
        remove(registration);
        reaped.push(registration.endpointId);
      }
      return reaped;
    },
    currents,
    counts: () => ({ registrations: byEndpoint.size, sessions: bySession.size, metadataBytes }),
  };
}
