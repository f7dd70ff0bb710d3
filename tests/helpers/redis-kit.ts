/**
 * Relays that share one Redis, for the tests of the Redis store (tests/redis/): a real
 * `redis-server` (kit/redis-process.ts) and relay processes started through the CLI with
 * `--store <its URL>` (kit/relay-process.ts), all stopped after the file. A relay can be killed and
 * started again on its port; the Redis killed, restarted, paused, or reached through a TCP proxy
 * that can be cut.
 */
import { afterAll, beforeAll } from "bun:test";
import { type RedisProcess, startRedis } from "../../kit/redis-process.ts";
import { type RelayProcess, type StartRelayOptions, startRelayProcess } from "../../kit/relay-process.ts";
import { createTcpProxy, type TcpProxy } from "../../kit/tcp-proxy.ts";

/** A relay process on the Redis at `storeUrl`. */
function startRedisRelay(storeUrl: string, options: StartRelayOptions = {}): Promise<RelayProcess> {
  return startRelayProcess({ ...options, args: ["--store", storeUrl, ...(options.args ?? [])] });
}

export interface RedisRelays {
  readonly redis: RedisProcess;
  /** The proxy in front of the Redis (only with `{ proxy: true }`). */
  readonly proxy: TcpProxy;
  /** The relays, by index (a restarted relay replaces its entry). */
  readonly relays: RelayProcess[];
  /** SIGKILLs relay `index` (a crash); resolves with its exit. */
  kill(index: number): Promise<void>;
  /** Starts relay `index` again on its port (after `kill`). */
  restart(index: number): Promise<RelayProcess>;
}

export function useRedisRelays(options: { relays: number; proxy?: boolean }): RedisRelays {
  let redis: RedisProcess | undefined;
  let proxy: TcpProxy | undefined;
  const relays: RelayProcess[] = [];
  const storeUrl = () => (proxy === undefined ? redis!.url : `redis://127.0.0.1:${proxy.port}`);
  beforeAll(async () => {
    redis = await startRedis();
    if (options.proxy === true) proxy = createTcpProxy(redis.port);
    relays.push(...(await Promise.all(Array.from({ length: options.relays }, () => startRedisRelay(storeUrl())))));
  });
  afterAll(async () => {
    await Promise.all(relays.map((relay) => relay.stop().catch(() => undefined)));
    proxy?.stop();
    await redis?.stop();
  });
  return {
    get redis() {
      if (redis === undefined) throw new Error("the Redis fixture is used before its beforeAll ran");
      return redis;
    },
    get proxy() {
      if (proxy === undefined) throw new Error("this Redis fixture has no proxy");
      return proxy;
    },
    relays,
    async kill(index) {
      await relays[index]!.stop("SIGKILL");
    },
    async restart(index) {
      const started = await startRedisRelay(storeUrl(), { port: relays[index]!.port });
      relays[index] = started;
      return started;
    },
  };
}
