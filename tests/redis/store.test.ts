/**
 * The Redis `RelayStore` against a real `redis-server`: the store contract every store passes
 * (tests/helpers/store-contract.ts, the same cases as the in-process store), then what only a
 * shared store has — two stores on one Redis are one state, a replaced state (Redis restarted
 * empty) is a new epoch, a state's lineage (Redis's replication id when it began) is adopted when
 * missing and a different one replaces the state (a failover), a Redis that goes away fails calls as
 * `REDIS_UNAVAILABLE` and serves again when it is back, and scripts Redis forgot are loaded again.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { failure } from "../../testkit/async.ts";
import { REDIS_BINARY, REDIS_PACKAGE, type RedisProcess, startRedis } from "../../testkit/redis-process.ts";
import {
  createRedisStore,
  REDIS_PASSWORD_FILE_VARIABLE,
  REDIS_PASSWORD_VARIABLE,
  type RedisStore,
} from "../../src/relay-server/store/redis/index.ts";
import { isStateReplaced } from "../../src/relay-server/store/store.ts";
import { REDIS_LAYOUT } from "../../src/relay-server/store/redis/keys.ts";
import { admission, connected, describeRelayStore } from "../helpers/store-contract.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

describeWithPackage("the Redis store", REDIS_BINARY, REDIS_PACKAGE, () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  /** A store on its own key prefix: a fresh, empty state on the shared server. */
  const open = (prefix = `{t-${crypto.randomUUID()}}`) => createRedisStore({ url: redis.url, prefix });

  describeRelayStore("redis", () => open());

  test("two stores on one Redis and prefix are one state: one epoch, one mailbox, one cursor sequence", async () => {
    const prefix = `{shared-${crypto.randomUUID()}}`;
    const [a, b] = await Promise.all([open(prefix), open(prefix)]);
    try {
      expect(await a.epoch()).toBe(await b.epoch());
      const source = await connected(a, "shared-source");
      const target = await connected(b, "shared-target");
      const outcomes = await Promise.all(
        Array.from({ length: 40 }, async (_, index) => (index % 2 === 0 ? a : b).admit(await admission(source, target))),
      );
      expect(outcomes.every((outcome) => outcome.kind === "accepted")).toBe(true);
      const page = await a.page(target.id, "0", 50);
      if (page.kind !== "page") throw new Error(page.kind);
      expect((JSON.parse(page.itemsJson) as { cursor: string }[]).map((item) => item.cursor)).toEqual(
        Array.from({ length: 40 }, (_, index) => String(index + 1)),
      );
      expect(await b.usage()).toMatchObject({ activeItems: 40, registrations: 2 });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("a state written in another layout (another relay version) is refused REDIS_LAYOUT and left as it is; this layout opens", async () => {
    const prefix = `{layout-${crypto.randomUUID()}}`;
    const first = await open(prefix);
    await first.close();
    // An older relay's state: an epoch and no layout (or another one).
    for (const layout of [undefined, "1"]) {
      if (layout === undefined) await redis.command("DEL", [`${prefix}:layout`]);
      else await redis.command("SET", [`${prefix}:layout`, layout]);
      const refused = await failure(open(prefix));
      expect(refused.code).toBe("REDIS_LAYOUT");
      expect(refused.details).toMatchObject({ prefix, expected: REDIS_LAYOUT });
      expect(await redis.command("GET", [`${prefix}:layout`])).toBe(layout ?? null);
    }
    await redis.command("SET", [`${prefix}:layout`, REDIS_LAYOUT]);
    const again = await open(prefix);
    await again.close();
  });

  test("a newer watch parked through another store of the same state answers the older one", async () => {
    const prefix = `{watches-${crypto.randomUUID()}}`;
    const [a, b] = await Promise.all([open(prefix), open(prefix)]);
    try {
      const target = await connected(a, "two-watches");
      let parked = 0;
      // Waits far longer than the test may run: only the newer watch can answer the older one.
      const older = a.watch({ endpointId: target.id, after: "0", waitMs: 3_600_000, onPark: () => (parked += 1) });
      while (parked === 0) await Bun.sleep(2);
      const newer = b.watch({ endpointId: target.id, after: "0", waitMs: 3_600_000 });
      expect(await older).toEqual({ kind: "watch", pending: false, highestCursor: "0" });
      expect((await a.usage()).watching).toBe(0);
      expect((await b.usage()).watching).toBe(1);
      await a.admit(await admission(await connected(a, "two-watches-source"), target));
      expect(await newer).toEqual({ kind: "watch", pending: true, highestCursor: "1" });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("a password-protected Redis: the password from PI_TASKS_REDIS_PASSWORD_FILE or PI_TASKS_REDIS_PASSWORD; in the URL, wrong or missing it is a clear refusal", async () => {
    const password = "p@ss w:rd/%";
    const guarded = await startRedis({ password });
    const dir = mkdtempSync(join(tmpdir(), "pi-tasks-redis-password-"));
    try {
      const file = join(dir, "password");
      writeFileSync(file, `${password}\n`, { mode: 0o600 });
      const viaFile = await createRedisStore({ url: guarded.plainUrl, env: { [REDIS_PASSWORD_FILE_VARIABLE]: file } });
      const viaEnv = await createRedisStore({ url: guarded.plainUrl, env: { [REDIS_PASSWORD_VARIABLE]: password } });
      expect(await viaEnv.epoch()).toBe(await viaFile.epoch());
      await Promise.all([viaFile.close(), viaEnv.close()]);
      // In the URL it would be visible in ps: refused before connecting, the password not echoed.
      const inUrl = await failure(createRedisStore({ url: guarded.url }));
      expect(inUrl.code).toBe("REDIS_PASSWORD_IN_URL");
      expect(JSON.stringify(inUrl.toJSON())).not.toContain("w:rd");
      for (const env of [{ [REDIS_PASSWORD_VARIABLE]: "wrong" }, {}]) {
        const error = await failure(createRedisStore({ url: guarded.plainUrl, env }));
        expect(error.code).toBe("REDIS_UNAVAILABLE");
        expect(error.message).toBe(
          `Redis at ${guarded.plainUrl}/0 accepts connections but the Redis handshake failed: check the credentials (the password of ${REDIS_PASSWORD_FILE_VARIABLE} or ${REDIS_PASSWORD_VARIABLE}), the database number, or rediss:// for a TLS port`,
        );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await guarded.stop();
    }
  });

  test("a state replaced under the store (its epoch key gone) fails calls with no effect until the epoch is read anew", async () => {
    const prefix = `{replaced-${crypto.randomUUID()}}`;
    const store = await open(prefix);
    try {
      const before = await store.epoch();
      await connected(store, "replaced");
      await redis.command("DEL", [`${prefix}:epoch`]);
      const error = await failure(store.connect({ session: "after", generation: "g", leaseMs: 1_000, now: Date.now() }));
      expect(isStateReplaced(error)).toBe(true);
      expect(error).toMatchObject({ code: "RELAY_RESET", details: { mayHaveBeenDelivered: true } });
      // Nothing was written by the refused call.
      expect(await redis.command("HEXISTS", [`${prefix}:sessions`, "after"])).toBe(0);
      const after = await store.epoch();
      expect(after).not.toBe(before);
      expect(await store.epoch()).toBe(after);
      expect((await store.usage()).registrations).toBe(1);
    } finally {
      await store.close();
    }
  });

  test("a state replaced under the store by another (its epoch key holding another epoch) fails calls with no effect", async () => {
    const prefix = `{overwritten-${crypto.randomUUID()}}`;
    const store = await open(prefix);
    try {
      const before = await store.epoch();
      await connected(store, "overwritten");
      const other = crypto.randomUUID();
      await redis.command("SET", [`${prefix}:epoch`, other]);
      const error = await failure(store.connect({ session: "after", generation: "g", leaseMs: 1_000, now: Date.now() }));
      expect(isStateReplaced(error)).toBe(true);
      expect(error).toMatchObject({ code: "RELAY_RESET", details: { mayHaveBeenDelivered: true } });
      expect(await redis.command("HEXISTS", [`${prefix}:sessions`, "after"])).toBe(0);
      // The epoch read anew is the other state's, kept as it is.
      expect(await store.epoch()).toBe(other);
      expect(other).not.toBe(before);
    } finally {
      await store.close();
    }
  });

  /** The server's replication id (INFO replication's `master_replid`): what a state's lineage is compared with. */
  async function replicationId(): Promise<string> {
    const id = /master_replid:([0-9a-f]+)/.exec(String(await redis.command("INFO", ["replication"])))?.[1];
    expect(id).toBeDefined();
    return id!;
  }

  test("a state without a lineage (written before lineages were kept) adopts the server's replication id at its next maintenance", async () => {
    // scripts.ts FAILOVER (in `maintain`): `if not lineage then redis.call('SET', key('lineage'), replid) end` — without it
    // such a state's failovers go unnoticed (tests/redis/failover.test.ts shows one).
    const prefix = `{lineage-adopt-${crypto.randomUUID()}}`;
    const store = await open(prefix);
    try {
      const replid = await replicationId();
      // A new state begins with the current lineage (scripts.ts EPOCH).
      expect(await redis.command("GET", [`${prefix}:lineage`])).toBe(replid);
      const epoch = await store.epoch();
      await connected(store, "lineage-adopt");
      await redis.command("DEL", [`${prefix}:lineage`]);
      expect(await store.maintain(Date.now())).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 0 });
      expect(await redis.command("GET", [`${prefix}:lineage`])).toBe(replid);
      // Adopted, not replaced: the same epoch and state.
      expect(await store.epoch()).toBe(epoch);
      expect((await store.usage()).registrations).toBe(1);
      // Its own lineage is no failover: the next maintenance changes nothing.
      await store.maintain(Date.now());
      expect(await store.epoch()).toBe(epoch);
      expect(await redis.command("GET", [`${prefix}:lineage`])).toBe(replid);
    } finally {
      await store.close();
    }
  });

  test("a state whose lineage is another replication id has failed over: maintenance replaces it (RELAY_RESET, every key gone, a new epoch, the current lineage)", async () => {
    // scripts.ts FAILOVER: `lineage ~= replid` → the state is replaced and the call answers 'replaced'.
    const prefix = `{lineage-failover-${crypto.randomUUID()}}`;
    const store = await open(prefix);
    try {
      const before = await store.epoch();
      await connected(store, "failed-over");
      await redis.command("SET", [`${prefix}:lineage`, "0".repeat(40)]);
      const error = await failure(store.maintain(Date.now()));
      expect(isStateReplaced(error)).toBe(true);
      expect(error).toMatchObject({ code: "RELAY_RESET", details: { mayHaveBeenDelivered: true } });
      expect(await redis.command("EXISTS", [`${prefix}:sessions`])).toBe(0);
      expect(await redis.command("GET", [`${prefix}:lineage`])).toBe(await replicationId());
      expect(await redis.command("GET", [`${prefix}:layout`])).toBe(REDIS_LAYOUT);
      const after = await store.epoch();
      expect(after).not.toBe(before);
      expect((await store.usage()).registrations).toBe(0);
      // The new state is maintained as any other.
      expect(await store.maintain(Date.now())).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 0 });
      expect(await store.epoch()).toBe(after);
    } finally {
      await store.close();
    }
  });

  test("a state begun where INFO was refused (an empty lineage) is never taken for a failed-over one", async () => {
    // scripts.ts FAILOVER: `lineage ~= ''` — no lineage to compare, no reset; and `not lineage` is false for '' (kept).
    const prefix = `{lineage-empty-${crypto.randomUUID()}}`;
    const store = await open(prefix);
    try {
      const epoch = await store.epoch();
      await connected(store, "lineage-empty");
      await redis.command("SET", [`${prefix}:lineage`, ""]);
      await store.maintain(Date.now());
      expect(await store.epoch()).toBe(epoch);
      expect((await store.usage()).registrations).toBe(1);
      expect(await redis.command("GET", [`${prefix}:lineage`])).toBe("");
    } finally {
      await store.close();
    }
  });

  test("scripts Redis forgot (SCRIPT FLUSH, a restart) are loaded again", async () => {
    const store = await open();
    try {
      await connected(store, "flush-a");
      await redis.command("SCRIPT", ["FLUSH"]);
      await connected(store, "flush-b");
      expect((await store.usage()).sessions).toBe(2);
    } finally {
      await store.close();
    }
  });

  test("a Redis that stops answering fails calls with REDIS_UNAVAILABLE (the command timeout; it stays paused until then); answering again, the store serves again", async () => {
    const commandTimeoutMs = 300;
    const store: RedisStore = await createRedisStore({ url: redis.url, prefix: `{hung-${crypto.randomUUID()}}`, commandTimeoutMs });
    try {
      const target = await connected(store, "hung");
      redis.pause();
      // Redis answers nothing until the call failed: only the command timeout can end it.
      const error = await failure(store.registration(target.id)).finally(() => redis.resume());
      expect(error).toMatchObject({ code: "REDIS_UNAVAILABLE", retryable: true });
      expect(await store.registration(target.id)).toMatchObject({ session: "hung" });
    } finally {
      await store.close();
    }
  });

  test("a Redis that is killed fails calls, parked watches included, with REDIS_UNAVAILABLE at once; a new, empty one is a replaced state", async () => {
    const store = await open();
    try {
      const target = await connected(store, "killed");
      const before = await store.epoch();
      let parked = false;
      // A wait far longer than the test may run: a watch that waited it out would time the test out.
      const watching = failure(store.watch({ endpointId: target.id, after: "0", waitMs: 3_600_000, onPark: () => (parked = true) }));
      while (!parked) await Bun.sleep(2);
      await redis.kill();
      expect(await watching).toMatchObject({ code: "REDIS_UNAVAILABLE", retryable: true });
      const error = await failure(store.registration(target.id));
      expect(error).toMatchObject({ code: "REDIS_UNAVAILABLE", retryable: true });
      expect(error.message).toContain("cannot be reached");
      await redis.restart();
      expect(isStateReplaced(await failure(store.registration(target.id)))).toBe(true);
      expect(await store.epoch()).not.toBe(before);
      expect(await store.registration(target.id)).toBeUndefined();
      // The doorbell subscribes anew on the new Redis.
      const again = await connected(store, "killed-again");
      let parkedAgain = false;
      const ringing = store.watch({ endpointId: again.id, after: "0", waitMs: 20_000, onPark: () => (parkedAgain = true) });
      while (!parkedAgain) await Bun.sleep(2);
      await store.admit(await admission(await connected(store, "killed-source"), again));
      expect(await ringing).toEqual({ kind: "watch", pending: true, highestCursor: "1" });
    } finally {
      await store.close();
    }
  });
});
