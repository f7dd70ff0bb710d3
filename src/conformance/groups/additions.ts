/**
 * Our additions (docs/wire.md, "Our additions"): watch-v1, ack-batch-v1, successor-v1, the session
 * status route, and the fair shares of quotas-v1 and mail-expiry-v1.
 */
import assert from "node:assert/strict";
import { HTTP_STATUS } from "../../protocol/http.ts";
import {
  maxAckBatchItems,
  relayMailLifetimeMs,
  maxRelayRegistrations,
  maxRelaySenderActiveItems,
  maxRelaySenderMailboxItems,
  maxWatchWaitMs,
  minWatchWaitMs,
} from "../../protocol/limits.ts";
import { RELAY_PROFILE, SESSION_STATUS_PATH } from "../../protocol/names.ts";
import { FEATURE_ACK_BATCH, FEATURE_MAIL_EXPIRY, FEATURE_QUOTAS, FEATURE_SUCCESSOR, FEATURE_WATCH } from "../../protocol/wire.ts";
import {
  above,
  ANY_ADDITION,
  atLeast,
  atMost,
  below,
  type ConformanceCheck,
  cursorsOf,
  equal,
  idsOf,
  inBatches,
  inGroup,
  sleep,
} from "../kit.ts";
import { DOORBELL_MARGIN_MS, PROMPT_REPLY_MS, WATCH_CHECK_TIMEOUT_MS } from "../timing.ts";
import { connectRequest, getPath, postJson, uniqueName, valueOf, type WireSession } from "../wire-client.ts";

/** Requests a fair-share check keeps in flight (well under the relay's admission slots). */
const SHARE_WIDTH = 8;

/** Receives and acknowledges everything in `session`'s mailbox (a check leaves no queued mail behind). */
async function clear(session: WireSession): Promise<number> {
  const held = await session.drain();
  await inBatches(held.length, SHARE_WIDTH, async (index) =>
    valueOf("acknowledge", await session.acknowledge(held[index]!.envelope.envelopeId)),
  );
  return held.length;
}

