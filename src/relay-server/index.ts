/**
 * `pi-tasks/relay`: the memory-only volatile-v1 relay as a library. `startRelayServer` serves it on
 * a socket (what `pi-tasks relay` runs); `createInMemoryTaskRelay` answers a `fetch` function in this
 * process (a test fixture); `createRelayHandler` is the HTTP handling for another server; the
 * engine and its `RelayStore` seam are for a different store (`createRedisStore`: the state in a Redis
 * that relays on several machines share, docs/multi-machine.md). See docs/library.md.
 */
export { startRelayServer, type RelayServer, type RelayServerOptions } from "./server.ts";
export { createInMemoryTaskRelay, IN_MEMORY_RELAY_URL, type InMemoryTaskRelay, type InMemoryRelayOptions } from "./in-memory.ts";
export { createRelayHandler, type RelayHandler, type RelayHandlerOptions } from "./handler.ts";
export { createRelayEngine, RELAY_FEATURES, type RelayEngine, type RelayEngineOptions } from "./engine.ts";
export { createMemoryStore } from "./store/memory.ts";
export { createRedisStore, type RedisStore, type RedisStoreOptions } from "./store/redis/index.ts";
export type * from "./store/store.ts";
