/** Endpoint helpers shared by the store, the core and the relay. */
import type { TaskEndpoint } from "./schemas.ts";

/** A map key for an endpoint (relay and id never contain NUL on the wire). */
export function endpointKey(endpoint: TaskEndpoint): string {
  return `${endpoint.relay}\u0000${endpoint.id}`;
}

export function sameEndpoint(a: TaskEndpoint, b: TaskEndpoint): boolean {
  return a.relay === b.relay && a.id === b.id;
}

/** Human-readable form for text the model reads (`relay/id`). */
export function formatEndpoint(endpoint: TaskEndpoint): string {
  return `${endpoint.relay}/${endpoint.id}`;
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** UUID versions 1–8 with the RFC 4122 variant, as Wolfpack mints endpoint ids and epochs. */
export function isUuid(value: unknown): value is string {
  return typeof value === "string" && UUID_PATTERN.test(value);
}