export const additionChecks: readonly ConformanceCheck[] = inGroup("additions", [
  {
    name: "watch with no mail and waitMs 300 answers pending:false after the wait",
    serial: true,
    feature: FEATURE_WATCH,
    run: async ({ expectValue, session }) => {
      const a = await session("watch-idle");
      const waitMs = 300;
      const reply = await a.call("watch", { cursor: "0", waitMs });
      const value = expectValue(reply, "watch");
      assert.deepEqual(value, { kind: "watch", pending: false, highestCursor: "0" });
      // Timer slack of a few ms aside, the relay held the request for the whole wait.
      atLeast(reply.elapsedMs, waitMs - 5);
    },
  },
  {
    name: "a watch started before a send answers pending:true when the send is accepted, not when its wait ends (the doorbell rings)",
    serial: true,
    feature: FEATURE_WATCH,
    timeoutMs: WATCH_CHECK_TIMEOUT_MS,
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("watch-wake");
      let settled = false;
      // The longest wait a watch may ask: if the doorbell did not ring, the watch would only answer
      // when it elapses. How soon the doorbell rings is measured (npm run bench, delivery-watch), not judged here.
      const waitMs = maxWatchWaitMs;
      const watching = b.call("watch", { cursor: "0", waitMs }, { timeoutMs: waitMs + PROMPT_REPLY_MS }).finally(() => {
        settled = true;
      });
      await sleep(150);
      equal(settled, false, "the watch answered before any mail arrived");
      const sent = await a.send(a.envelopeTo(b.endpoint));
      expectValue(sent, "accepted");
      const woke = await watching;
      const value = expectValue(woke, "watch");
      assert.equal(value.pending, true);
      assert.equal(value.highestCursor, "1");
      below(woke.receivedAt - sent.receivedAt, waitMs - DOORBELL_MARGIN_MS);
      // The doorbell delivered nothing and acknowledged nothing.
      assert.deepEqual(cursorsOf(await b.drain()), ["1"]);
    },
  },
  {
    name: "a watch with pending mail answers at once and never acknowledges",
    serial: true,
    feature: FEATURE_WATCH,
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("watch-pending");
      const { envelope } = await a.sendOk(b.endpoint);
      const value = expectValue(await b.call("watch", { cursor: "0", waitMs: maxWatchWaitMs }, { timeoutMs: PROMPT_REPLY_MS }), "watch");
      assert.deepEqual(value, { kind: "watch", pending: true, highestCursor: "1" });
      // Nothing after cursor 1: not pending.
      assert.equal(expectValue(await b.call("watch", { cursor: "1", waitMs: minWatchWaitMs }), "watch").pending, false);
      assert.deepEqual(idsOf(await b.drain()), [envelope.envelopeId]);
      expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged");
      assert.deepEqual(expectValue(await b.call("watch", { cursor: "0", waitMs: minWatchWaitMs }), "watch"), {
        kind: "watch",
        pending: false,
        highestCursor: "1",
      });
    },
  },
  {
    name: "ack-batch-v1: one acknowledge with envelopeIds answers each id's outcome in order; the mailbox is empty after",
    feature: FEATURE_ACK_BATCH,
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("ack-batch");
      const sent = [await a.sendOk(b.endpoint), await a.sendOk(b.endpoint), await a.sendOk(b.endpoint)].map(
        ({ envelope }) => envelope.envelopeId as string,
      );
      assert.deepEqual(idsOf(await b.drain()), sent);
      const first = expectValue(await b.call("acknowledge", { envelopeIds: [sent[0], sent[1]] }), "acknowledged-batch");
      assert.deepEqual(first.results, [
        { envelopeId: sent[0], outcome: "acknowledged" },
        { envelopeId: sent[1], outcome: "acknowledged" },
      ]);
      const unknown = crypto.randomUUID();
      const second = expectValue(await b.call("acknowledge", { envelopeIds: [sent[0], sent[2], unknown] }), "acknowledged-batch");
      assert.deepEqual(second.results, [
        { envelopeId: sent[0], outcome: "duplicate" },
        { envelopeId: sent[2], outcome: "acknowledged" },
        { envelopeId: unknown, outcome: "unknown" },
      ]);
      assert.deepEqual(await b.drain(), []);
      // Another endpoint's envelope is unknown to this one.
      const [c, d] = await pair("ack-batch-other");
      const { envelope } = await c.sendOk(d.endpoint);
      assert.deepEqual(expectValue(await b.call("acknowledge", { envelopeIds: [envelope.envelopeId] }), "acknowledged-batch").results, [
        { envelopeId: envelope.envelopeId, outcome: "unknown" },
      ]);
      assert.deepEqual(idsOf(await d.drain()), [envelope.envelopeId]);
    },
  },
  {
    name: "ack-batch-v1: both forms, an empty or oversized list, or an id twice is 400 INVALID_REQUEST and acknowledges nothing",
    feature: FEATURE_ACK_BATCH,
    run: async ({ expectError, expectValue, pair }) => {
      const [a, b] = await pair("ack-batch-bad");
      const { envelope } = await a.sendOk(b.endpoint);
      const id = envelope.envelopeId as string;
      const tooMany = [id, ...Array.from({ length: maxAckBatchItems }, () => crypto.randomUUID())];
      for (const fields of [
        { envelopeId: id, envelopeIds: [id] },
        {},
        { envelopeIds: [] },
        { envelopeIds: tooMany },
        { envelopeIds: [id, id] },
        { envelopeIds: [id, 7] },
      ]) {
        expectError(await b.call("acknowledge", fields), "INVALID_REQUEST", HTTP_STATUS.badRequest);
      }
      assert.deepEqual(idsOf(await b.drain()), [id]);
      expectValue(await b.acknowledge(id), "acknowledged");
    },
  },
  {
    name: "resolve followSuccessor:true on a retired endpoint answers the live successor",
    feature: FEATURE_SUCCESSOR,
    run: async ({ expectError, expectValue, session }) => {
      const name = uniqueName("successor");
      const asker = await session("successor-asker");
      const first = await session("successor", { callerSession: name });
      const second = await session("successor", { callerSession: name });
      const followed = expectValue(await asker.call("resolve", { target: first.endpoint, followSuccessor: true }), "resolved");
      assert.deepEqual(followed, { kind: "resolved", endpoint: second.endpoint, successorOf: first.endpoint });
      expectError(await asker.call("resolve", { target: first.endpoint }), "TARGET_NOT_REGISTERED");
      expectError(await asker.call("resolve", { target: first.endpoint, followSuccessor: false }), "TARGET_NOT_REGISTERED");
      // A live endpoint resolves to itself, without successorOf.
      assert.deepEqual(expectValue(await asker.call("resolve", { target: second.endpoint, followSuccessor: true }), "resolved"), {
        kind: "resolved",
        endpoint: second.endpoint,
      });
      // A chain of generations resolves to the newest one.
      const third = await session("successor", { callerSession: name });
      const chained = expectValue(await asker.call("resolve", { target: first.endpoint, followSuccessor: true }), "resolved");
      assert.deepEqual(chained, { kind: "resolved", endpoint: third.endpoint, successorOf: first.endpoint });
      // A disconnected (not superseded) endpoint has no successor.
      expectValue(await third.disconnect(), "disconnected");
      expectError(await asker.call("resolve", { target: third.endpoint, followSuccessor: true }), "TARGET_NOT_REGISTERED");
      expectError(await asker.call("resolve", { target: first.endpoint, followSuccessor: true }), "TARGET_NOT_REGISTERED");
    },
  },
  {
    name: "quotas-v1: one sender holds at most maxRelaySenderMailboxItems of a mailbox; its next send is 503 RELAY_CAPACITY with retryAfterMs, another sender's still gets in; an ACK makes room",
    serial: true,
    feature: FEATURE_QUOTAS,
    run: async ({ expectError, expectValue, pair, session }) => {
      const [flooder, target] = await pair("share");
      const sent = await inBatches(
        maxRelaySenderMailboxItems,
        SHARE_WIDTH,
        async (index) => (await flooder.sendOk(target.endpoint, { payload: { index } })).envelope.envelopeId,
      );
      const refused = expectError(await flooder.send(flooder.envelopeTo(target.endpoint)), "RELAY_CAPACITY");
      above(refused.retryAfterMs ?? 0, 0, "retryAfterMs of a refusal for a sender's share");
      // The target's mailbox is not full: another sender's mail gets in.
      const other = await session("share-other");
      const { envelope } = await other.sendOk(target.endpoint);
      expectValue(await target.acknowledge(sent[0]!), "acknowledged");
      expectValue(await flooder.send(flooder.envelopeTo(target.endpoint)), "accepted");
      const held = await target.drain();
      assert.equal(held.length, maxRelaySenderMailboxItems + 1);
      assert.ok(idsOf(held).includes(envelope.envelopeId), "the other sender's envelope is in the mailbox");
      await clear(target);
    },
  },
  {
    name: "quotas-v1: one sender holds at most maxRelaySenderActiveItems queued relay-wide; its next send is 503 RELAY_CAPACITY with retryAfterMs, another sender's still gets in",
    serial: true,
    feature: FEATURE_QUOTAS,
    run: async ({ expectError, expectValue, session }) => {
      const flooder = await session("wide-share");
      const targets = await Promise.all(
        Array.from({ length: Math.ceil(maxRelaySenderActiveItems / maxRelaySenderMailboxItems) + 1 }, (_, index) =>
          session(`wide-share-${index}`),
        ),
      );
      await inBatches(maxRelaySenderActiveItems, SHARE_WIDTH, (index) =>
        flooder.sendOk(targets[index % (targets.length - 1)]!.endpoint, { payload: { index } }),
      );
      // The last target's mailbox is empty: what refuses is the sender's relay-wide share.
      const last = targets.at(-1)!;
      const refused = expectError(await flooder.send(flooder.envelopeTo(last.endpoint)), "RELAY_CAPACITY");
      above(refused.retryAfterMs ?? 0, 0, "retryAfterMs of a refusal for a sender's share");
      const other = await session("wide-share-other");
      expectValue(await other.send(other.envelopeTo(last.endpoint)), "accepted");
      let cleared = 0;
      for (const target of targets) cleared += await clear(target);
      assert.equal(cleared, maxRelaySenderActiveItems + 1);
    },
  },
  {
    name: "quotas-v1: with the registration budget spent, a connect takes the place of an ended registration instead of being refused",
    serial: true,
    feature: FEATURE_QUOTAS,
    run: async ({ baseUrl, epoch, expectValue, session }) => {
      const probe = await session("registry-probe");
      const room = maxRelayRegistrations - Number(expectValue(await probe.call("health"), "health").store.registrations);
      // Fill every place, then end the registrations (a client that went away).
      const fillers = await inBatches(room, SHARE_WIDTH, async (index) => {
        const callerSession = uniqueName(`registry-filler-${index}`);
        const value = valueOf("connect", await postJson(baseUrl, connectRequest({ callerSession, generation: crypto.randomUUID() })));
        return { callerSession, endpoint: value.endpoint };
      });
      const registrations = Number(expectValue(await probe.call("health"), "health").store.registrations);
      atMost(registrations, maxRelayRegistrations);
      await inBatches(fillers.length, SHARE_WIDTH, async (index) => {
        const { callerSession, endpoint } = fillers[index]!;
        return valueOf(
          "disconnect",
          await postJson(baseUrl, { operation: "disconnect", profile: RELAY_PROFILE, epoch, callerSession, endpoint }),
        );
      });
      // Ended registrations are kept for a while, but they no longer hold a place against a newcomer.
      const newcomer = await session("registry-newcomer");
      expectValue(await newcomer.call("health"), "health");
      atMost(Number(expectValue(await probe.call("health"), "health").store.registrations), maxRelayRegistrations);
    },
  },
  {
    name: "mail-expiry-v1: an acceptance carries expiresAt, relayMailLifetimeMs after the acceptance; a duplicate carries the same",
    feature: FEATURE_MAIL_EXPIRY,
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("expires-at");
      const before = Date.now();
      const { envelope, accepted } = await a.sendOk(b.endpoint);
      const after = Date.now();
      assert.equal(typeof accepted.expiresAt, "string", "expiresAt of the acceptance");
      const expiresAt = Date.parse(accepted.expiresAt);
      atLeast(expiresAt, before + relayMailLifetimeMs);
      atMost(expiresAt, after + relayMailLifetimeMs);
      equal(expectValue(await a.send(envelope), "accepted").expiresAt, accepted.expiresAt, "expiresAt of the duplicate");
      expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged");
      equal(expectValue(await a.send(envelope), "accepted").expiresAt, accepted.expiresAt, "expiresAt of the duplicate after the ACK");
    },
  },
  {
    name: "GET session status: 200 with the live registration, 404 CALLER_NOT_FOUND otherwise",
    feature: ANY_ADDITION,
    run: async ({ baseUrl, epoch, expectError, expectValue, session }) => {
      const statusOf = (name: string) => getPath(baseUrl, `${SESSION_STATUS_PATH}?session=${encodeURIComponent(name)}`);
      const name = uniqueName("status");
      const a = await session("status", { callerSession: name });
      const live = await statusOf(name);
      assert.equal(live.status, HTTP_STATUS.ok);
      assert.equal(live.headers.get("cache-control"), "no-store");
      assert.deepEqual(live.body, {
        session: name,
        taskEndpoint: a.endpoint,
        taskTransport: { profile: RELAY_PROFILE, epoch, endpoint: a.endpoint, leaseExpiresAt: a.leaseExpiresAt },
      });
      const successor = await session("status", { callerSession: name });
      assert.deepEqual((await statusOf(name)).body.taskEndpoint, successor.endpoint);
      expectError(await statusOf(uniqueName("status-ghost")), "CALLER_NOT_FOUND");
      expectValue(await successor.disconnect(), "disconnected");
      expectError(await statusOf(name), "CALLER_NOT_FOUND");
    },
  },
]);
