/** Dedupe: an identical resend is the same acceptance, delivered once. */
import assert from "node:assert/strict";
import { isUuid } from "../../protocol/endpoint.ts";
import { type ConformanceCheck, idsOf, inGroup } from "../kit.ts";

export const dedupeChecks: readonly ConformanceCheck[] = inGroup("dedupe", [
  {
    name: "an identical resend returns the same acceptanceId with duplicate:true and one delivery",
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("dedupe");
      const { envelope, accepted } = await a.sendOk(b.endpoint);
      assert.equal(accepted.duplicate, false);
      assert.equal(accepted.envelopeId, envelope.envelopeId);
      assert.equal(isUuid(accepted.acceptanceId), true);
      assert.equal(accepted.forwarding, "local");
      const again = expectValue(await a.send(envelope), "accepted");
      assert.equal(again.duplicate, true);
      assert.equal(again.acceptanceId, accepted.acceptanceId);
      assert.deepEqual(idsOf(await b.drain()), [envelope.envelopeId]);
    },
  },
  {
    name: "an identical resend after the ACK is still duplicate:true",
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("dedupe-acked");
      const { envelope, accepted } = await a.sendOk(b.endpoint);
      expectValue(await b.acknowledge(envelope.envelopeId), "acknowledged");
      const again = expectValue(await a.send(envelope), "accepted");
      assert.equal(again.duplicate, true);
      assert.equal(again.acceptanceId, accepted.acceptanceId);
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "concurrent identical sends (5 at once) yield one acceptanceId and one delivery",
    serial: true,
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("dedupe-concurrent");
      const envelope = a.envelopeTo(b.endpoint);
      const replies = await Promise.all(Array.from({ length: 5 }, () => a.send(envelope)));
      const values = replies.map((reply) => expectValue(reply, "accepted"));
      assert.equal(new Set(values.map((value) => value.acceptanceId)).size, 1);
      assert.equal(values.filter((value) => value.duplicate === false).length, 1);
      assert.deepEqual(idsOf(await b.drain()), [envelope.envelopeId]);
    },
  },
]);
