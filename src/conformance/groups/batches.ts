/**
 * Batches (ours, docs/wire.md "Our additions"): `send-batch-v1` (several envelopes in one `send`,
 * each admitted on its own with its outcome in order) and `ack-carry-v1` (an `acknowledge` that
 * carries envelopes — a delivery's receipts — admitted first; the ids acknowledged only if every one
 * was accepted). `ack-carry-v1` is a form of `ack-batch-v1`'s `envelopeIds` request.
 */
import assert from "node:assert/strict";
import { HTTP_STATUS } from "../../protocol/http.ts";
import { maxSendBatchItems } from "../../protocol/limits.ts";
import { FEATURE_ACK_CARRY, FEATURE_SEND_BATCH } from "../../protocol/wire.ts";
import { type ConformanceCheck, equal, idsOf, inGroup } from "../kit.ts";
import { localEndpoint, type WireEnvelopeValue } from "../wire-client.ts";

/** What a batch result says, without the acceptance's ids and times. */
function outcomes(results: readonly { envelopeId: string; outcome: string; error?: { code: string } }[]): string[] {
  return results.map((result) => (result.outcome === "refused" ? `refused ${result.error!.code}` : result.outcome));
}

function idsIn(envelopes: readonly WireEnvelopeValue[]): string[] {
  return envelopes.map((envelope) => envelope.envelopeId);
}

