/**
 * Relays that share one Redis, for the tests of the Redis store (tests/redis/): a real
 * `redis-server` (testkit/redis-process.ts) and relay processes started through the CLI with
 * `--store <its URL>` (testkit/relay-process.ts), all stopped after the file. A relay can be killed and
 * started again on its port; the Redis killed, restarted, paused, or reached through a TCP proxy
 * that can be cut. The relays run on Bun (the sources) or on Node (the built bundle, as Pi's users
 * run it): the Redis tests run on both.
 */
import { afterAll, beforeAll, expect } from "bun:test";
import { createMemoryHost, type MemoryHost } from "../../testkit/memory-host.ts";
import type { JumpTimers } from "../../testkit/jump-timers.ts";
import { type ConfiguredTaskCore, createConfiguredTaskCore } from "../../src/core/configured.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import { type RedisProcess, startRedis } from "../../testkit/redis-process.ts";
import { BUN, CLI_ENTRY, type RelayProcess, type StartRelayOptions, startRelayProcess } from "../../testkit/relay-process.ts";
import { CLI_BUNDLE } from "../../src/host/runtime.ts";
import { NODE_BINARY } from "./host-kit.ts";
import { createTcpProxy, type TcpProxy } from "../../testkit/tcp-proxy.ts";

/** The runtimes a relay runs on, each with the command before `relay …`. */
export const RELAY_RUNTIMES = { bun: [BUN, CLI_ENTRY], node: [NODE_BINARY, CLI_BUNDLE] } as const;
export type RelayRuntime = keyof typeof RELAY_RUNTIMES;
export const RUNTIMES = Object.keys(RELAY_RUNTIMES) as RelayRuntime[];

/** A relay process on the Redis at `storeUrl`, on `runtime` (default Bun). */
export function startRedisRelay(storeUrl: string, options: StartRelayOptions & { runtime?: RelayRuntime } = {}): Promise<RelayProcess> {
  const { runtime = "bun", ...rest } = options;
  return startRelayProcess({ ...rest, command: RELAY_RUNTIMES[runtime], args: ["--store", storeUrl, ...(options.args ?? [])] });
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

export function useRedisRelays(options: { relays: number; proxy?: boolean; runtime?: RelayRuntime }): RedisRelays {
  const runtime = options.runtime ?? "bun";
  let redis: RedisProcess | undefined;
  let proxy: TcpProxy | undefined;
  const relays: RelayProcess[] = [];
  const storeUrl = () => (proxy === undefined ? redis!.url : `redis://127.0.0.1:${proxy.port}`);
  beforeAll(async () => {
    redis = await startRedis();
    if (options.proxy === true) proxy = createTcpProxy(redis.port);
    relays.push(...(await Promise.all(Array.from({ length: options.relays }, () => startRedisRelay(storeUrl(), { runtime })))));
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
      const started = await startRedisRelay(storeUrl(), { port: relays[index]!.port, runtime });
      relays[index] = started;
      return started;
    },
  };
}

/** A configured core (it rebinds by itself after a reset) with a memory host, as a drain sees it. */
export interface ConfiguredParty {
  readonly configured: ConfiguredTaskCore;
  readonly host: MemoryHost;
  core(): TaskCore;
  refresh(): Promise<unknown>;
}

/** One configured party per relay URL, sharing `timers` (close them with `configured.close()`). */
export function configuredParties(urls: readonly string[], timers: JumpTimers, label: string): ConfiguredParty[] {
  return urls.map((url, index) => {
    const host = createMemoryHost();
    const configured = createConfiguredTaskCore({
      url,
      callerSession: `${label}-${index}-${crypto.randomUUID().slice(0, 8)}`,
      env: {},
      host,
      timers,
    });
    return { configured, host, core: () => configured.current(), refresh: () => configured.refresh() };
  });
}

/** No event was presented twice at any party. */
export function expectNothingTwice(parties: readonly { readonly host: MemoryHost }[]): void {
  for (const party of parties) {
    const ids = party.host.insertedIds();
    expect(ids.filter((id, index) => ids.indexOf(id) !== index)).toEqual([]);
  }
}

/** The origin's task completed and succeeded, having heard exactly these information messages on the way. */
export function expectCompletedHearing(origin: ConfiguredParty, taskId: string, messages: readonly string[]): void {
  const task = origin.core().getTask(taskId);
  expect(task).toMatchObject({ status: "completed", outcome: "succeeded" });
  expect(task.events.filter((event) => event.type === "task.information").map((event) => event.payload.message)).toEqual([...messages]);
}
