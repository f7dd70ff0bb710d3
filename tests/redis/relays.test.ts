/**
 * Relay processes (started through the CLI with `--store redis://…`) sharing one real Redis: every
 * relay rule holds across them — racing admission into one mailbox, the doorbell across relays, a
 * whole task between a session on relay A and one on relay B (the library: TaskCore through
 * `createVolatileTaskSession`), a relay process killed and restarted mid-task (nothing lost, nothing
 * twice, no reset), a Redis restarted empty (`RELAY_RESET` to every client), a Redis out of reach
 * (503 `RELAY_UNAVAILABLE`, retryable, then service again), and the start-up refusals — each with
 * the relays on Bun and again on Node (the built bundle, as Pi's users run it).
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { spawn } from "bun";
import { failure } from "../../testkit/async.ts";
import { settle, tryDrain } from "../../testkit/drain.ts";
import { createJumpTimers } from "../../testkit/jump-timers.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { REDIS_BINARY, REDIS_PACKAGE, startRedis } from "../../testkit/redis-process.ts";
import { freePort, REPO_ROOT } from "../../testkit/relay-process.ts";
import { postJson, WireSession } from "../../src/conformance/wire-client.ts";
import { orphanProbeIntervalMs, maxRelayMailboxItems, redisConnectTimeoutMs, maxWatchWaitMs } from "../../src/protocol/limits.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { eventsOf } from "../helpers/core-kit.ts";
import {
  configuredParties,
  expectCompletedHearing,
  expectNothingTwice,
  RELAY_RUNTIMES,
  RUNTIMES,
  useRedisRelays,
} from "../helpers/redis-kit.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

setDefaultTimeout(20_000);

/** Concurrent requests the racing senders keep in flight, all relays together (below each relay's admission slots). */
const RACE_LANES = 16;
const RACE_SENDERS = 8;

/** `job` on every item, `RACE_LANES` at a time (the relays' admission slots stay free), results in item order. */
async function inLanes<T, R>(items: readonly T[], job: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: RACE_LANES }, async () => {
      while (next < items.length) {
        const index = next;
        next += 1;
        results[index] = await job(items[index]!, index);
      }
    }),
  );
  return results;
}

