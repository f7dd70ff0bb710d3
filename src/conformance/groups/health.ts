/** Health: the store counts move with send and ack (serial: they are relay-wide). */
import assert from "node:assert/strict";
import { above, ANY_ADDITION, type ConformanceCheck, describeReply, equal, inBatches, inGroup } from "../kit.ts";

export const healthChecks: readonly ConformanceCheck[] = inGroup("health", [
  {
    name: "health reports the store and its counts move with send and ack",
    serial: true,
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("health");
      const store = async () => expectValue(await a.call("health"), "health").store;
      const before = await store();
      for (const key of [
        "activeItems",
        "activeBytes",
        "receipts",
        "receiptBytes",
        "registrations",
        "sessions",
        "routes",
        "metadataBytes",
        "expiryEntries",
        "logDrops",
      ]) {
        equal(typeof before[key], "number", key);
      }
      assert.equal(typeof before.investigationEnabled, "boolean");
      const { envelope } = await a.sendOk(b.endpoint);
      const sent = await store();
      assert.equal(sent.activeItems, before.activeItems + 1);
      above(sent.activeBytes, before.activeBytes);
      assert.equal(sent.receipts, before.receipts + 1);
      above(sent.receiptBytes, before.receiptBytes);
      expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged");
      const acked = await store();
      assert.equal(acked.activeItems, before.activeItems);
      assert.equal(acked.activeBytes, before.activeBytes);
      // The receipt stays for dedupe.
      assert.equal(acked.receipts, before.receipts + 1);
    },
  },
  {
    name: "additions: a new generation retires the old endpoint's mailbox and reclaims its budget",
    serial: true,
    feature: ANY_ADDITION,
    run: async ({ expectValue, session, pair }) => {
      const [a, b] = await pair("health-retire");
      const store = async () => expectValue(await a.call("health"), "health").store;
      const before = await store();
      for (let index = 0; index < 3; index += 1) await a.sendOk(b.endpoint);
      assert.equal((await store()).activeItems, before.activeItems + 3);
      const successor = await session("health-retire", { callerSession: b.callerSession });
      const after = await store();
      assert.equal(after.activeItems, before.activeItems);
      assert.equal(after.activeBytes, before.activeBytes);
      assert.deepEqual(await successor.drain(), []);
    },
  },
  {
    name: "additions: no per-client request bucket on loopback (240 quick requests are all served)",
    serial: true,
    feature: ANY_ADDITION,
    run: async ({ session }) => {
      const a = await session("no-bucket");
      const replies = await inBatches(240, 8, () => a.call("health"));
      assert.deepEqual(replies.filter((reply) => reply.status !== 200).map(describeReply), []);
    },
  },
]);
