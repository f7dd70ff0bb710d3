/**
 * What the store asserts and what its byte bound counts: index edits that would break an index
 * (removing an entry that is not there, adding one twice) are typed INVARIANT_VIOLATED errors that
 * roll the transaction back; parsed values kept in the cache are charged against the byte bound,
 * and the cache gives way to writes.
 */
import { describe, expect, test } from "bun:test";
import { canonicalJson } from "../../src/protocol/canonical-json.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { emptyIndexes, indexRow } from "../../src/store/indexes.ts";
import { createRowEngine, encodedRecordBytes } from "../../src/store/rows.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { canonicalEnvelope, taskEvent, taskRecord } from "../helpers/fixtures.ts";
import { thrown } from "../../testkit/async.ts";

describe("index invariants", () => {
  test("removing an entry the index does not hold is INVARIANT_VIOLATED (typed, non-retryable)", () => {
    const indexes = emptyIndexes();
    const event = taskEvent(taskRecord(), 2);
    const error = thrown(() => indexRow(indexes, "event", event.eventId, event, undefined));
    expect(error.code).toBe("INVARIANT_VIOLATED");
    expect(error.retryable).toBe(false);
    expect(error.details.invariant).toBeString();
  });

  test("adding an entry twice is INVARIANT_VIOLATED", () => {
    const indexes = emptyIndexes();
    const record = taskRecord();
    const event = taskEvent(record, 2);
    indexRow(indexes, "event", event.eventId, undefined, event);
    expect(thrown(() => indexRow(indexes, "event", event.eventId, undefined, event)).code).toBe("INVARIANT_VIOLATED");
    indexRow(indexes, "delivery", "d", undefined, { cursor: "3" });
    expect(thrown(() => indexRow(indexes, "delivery", "d", undefined, { cursor: "3" })).code).toBe("INVARIANT_VIOLATED");
  });

  test("a violation inside a transaction rolls everything back", () => {
    let breakNext = false;
    const rows = createRowEngine<"t">({
      tables: ["t"],
      indexed: new Set(["t"]),
      maxRecords: 10,
      maxEncodedBytes: 10_000,
      apply: () => {
        if (breakNext) throw new TaskError("INVARIANT_VIOLATED");
      },
    });
    rows.write("t", "a", { n: 1 });
    breakNext = true;
    expect(thrown(() => rows.transaction(() => rows.write("t", "b", { n: 2 }))).code).toBe("INVARIANT_VIOLATED");
    breakNext = false;
    expect(rows.has("t", "b")).toBe(false);
    expect(rows.stats().records).toBe(1);
  });
});

describe("the byte bound counts what the store holds", () => {
  test("a cached parsed value is charged at its text's size; a write that needs the room drops cached values first", () => {
    const record = taskRecord();
    const text = canonicalJson({ record, role: "origin" });
    // Room for two task rows' text, but not for two rows plus their cached values.
    const bound = 2 * encodedRecordBytes(record.taskId, text) + 100;
    const store = createTaskStore({ maxEncodedBytes: bound });
    store.putTask(record, "origin");
    expect(store.stats().cachedBytes).toBe(0);
    store.getStoredTask(record.taskId);
    expect(store.stats().cachedBytes).toBe(Buffer.byteLength(text));
    expect(store.stats().encodedBytes + store.stats().cachedBytes).toBeLessThanOrEqual(bound);
    // The second row fits only by dropping the cached value: it is written, not refused.
    const second = taskRecord({ taskId: record.taskId.replace(/.$/, "f") });
    store.putTask(second, "origin");
    expect(store.stats().records).toBe(2);
    expect(store.stats().encodedBytes + store.stats().cachedBytes).toBeLessThanOrEqual(bound);
    // A read with no room returns the value without caching it.
    expect(store.getStoredTask(record.taskId)?.record.taskId).toBe(record.taskId);
    expect(store.stats().encodedBytes + store.stats().cachedBytes).toBeLessThanOrEqual(bound);
  });

  test("an envelope is stored once, as its wire text, and read back from it without re-encoding", () => {
    const store = createTaskStore();
    const record = taskRecord();
    store.putTask(record, "origin");
    const envelope = canonicalEnvelope(taskEvent(record, 2));
    const text = canonicalJson(envelope);
    store.putOutbox({
      envelopeId: envelope.envelopeId,
      taskId: record.taskId,
      target: record.target,
      kind: "canonical_event",
      purpose: "fanout",
      envelopeText: text,
    });
    expect(store.envelopeText(envelope.envelopeId)).toBe(text);
    store.markOutboxAttempted(envelope.envelopeId);
    store.markOutboxAccepted(envelope.envelopeId, { acceptanceId: "a", acceptedAt: 1, duplicate: false });
    // Tracking the envelope rewrote only its small tracking row: the text is the same string.
    expect(store.envelopeText(envelope.envelopeId)).toBe(text);
    expect(store.getEnvelope(envelope.envelopeId)).toEqual(envelope);
  });
});