for (const runtime of RUNTIMES) {
  describeWithPackage(`two relays sharing one Redis (relays on ${runtime})`, REDIS_BINARY, REDIS_PACKAGE, () => {
    const fx = useRedisRelays({ relays: 2, runtime });
    const opened: Party[] = [];
    const relayUrl = (index: number) => fx.relays[index]!.url;

    test("racing admission through both relays into one mailbox: exactly its limit admitted, one cursor each, each received once", async () => {
      const target = await WireSession.connect(relayUrl(1), { label: "race-target" });
      const senders = await Promise.all(
        Array.from({ length: RACE_SENDERS }, (_, index) => WireSession.connect(relayUrl(index % 2), { label: `race-${index}` })),
      );
      const offered = maxRelayMailboxItems + 64;
      const accepted: string[] = [];
      const refused: string[] = [];
      await inLanes(
        Array.from({ length: offered }, (_, index) => senders[index % RACE_SENDERS]!),
        async (sender) => {
          const envelope = sender.envelopeTo(target.endpoint);
          const reply = await sender.send(envelope);
          if (reply.status === 200 && reply.body.value.duplicate === false) accepted.push(envelope.envelopeId);
          else refused.push(`${reply.status} ${reply.body?.error?.code} ${reply.body?.error?.retryAfterMs ?? ""}`.trim());
        },
      );
      expect(accepted.length).toBe(maxRelayMailboxItems);
      // Mailbox-full refusals only (an overload refusal would carry retryAfterMs).
      expect(refused).toEqual(Array.from({ length: offered - maxRelayMailboxItems }, () => "503 RELAY_CAPACITY"));
      // The target pages through both relays in turn, with the same binding.
      const received: { cursor: string; envelopeId: string }[] = [];
      let cursor = "0";
      for (let page = 0; ; page += 1) {
        const reply = await postJson(relayUrl(page % 2), target.request("receive", { cursor }));
        expect(reply.status).toBe(200);
        const value = reply.body.value as {
          deliveries: { cursor: string; envelope: { envelopeId: string } }[];
          nextCursor: string;
          hasMore: boolean;
        };
        received.push(...value.deliveries.map((delivery) => ({ cursor: delivery.cursor, envelopeId: delivery.envelope.envelopeId })));
        cursor = value.nextCursor;
        if (!value.hasMore) break;
      }
      expect(received.map((item) => item.cursor)).toEqual(Array.from({ length: maxRelayMailboxItems }, (_, index) => String(index + 1)));
      expect(received.map((item) => item.envelopeId).sort()).toEqual([...accepted].sort());
      const acks = await inLanes(received, (item, index) =>
        postJson(relayUrl(index % 2), target.request("acknowledge", { envelopeId: item.envelopeId })),
      );
      expect(acks.map((reply) => reply.body.value?.duplicate)).toEqual(received.map(() => false));
      expect((await target.page("0")).deliveries).toEqual([]);
    });

    // How soon (the doorbell's latency across relays) is a figure of `npm run bench`.
    test("a watch on relay B is woken by relay A admitting mail for it, long before its wait ends", async () => {
      const watcher = await WireSession.connect(relayUrl(1), { label: "watch-b" });
      const sender = await WireSession.connect(relayUrl(0), { label: "watch-a" });
      let settled = false;
      // The longest wait the relay allows; the request gives up well before it ends (a budget for a
      // loaded machine): only the doorbell answers it in time.
      const watching = watcher
        .call("watch", { cursor: "0", waitMs: maxWatchWaitMs }, { timeoutMs: maxWatchWaitMs - 10_000 })
        .finally(() => {
          settled = true;
        });
      await Bun.sleep(150);
      expect(settled, "the watch answered before any mail arrived").toBe(false);
      const sent = await sender.send(sender.envelopeTo(watcher.endpoint));
      expect(sent.status).toBe(200);
      const woke = await watching;
      expect(woke.body.value).toEqual({ kind: "watch", pending: true, highestCursor: "1" });
    });

    test("a task between a session on relay A and one on relay B: assignment, question and answer, result, acknowledgement", async () => {
      const origin = await createParty({ url: relayUrl(0) });
      const worker = await createParty({ url: relayUrl(1) });
      opened.push(origin, worker);
      try {
        const { taskId } = await origin.core.createTask({ to: worker.core.endpoint(), task: "cross the relays" });
        await settle([origin, worker]);
        const created = eventsOf(origin.core.getTask(taskId), "task.created")[0]!;
        expect(worker.host.insertedIds().filter((id) => id === created.eventId)).toHaveLength(1);

        await worker.core.message({ taskId, type: "question", message: "which relay am I on?" });
        await settle([origin, worker]);
        const question = eventsOf(origin.core.getTask(taskId), "task.question")[0]!;
        expect(origin.host.insertedIds()).toContain(question.eventId);
        const answered = await origin.core.message({ taskId, type: "answer", message: "relay B", inReplyTo: question.eventId });
        await settle([origin, worker]);
        expect(worker.host.insertedIds().filter((id) => id === answered.eventId)).toHaveLength(1);

        await worker.core.done({ taskId, status: "completed", summary: "answered across relays" });
        await settle([origin, worker]);
        expect(origin.core.getTask(taskId).status).toBe("completed");
        await origin.core.acknowledge({ taskId });
        await settle([origin, worker]);
        expect(eventsOf(worker.core.getTask(taskId), "task.parent_acknowledged")).toHaveLength(1);
        for (const party of [origin, worker]) {
          const ids = party.host.insertedIds();
          expect({ party: party.name, twice: ids.filter((id, index) => ids.indexOf(id) !== index) }).toEqual({
            party: party.name,
            twice: [],
          });
          expect(party.core.hasPendingWork()).toBe(false);
        }
      } finally {
        await closeParties(opened.splice(0));
      }
    });

    test("a relay process killed and restarted mid-task: the task completes, nothing lost or twice, no reset", async () => {
      const origin = await createParty({ url: relayUrl(0) });
      const worker = await createParty({ url: relayUrl(1), requestTimeoutMs: 2_000 });
      opened.push(origin, worker);
      try {
        const workerEndpoint = worker.core.endpoint()!;
        const { taskId } = await origin.core.createTask({ to: workerEndpoint, task: "survive a relay crash" });
        await settle([origin, worker]);
        await fx.kill(1);
        // While relay B is down: the origin asks (through A, accepted into Redis), the worker's result waits in its outbox.
        const asked = await origin.core.message({ taskId, type: "information", message: "sent while relay B was down" });
        const done = await worker.core.done({ taskId, status: "completed", summary: "finished while relay B was down" }).then(
          (value) => ({ ok: true as const, value }),
          (error: unknown) => ({ ok: false as const, error }),
        );
        expect(done.ok ? "accepted" : (done.error as { code?: string }).code).not.toBe("RELAY_RESET");
        await fx.restart(1);
        await settle([origin, worker]);
        await settle([origin, worker]);
        expect(worker.core.endpoint()).toEqual(workerEndpoint);
        expect(origin.core.getTask(taskId).status).toBe("completed");
        expect(worker.host.insertedIds().filter((id) => id === asked.eventId)).toHaveLength(1);
        const completions = origin.host.inserted.filter((item) =>
          origin.core.getTask(taskId).events.some((event) => event.eventId === item.eventId && event.type === "task.completed"),
        );
        expect(completions).toHaveLength(1);
        for (const party of [origin, worker]) {
          const ids = party.host.insertedIds();
          expect({ party: party.name, twice: ids.filter((id, index) => ids.indexOf(id) !== index) }).toEqual({
            party: party.name,
            twice: [],
          });
        }
      } finally {
        await closeParties(opened.splice(0));
      }
    });
  });

  describeWithPackage(`a Redis restarted empty (relays on ${runtime})`, REDIS_BINARY, REDIS_PACKAGE, () => {
    const fx = useRedisRelays({ relays: 2, runtime });

    test("is a new epoch: clients of both relays get RELAY_RESET, the relays keep running and agree on the new epoch", async () => {
      const sessions = [0, 1].map((index) =>
        createVolatileTaskSession({ url: fx.relays[index]!.url, callerSession: `reset-${index}-${crypto.randomUUID()}` }),
      );
      try {
        const before = await Promise.all(sessions.map((session) => session.connect()));
        expect(before[0]!.epoch).toBe(before[1]!.epoch);
        await fx.redis.restart();
        for (const session of sessions) {
          const error = await failure(session.receive("0"));
          expect(error).toMatchObject({ code: "RELAY_RESET", details: { mayHaveBeenDelivered: true } });
          expect(session.status()).toBe("reset");
        }
        const after = await Promise.all(sessions.map((session) => session.rebind()));
        expect(after[0]!.epoch).not.toBe(before[0]!.epoch);
        expect(after[1]!.epoch).toBe(after[0]!.epoch);
        expect((await sessions[0]!.receive("0")).deliveries).toEqual([]);
        for (const relay of fx.relays) expect(relay.process.exitCode).toBeNull();
      } finally {
        for (const session of sessions) session.close();
      }
    });

    test("mid-task, the outcomes' recovery path: both Pis' cores rebind across the two relays, find each other and the task completes", async () => {
      const timers = createJumpTimers();
      const parties = configuredParties([fx.relays[0]!.url, fx.relays[1]!.url], timers, "redis-reset");
      const [origin, worker] = parties as [(typeof parties)[0], (typeof parties)[0]];
      try {
        await worker.configured.run((core) => core.connect());
        const { taskId } = await origin.configured.run((core) =>
          core.createTask({ to: worker.core().endpoint()!, task: "outlive a Redis restart" }),
        );
        await tryDrain(parties, { timers });
        await fx.redis.restart();
        // Both meet the new epoch, rebind on their own relay and look each other up in the shared state.
        await worker.configured
          .run((core) => core.message({ taskId, type: "information", message: "sent into the new state" }))
          .catch(() => undefined);
        expect(await tryDrain(parties, { timers, cooldownMs: orphanProbeIntervalMs })).toBeDefined();
        await worker.configured.run((core) => core.done({ taskId, status: "completed", summary: "done after the Redis restart" }));
        expect(await tryDrain(parties, { timers, cooldownMs: orphanProbeIntervalMs })).toBeDefined();
        expectCompletedHearing(origin, taskId, ["sent into the new state"]);
        expectNothingTwice(parties);
      } finally {
        for (const party of parties) await party.configured.close();
      }
    });
  });

  describeWithPackage(`a Redis out of reach (relays on ${runtime})`, REDIS_BINARY, REDIS_PACKAGE, () => {
    const fx = useRedisRelays({ relays: 1, proxy: true, runtime });

    test("answers 503 RELAY_UNAVAILABLE (retryable) without crashing; back with its data, the relay serves again with no reset", async () => {
      const url = fx.relays[0]!.url;
      const session = createVolatileTaskSession({ url, callerSession: `outage-${crypto.randomUUID()}` });
      const wire = await WireSession.connect(url, { label: "outage-wire" });
      try {
        const binding = await session.connect();
        fx.proxy.cut();
        const error = await failure(session.receive("0"));
        expect(error).toMatchObject({ code: "RELAY_UNAVAILABLE", retryable: true });
        expect(session.status()).toBe("ready");
        const raw = await wire.call("health");
        expect(raw.status).toBe(503);
        expect(raw.body).toMatchObject({
          ok: false,
          epoch: binding.epoch,
          error: { code: "RELAY_UNAVAILABLE", retryable: true, mayHaveBeenDelivered: true },
        });
        expect(raw.text).not.toContain("REDIS");
        const status = await fetch(`${url}/api/session-control/status?session=${encodeURIComponent(wire.callerSession)}`);
        expect(status.status).toBe(503);
        expect(fx.relays[0]!.process.exitCode).toBeNull();
        fx.proxy.restore();
        expect((await session.receive("0")).deliveries).toEqual([]);
        expect(session.binding()).toEqual(binding);
        expect((await wire.call("health")).status).toBe(200);
      } finally {
        fx.proxy.restore();
        session.close();
      }
    });
  });

  describeWithPackage(`start-up refusals (relays on ${runtime})`, REDIS_BINARY, REDIS_PACKAGE, () => {
    async function relayCli(args: readonly string[], env: Record<string, string | undefined> = {}) {
      const child = spawn([...RELAY_RUNTIMES[runtime], "relay", "--port", "0", ...args], {
        cwd: REPO_ROOT,
        env: { ...process.env, WOLFPACK_JWT_SECRET: "", ...env },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      // A relay that started prints its readiness line and keeps running: read that line, then stop it.
      const reader = child.stdout.getReader();
      const first = await reader.read();
      const stdout = first.done ? "" : new TextDecoder().decode(first.value);
      reader.releaseLock();
      if (stdout !== "") child.kill("SIGTERM");
      const code = await child.exited;
      const stderr = await new Response(child.stderr).text();
      return {
        code,
        stdout,
        stderr,
        error: stderr.trim() === "" ? undefined : JSON.parse(stderr.trim().split("\n").at(-1)!),
      };
    }

    test("an unreachable Redis, a malformed URL, a persisting, an evicting and an unreadable Redis are refused before listening, each with its reason", async () => {
      const [persistent, evicting, locked] = await Promise.all([
        startRedis({ args: ["--save", "60 1"] }),
        startRedis({ args: ["--maxmemory-policy", "allkeys-lru"] }),
        startRedis({ args: ["--rename-command", "CONFIG", ""] }),
      ]);
      try {
        const nowhere = `redis://127.0.0.1:${freePort()}`;
        const [unreachable, malformed, wrongScheme, persists, allowed, evicts, unreadable, vouched, lonelyFlag] = await Promise.all([
          relayCli(["--store", nowhere]),
          relayCli(["--store", "redis://:secret@127.0.0.1:99999"]),
          relayCli(["--store", "http://127.0.0.1:6"]),
          relayCli(["--store", persistent.url]),
          relayCli(["--store", persistent.url, "--allow-persistent-store"]),
          relayCli(["--store", evicting.url, "--allow-persistent-store"]),
          relayCli(["--store", locked.url]),
          relayCli(["--store", locked.url, "--allow-persistent-store"]),
          relayCli(["--allow-persistent-store"]),
        ]);
        expect(unreachable).toMatchObject({
          code: 1,
          stdout: "",
          error: { ok: false, command: "relay", error: { code: "REDIS_UNAVAILABLE" } },
        });
        expect(unreachable.error.error.message).toBe(
          `Redis at ${nowhere}/0 cannot be reached (nothing accepts connections there within ${redisConnectTimeoutMs} ms)`,
        );
        for (const bad of [malformed, wrongScheme, lonelyFlag])
          expect(bad).toMatchObject({ code: 2, stdout: "", error: { error: { code: "CLI_USAGE" } } });
        expect(malformed.stderr).not.toContain("secret");
        expect(persists).toMatchObject({ code: 1, stdout: "", error: { error: { code: "REDIS_PERSISTENT", details: { save: "60 1" } } } });
        expect(persists.error.error.message).toContain("--allow-persistent-store");
        expect(allowed.code).toBe(0);
        expect(JSON.parse(allowed.stdout)).toMatchObject({ event: "listening", store: `${persistent.url}/0` });
        expect(allowed.stderr).toContain('"event":"store-notice"');
        expect(evicts).toMatchObject({ code: 1, error: { error: { code: "REDIS_EVICTS", details: { maxmemoryPolicy: "allkeys-lru" } } } });
        expect(unreadable).toMatchObject({ code: 1, error: { error: { code: "REDIS_PERSISTENT" } } });
        expect(unreadable.error.error.message).toContain("cannot check");
        expect(vouched.code).toBe(0);
        expect(vouched.stderr).toContain("configuration not checked");
      } finally {
        await Promise.all([persistent.stop(), evicting.stop(), locked.stop()]);
      }
    });
  });
}
