/** Cursors and acknowledgements: decimal, increasing, never renumbered; receiving never acknowledges. */
import assert from "node:assert/strict";
import { type ConformanceCheck, cursorsOf, idsOf, inGroup } from "../kit.ts";

export const cursorChecks: readonly ConformanceCheck[] = inGroup("cursors and acknowledgements", [
  {
    name: 'cursors are decimal strings, the first is "1", and they increase',
    run: async ({ pair }) => {
      const [a, b] = await pair("cursors");
      for (let index = 0; index < 3; index += 1) await a.sendOk(b.endpoint, { payload: { index } });
      const deliveries = await b.drain();
      for (const delivery of deliveries) assert.equal(typeof delivery.cursor, "string");
      assert.deepEqual(cursorsOf(deliveries), ["1", "2", "3"]);
      assert.deepEqual(
        deliveries.map((delivery) => (delivery.envelope.payload as { index: number }).index),
        [0, 1, 2],
      );
    },
  },
  {
    name: "receiving never acknowledges: receiving twice returns the same items",
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("receive-twice");
      const { envelope } = await a.sendOk(b.endpoint);
      const first = await b.page("0");
      const second = await b.page("0");
      assert.deepEqual(second, first);
      assert.deepEqual(idsOf(first.deliveries), [envelope.envelopeId]);
      assert.deepEqual(first.deliveries[0].envelope, envelope);
      assert.equal(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate, false);
    },
  },
  {
    name: 'after ACKing cursor 2 of 1..3, receive from "0" returns 1 and 3, from "1" returns 3',
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("sparse");
      const ids: string[] = [];
      for (let index = 0; index < 3; index += 1) ids.push((await a.sendOk(b.endpoint)).envelope.envelopeId);
      const [first, second, third] = ids as [string, string, string];
      expectValue(await b.acknowledge(second), "acknowledged");
      const fromZero = await b.page("0");
      assert.deepEqual(cursorsOf(fromZero.deliveries), ["1", "3"]);
      assert.deepEqual(idsOf(fromZero.deliveries), [first, third]);
      assert.equal(fromZero.nextCursor, "3");
      assert.deepEqual(cursorsOf((await b.page("1")).deliveries), ["3"]);
      assert.deepEqual(cursorsOf((await b.page("2")).deliveries), ["3"]);
      // Cursors are never renumbered: the next admission gets 4.
      await a.sendOk(b.endpoint);
      assert.deepEqual(cursorsOf((await b.page("0")).deliveries), ["1", "3", "4"]);
    },
  },
  {
    name: "ACK twice: the second answers duplicate:true",
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("ack-twice");
      const { envelope } = await a.sendOk(b.endpoint);
      assert.equal(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate, false);
      assert.equal(expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged").duplicate, true);
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "nextCursor is the requested cursor on an empty page",
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("empty-page");
      const empty = await b.page("0");
      assert.deepEqual(empty, { kind: "page", deliveries: [], nextCursor: "0", hasMore: false });
      const ids = [];
      for (let index = 0; index < 2; index += 1) ids.push((await a.sendOk(b.endpoint)).envelope.envelopeId);
      for (const id of ids) expectValue(await b.acknowledge(id), "acknowledged");
      for (const cursor of ["0", "1", "2"]) {
        const page = await b.page(cursor);
        assert.deepEqual(page.deliveries, []);
        assert.equal(page.nextCursor, cursor);
        assert.equal(page.hasMore, false);
      }
    },
  },
]);