export const batchChecks: readonly ConformanceCheck[] = inGroup("batches", [
  {
    name: "send-batch-v1: one send with envelopes answers each envelope's acceptance in order; a resend is duplicate for each",
    feature: FEATURE_SEND_BATCH,
    run: async ({ expectValue, pair, session }) => {
      const [a, b] = await pair("send-batch");
      const c = await session("send-batch-c");
      const envelopes = [a.envelopeTo(b.endpoint), a.envelopeTo(c.endpoint), a.envelopeTo(b.endpoint)];
      const first = expectValue(await a.call("send", { envelopes }), "accepted-batch");
      assert.deepEqual(
        first.results.map((result: { envelopeId: string }) => result.envelopeId),
        idsIn(envelopes),
      );
      for (const result of first.results) {
        equal(result.outcome, "accepted");
        equal(result.duplicate, false);
        equal(result.forwarding, "local");
        equal(typeof result.acceptanceId, "string");
      }
      assert.deepEqual(idsOf(await b.drain()), [envelopes[0]!.envelopeId, envelopes[2]!.envelopeId]);
      assert.deepEqual(idsOf(await c.drain()), [envelopes[1]!.envelopeId]);
      const again = expectValue(await a.call("send", { envelopes }), "accepted-batch");
      assert.deepEqual(
        again.results.map((result: { duplicate: boolean; acceptanceId: string }) => [result.duplicate, result.acceptanceId]),
        first.results.map((result: { acceptanceId: string }) => [true, result.acceptanceId]),
      );
      equal((await b.drain()).length, 2);
    },
  },
  {
    name: "send-batch-v1: a refused envelope is refused alone and skips the later ones to its target; the others are admitted",
    feature: FEATURE_SEND_BATCH,
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("send-batch-refused");
      const gone = localEndpoint();
      const envelopes = [
        a.envelopeTo(b.endpoint),
        a.envelopeTo(gone),
        a.envelopeTo(gone),
        { ...a.envelopeTo(b.endpoint), source: localEndpoint() },
        a.envelopeTo(b.endpoint),
      ];
      const value = expectValue(await a.call("send", { envelopes }), "accepted-batch");
      assert.deepEqual(outcomes(value.results), [
        "accepted",
        "refused TARGET_NOT_REGISTERED",
        "skipped",
        "refused SOURCE_MISMATCH",
        "skipped",
      ]);
      assert.deepEqual(idsOf(await b.drain()), [envelopes[0]!.envelopeId]);
      equal(value.results[1].error.retryable, false);
    },
  },
  {
    name: "send-batch-v1: both forms, an empty or oversized list, an item without envelopeId or an id twice is 400 INVALID_REQUEST and admits nothing",
    feature: FEATURE_SEND_BATCH,
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("send-batch-bad");
      const one = a.envelopeTo(b.endpoint);
      const tooMany = Array.from({ length: maxSendBatchItems + 1 }, () => a.envelopeTo(b.endpoint));
      for (const fields of [
        { envelope: one, envelopes: [one] },
        {},
        { envelopes: [] },
        { envelopes: tooMany },
        { envelopes: [one, one] },
        { envelopes: [one, { ...a.envelopeTo(b.endpoint), envelopeId: 7 }] },
        { envelopes: [one, "envelope"] },
      ]) {
        expectError(await a.call("send", fields), "INVALID_REQUEST", HTTP_STATUS.badRequest);
      }
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "send-batch-v1: the binding is judged first: a batch under a stale epoch is RELAY_RESET and admits nothing",
    feature: FEATURE_SEND_BATCH,
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("send-batch-binding");
      const envelopes = [a.envelopeTo(b.endpoint), { ...a.envelopeTo(b.endpoint), source: localEndpoint() }];
      expectError(await a.call("send", { envelopes, epoch: crypto.randomUUID() }), "RELAY_RESET");
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "ack-carry-v1: an acknowledge carrying envelopes admits them first, then acknowledges the ids",
    feature: FEATURE_ACK_CARRY,
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("ack-carry");
      const { envelope } = await a.sendOk(b.endpoint);
      assert.deepEqual(idsOf(await b.drain()), [envelope.envelopeId]);
      const receipt = b.envelopeTo(a.endpoint, { payload: { receipt: envelope.envelopeId } });
      const value = expectValue(
        await b.call("acknowledge", { envelopeIds: [envelope.envelopeId], envelopes: [receipt] }),
        "acknowledged-batch",
      );
      assert.deepEqual(value.results, [{ envelopeId: envelope.envelopeId, outcome: "acknowledged" }]);
      assert.deepEqual(outcomes(value.sent), ["accepted"]);
      equal(value.sent[0].envelopeId, receipt.envelopeId);
      assert.deepEqual(await b.drain(), []);
      assert.deepEqual(idsOf(await a.drain()), [receipt.envelopeId]);
    },
  },
  {
    name: "ack-carry-v1: when a carried envelope is not accepted every id is withheld and stays in the mailbox",
    feature: FEATURE_ACK_CARRY,
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("ack-carry-withheld");
      const { envelope } = await a.sendOk(b.endpoint);
      const id = envelope.envelopeId;
      const envelopes = [b.envelopeTo(a.endpoint), b.envelopeTo(localEndpoint())];
      const value = expectValue(await b.call("acknowledge", { envelopeIds: [id], envelopes }), "acknowledged-batch");
      assert.deepEqual(value.results, [{ envelopeId: id, outcome: "withheld" }]);
      assert.deepEqual(outcomes(value.sent), ["accepted", "refused TARGET_NOT_REGISTERED"]);
      assert.deepEqual(idsOf(await b.drain()), [id]);
      assert.deepEqual(idsOf(await a.drain()), [envelopes[0]!.envelopeId]);
      // Carrying only what is accepted (a resend of an accepted envelope is a duplicate, accepted) acknowledges.
      const retry = expectValue(await b.call("acknowledge", { envelopeIds: [id], envelopes: [envelopes[0]] }), "acknowledged-batch");
      assert.deepEqual(retry.results, [{ envelopeId: id, outcome: "acknowledged" }]);
      equal(retry.sent[0].duplicate, true);
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "ack-carry-v1: envelopes without envelopeIds, an empty or oversized list, or an envelope twice is 400 INVALID_REQUEST and changes nothing",
    feature: FEATURE_ACK_CARRY,
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("ack-carry-bad");
      const { envelope } = await a.sendOk(b.endpoint);
      const id = envelope.envelopeId;
      const receipt = b.envelopeTo(a.endpoint);
      const tooMany = Array.from({ length: maxSendBatchItems + 1 }, () => b.envelopeTo(a.endpoint));
      for (const fields of [
        { envelopeId: id, envelopes: [receipt] },
        { envelopeIds: [id], envelopes: [] },
        { envelopeIds: [id], envelopes: tooMany },
        { envelopeIds: [id], envelopes: [receipt, receipt] },
      ]) {
        expectError(await b.call("acknowledge", fields), "INVALID_REQUEST", HTTP_STATUS.badRequest);
      }
      assert.deepEqual(idsOf(await b.drain()), [id]);
      assert.deepEqual(await a.drain(), []);
    },
  },
]);
