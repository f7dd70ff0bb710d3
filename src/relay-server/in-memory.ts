/**
 * The in-memory relay fixture: the real relay (handler, engine, memory store) answering a `fetch`
 * function instead of a socket. Pass `relay.fetch` and `relay.url` to `createVolatileTaskSession` and
 * the requests never leave the process — for library tests and examples, not for production (the
 * standalone relay is `startRelayServer` or `pi-tasks relay`).
 *
 * ```ts
 * const relay = await createInMemoryTaskRelay();
 * const session = createVolatileTaskSession({ url: relay.url, fetch: relay.fetch, callerSession: "a" });
 * ```
 */
import type { RelayEngine } from "./engine.ts";
import { createRelayHandler, type RelayHandlerOptions, replyResponse } from "./handler.ts";

/** The base URL every in-memory relay answers to (nothing listens there). */
export const IN_MEMORY_RELAY_URL = "http://127.0.0.1:1";

/** The client address the in-memory relay sees (loopback, so its client gate admits it). */
const IN_MEMORY_PEER = "127.0.0.1";

export type InMemoryRelayOptions = Pick<RelayHandlerOptions, "now" | "store" | "env" | "maintenance">;

export interface InMemoryTaskRelay {
  readonly url: string;
  /** A `fetch` that hands each request to the relay in this process. */
  readonly fetch: typeof fetch;
  readonly epoch: string;
  readonly engine: RelayEngine;
  stop(): Promise<void>;
}

export async function createInMemoryTaskRelay(options: InMemoryRelayOptions = {}): Promise<InMemoryTaskRelay> {
  // No JWT unless asked for: the process environment does not configure a fixture.
  const handler = await createRelayHandler({ ...options, env: options.env ?? {} });
  const relayFetch = async (input: string | URL | Request, init?: RequestInit) =>
    replyResponse(await handler.handle(new Request(input as string, init), IN_MEMORY_PEER));
  return {
    url: IN_MEMORY_RELAY_URL,
    fetch: relayFetch as typeof fetch,
    get epoch() {
      return handler.epoch;
    },
    engine: handler.engine,
    stop: () => handler.close(),
  };
}
