/**
 * A Redis failover with writes in flight: two relays on a primary with a replica; the replication
 * link is cut (the replica keeps what it had), the worker's message is accepted by the primary only,
 * then the primary dies and the replica is promoted behind the relays' address. The promoted replica
 * lacks that message but holds the same epoch key: without more, mail would be lost silently. The
 * relays see Redis's replication id change (the state's lineage, src/relay-server/store/redis/
 * scripts.ts) and take it as a reset: every client gets RELAY_RESET, both cores rebind, re-send what
 * they hold, and the task completes — the message arrives once, nothing is shown twice.
 *
 * First, at the store alone: a state written without a lineage (before lineages were kept) adopts
 * the primary's at its next maintenance, so when a replica holding it is promoted, it is replaced
 * too — instead of being served as if nothing had happened.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { eventually, failure } from "../../testkit/async.ts";
import { tryDrain } from "../../testkit/drain.ts";
import { createJumpTimers } from "../../testkit/jump-timers.ts";
import { REDIS_BINARY, REDIS_PACKAGE, type RedisProcess, startRedis } from "../../testkit/redis-process.ts";
import type { RelayProcess } from "../../testkit/relay-process.ts";
import { createTcpProxy, type TcpProxy } from "../../testkit/tcp-proxy.ts";
import { orphanProbeIntervalMs } from "../../src/protocol/limits.ts";
import { createRedisStore } from "../../src/relay-server/store/redis/index.ts";
import { isStateReplaced } from "../../src/relay-server/store/store.ts";
import {
  type ConfiguredParty,
  configuredParties,
  expectCompletedHearing,
  expectNothingTwice,
  RUNTIMES,
  startRedisRelay,
} from "../helpers/redis-kit.ts";
import { connected } from "../helpers/store-contract.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

setDefaultTimeout(60_000);

/** How long the test waits for the relays to notice the failover (their maintenance runs every second). */
const FAILOVER_NOTICE_MS = 10_000;

async function profileEpoch(relay: RelayProcess): Promise<string> {
  return ((await (await fetch(`${relay.url}/api/task-relay/profile`)).json()) as { epoch: string }).epoch;
}

