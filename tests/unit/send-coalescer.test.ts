/**
 * The client's batches (`send-batch-v1`, src/relay-client/send-coalescer.ts): at most
 * `maxSendBatchItems` envelopes a request, and within `maxRequestBodyBytes` less
 * `sendBatchHeadroomBytes`, in the order the sends were made.
 */
import { describe, expect, test } from "bun:test";
import { KiB, maxRequestBodyBytes, sendBatchHeadroomBytes, maxSendBatchItems } from "../../src/protocol/limits.ts";
import { batchesOf } from "../../src/relay-client/send-coalescer.ts";

const items = (count: number, bytes: number) => Array.from({ length: count }, (_, index) => ({ index, bytes }));
const shape = (batches: { index: number }[][]) => batches.map((batch) => batch.map((item) => item.index));

describe("batchesOf", () => {
  test(`${maxSendBatchItems} envelopes fit one request; one more starts the next`, () => {
    expect(shape(batchesOf(items(maxSendBatchItems, KiB)))).toEqual([items(maxSendBatchItems, 0).map((item) => item.index)]);
    const over = batchesOf(items(maxSendBatchItems + 1, KiB));
    expect(over.map((batch) => batch.length)).toEqual([maxSendBatchItems, 1]);
    expect(over.flat().map((item) => item.index)).toEqual(items(maxSendBatchItems + 1, 0).map((item) => item.index));
  });

  test("the body budget cuts a batch before its envelopes (with their separators) pass it", () => {
    const budget = maxRequestBodyBytes - sendBatchHeadroomBytes;
    // Three envelopes with their commas fill the budget exactly; a fourth starts a new request.
    const exact = Math.floor(budget / 3) - 1;
    expect(batchesOf(items(4, exact)).map((batch) => batch.length)).toEqual([3, 1]);
    expect(batchesOf(items(4, exact + 1)).map((batch) => batch.length)).toEqual([2, 2]);
    // One envelope over the budget goes alone (the transport refuses it as a single send would).
    expect(
      batchesOf([
        { index: 0, bytes: 10 },
        { index: 1, bytes: budget + 1 },
        { index: 2, bytes: 10 },
      ]).map((batch) => batch.length),
    ).toEqual([1, 1, 1]);
  });
});
