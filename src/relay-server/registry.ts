/**
 * Relay registrations (Part B §1: no session broker; `callerSession` is the session name).
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
 */
import { canonicalBytes } from "../protocol/canonical-json.ts";
import { TaskError } from "../protocol/errors.ts";
import {
  RELAY_ID,
  relayMaxMetadataBytes,
  relayMaxRegistrations,
  relayRegistrationOverheadBytes,
  relayRegistrationRetentionMs,
} from "../protocol/limits.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";

export type RegistrationState = "active" | "disconnected" | "superseded";

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
  readonly metadataBytes: number;
}

export interface Registry {
  connect(input: { session: string; generation: string; leaseMs: number; now: number }): Registration;
  get(endpointId: string): Registration | undefined;
  current(session: string): Registration | undefined;
  isLive(registration: Registration, now: number): boolean;
  disconnect(registration: Registration, now: number): void;
  /** The live successor of a superseded endpoint (following a chain of generations). */
  successor(endpointId: string, now: number): Registration | undefined;
  /** Removes registrations that are expired (or retired past retention) and pin no mail. */
  reap(now: number, pinsMail: (endpointId: string) => boolean): string[];
  endpointOf(registration: Registration): TaskEndpoint;
  sessions(): string[];
  counts(): { registrations: number; sessions: number; metadataBytes: number };
}

export function createRegistry(): Registry {
  const byEndpoint = new Map<string, Registration>();
  const bySession = new Map<string, string>();
  let metadataBytes = 0;

  function isLive(registration: Registration, now: number): boolean {
    return registration.state === "active" && registration.leaseExpiresAt > now;
  }

  function mint(session: string, generation: string, leaseExpiresAt: number): Registration {
    const endpointId = crypto.randomUUID();
    const size = canonicalBytes({ endpointId, session, generation }) + relayRegistrationOverheadBytes;
    if (byEndpoint.size + 1 > relayMaxRegistrations || metadataBytes + size > relayMaxMetadataBytes) {
      throw new TaskError("RELAY_CAPACITY", { details: { budget: "registrations", registrations: byEndpoint.size, metadataBytes } });
    }
    const registration: Registration = { endpointId, session, generation, leaseExpiresAt, state: "active", metadataBytes: size };
    byEndpoint.set(endpointId, registration);
    metadataBytes += size;
    return registration;
  }

  function remove(registration: Registration): void {
    byEndpoint.delete(registration.endpointId);
    metadataBytes -= registration.metadataBytes;
    if (bySession.get(registration.session) === registration.endpointId) bySession.delete(registration.session);
  }

  return {
    connect({ session, generation, leaseMs, now }) {
      const leaseExpiresAt = now + leaseMs;
      const currentId = bySession.get(session);
      const current = currentId === undefined ? undefined : byEndpoint.get(currentId);
      if (current !== undefined && current.generation === generation && current.state !== "superseded") {
        // Same generation: renew, same endpoint id — even after expiry or disconnect, until reaped.
        current.leaseExpiresAt = leaseExpiresAt;
        current.state = "active";
        delete current.retiredAt;
        return current;
      }
      // A late connect of a retired generation must not take over from its successor.
      for (const registration of byEndpoint.values()) {
        if (registration.session === session && registration.generation === generation && registration.state === "superseded") {
          throw new TaskError("REGISTRATION_EXPIRED", { details: { reason: "generation was superseded" } });
        }
      }
      const next = mint(session, generation, leaseExpiresAt);
      if (current !== undefined) {
        current.state = "superseded";
        current.retiredAt = now;
        current.successorId = next.endpointId;
      }
      bySession.set(session, next.endpointId);
      return next;
    },
    get: (endpointId) => byEndpoint.get(endpointId),
    current(session) {
      const id = bySession.get(session);
      return id === undefined ? undefined : byEndpoint.get(id);
    },
    isLive,
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
    endpointOf: (registration) => ({ relay: RELAY_ID, id: registration.endpointId }),
    sessions: () => [...bySession.keys()],
    counts: () => ({ registrations: byEndpoint.size, sessions: bySession.size, metadataBytes }),
  };
}