describeWithPackage("a Redis failover (a replica promoted while writes are in flight)", REDIS_BINARY, REDIS_PACKAGE, () => {
  test("a state written without a lineage adopts the primary's, so its failover is noticed: the promoted replica's state is replaced", async () => {
    // scripts.ts FAILOVER: `if not lineage then … SET lineage replid` — without it the promoted replica's state
    // (no lineage to compare) would be served as if nothing had happened.
    const started: RedisProcess[] = [];
    const prefix = `{no-lineage-${crypto.randomUUID()}}`;
    try {
      // No wait for more replicas before the first sync (Redis waits 5 s by default).
      const primary = await startRedis({ args: ["--repl-diskless-sync-delay", "0"] });
      started.push(primary);
      const replica = await startRedis({ args: ["--replicaof", "127.0.0.1", String(primary.port)] });
      started.push(replica);
      await eventually(async () => String(await replica.command("INFO", ["replication"])).includes("master_link_status:up"), 5_000, 50);
      const store = await createRedisStore({ url: primary.url, prefix });
      let epoch: string;
      try {
        epoch = await store.epoch();
        await connected(store, "no-lineage");
        // A state from before lineages were kept; the relay's maintenance adopts the current one.
        await primary.command("DEL", [`${prefix}:lineage`]);
        await store.maintain(Date.now());
        expect(await store.epoch()).toBe(epoch);
      } finally {
        await store.close();
      }
      // The replica holds all of it; then it is promoted (a new replication id).
      expect(await primary.command("WAIT", ["1", "5000"])).toBe(1);
      expect(await replica.command("GET", [`${prefix}:lineage`])).not.toBeNull();
      await primary.kill();
      await replica.command("REPLICAOF", ["NO", "ONE"]);
      const promoted = await createRedisStore({ url: replica.url, prefix });
      try {
        expect(await promoted.epoch()).toBe(epoch);
        expect(isStateReplaced(await failure(promoted.maintain(Date.now())))).toBe(true);
        // A new, empty state under a new epoch: its clients are told (RELAY_RESET) and re-send what they hold.
        expect(await promoted.epoch()).not.toBe(epoch);
        expect((await promoted.usage()).registrations).toBe(0);
      } finally {
        await promoted.close();
      }
    } finally {
      await Promise.all(started.map((redis) => redis.stop().catch(() => undefined)));
    }
  });

  test("is detected as a reset by the replication id: nothing lost, nothing twice", async () => {
    const started: { redis: RedisProcess[]; proxies: TcpProxy[]; relays: RelayProcess[] } = { redis: [], proxies: [], relays: [] };
    const timers = createJumpTimers();
    let parties: ConfiguredParty[] = [];
    try {
      const primary = await startRedis();
      started.redis.push(primary);
      const link = createTcpProxy(primary.port);
      const front = createTcpProxy(primary.port);
      started.proxies.push(link, front);
      const replica = await startRedis({ args: ["--replicaof", "127.0.0.1", String(link.port)] });
      started.redis.push(replica);
      await eventually(async () => String(await replica.command("INFO", ["replication"])).includes("master_link_status:up"), 5_000, 50);
      // One relay on Bun, one on Node (the built bundle): they share the state, whatever runs them.
      const relays = await Promise.all(RUNTIMES.map((runtime) => startRedisRelay(`redis://127.0.0.1:${front.port}`, { runtime })));
      started.relays.push(...relays);
      parties = configuredParties([relays[0]!.url, relays[1]!.url], timers, "failover");
      const [origin, worker] = parties as [(typeof parties)[0], (typeof parties)[0]];
      await worker.configured.run((core) => core.connect());
      const { taskId } = await origin.configured.run((core) =>
        core.createTask({ to: worker.core().endpoint()!, task: "outlive a failover" }),
      );
      expect(await tryDrain(parties, { timers })).toBeDefined();
      const epochBefore = await profileEpoch(relays[0]!);

      // The replica stops hearing the primary; the primary accepts the worker's message alone.
      link.cut();
      await worker.configured.run((core) => core.message({ taskId, type: "information", message: "accepted by the old primary only" }));
      // The primary dies; the replica is promoted behind the relays' address.
      await primary.kill();
      await replica.command("REPLICAOF", ["NO", "ONE"]);
      front.retarget(replica.port);

      await eventually(async () => (await profileEpoch(relays[0]!).catch(() => epochBefore)) !== epochBefore, FAILOVER_NOTICE_MS, 100);
      // The other relay adopts the new epoch at its next store call (a request, or its maintenance within a second).
      const agreed = await eventually(
        async () => (await profileEpoch(relays[1]!)) === (await profileEpoch(relays[0]!)),
        FAILOVER_NOTICE_MS,
        100,
      );
      expect(agreed).toBe(true);
      expect(await tryDrain(parties, { timers, cooldownMs: orphanProbeIntervalMs })).toBeDefined();
      // Queued while the cores still look for each other in the new state (a deferral is no failure).
      await worker.configured
        .run((core) => core.done({ taskId, status: "completed", summary: "done after the failover" }))
        .catch((error: { code?: string }) => expect(error.code).toBe("TASK_DELIVERY_DEFERRED"));
      await eventually(
        async () => {
          await tryDrain(parties, { timers, cooldownMs: orphanProbeIntervalMs });
          return origin.core().getTask(taskId).status === "completed";
        },
        FAILOVER_NOTICE_MS,
        100,
      );

      expectCompletedHearing(origin, taskId, ["accepted by the old primary only"]);
      expectNothingTwice(parties);
    } finally {
      for (const party of parties) await party.configured.close();
      await Promise.all(started.relays.map((relay) => relay.stop().catch(() => undefined)));
      for (const proxy of started.proxies) proxy.stop();
      await Promise.all(started.redis.map((redis) => redis.stop().catch(() => undefined)));
    }
  });
});
