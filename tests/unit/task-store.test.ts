import { describe, expect, test } from "bun:test";
import { maxStoreEncodedBytes, maxStoreRecords } from "../../src/protocol/limits.ts";
import type { TaskEndpoint, TaskRecord } from "../../src/protocol/schemas.ts";
import { canonicalJson } from "../../src/protocol/canonical-json.ts";
import { encodedRecordBytes } from "../../src/store/rows.ts";
import { createTaskStore, type NewOutboxEntry, type TaskStore } from "../../src/store/task-store.ts";
import { canonicalEnvelope, endpoint, OTHER, taskEvent, taskRecord, testId, WORKER } from "../helpers/fixtures.ts";
import { thrown } from "../../testkit/async.ts";

function outboxFor(record: TaskRecord, target: TaskEndpoint = record.target, purpose = "fanout"): NewOutboxEntry {
  const event = { ...taskEvent(record, 2), target };
  const envelope = { ...canonicalEnvelope(event), target };
  return {
    envelopeId: envelope.envelopeId,
    taskId: record.taskId,
    target,
    kind: "canonical_event",
    purpose,
    envelopeText: canonicalJson(envelope),
  };
}

/** A delivery as intake tracks it (the core's stage and data are opaque to the store). */
function delivery(cursor: string, envelopeId: string, envelope: unknown = {}) {
  return { cursor, envelopeId, envelope, receivedAt: 1, stage: "tracked", data: {} };
}

function storeWithTask(): { store: TaskStore; record: TaskRecord } {
  const store = createTaskStore();
  const record = taskRecord();
  store.putTask(record, "origin");
  return { store, record };
}

describe("TaskStore options", () => {
  test("persistence and path options are rejected", () => {
    for (const option of ["path", "filename", "database", "persist"]) {
      expect(thrown(() => createTaskStore({ [option]: "/tmp/x" } as never)).code).toBe("PERSISTENCE_UNSUPPORTED");
    }
  });

  test("bounds can be lowered, never raised", () => {
    expect(createTaskStore({ maxRecords: 10 }).stats().maxRecords).toBe(10);
    expect(createTaskStore().stats().maxRecords).toBe(maxStoreRecords);
    expect(createTaskStore().stats().maxEncodedBytes).toBe(maxStoreEncodedBytes);
    expect(thrown(() => createTaskStore({ maxRecords: maxStoreRecords + 1 })).code).toBe("INVALID_CONFIGURATION");
    expect(thrown(() => createTaskStore({ maxEncodedBytes: maxStoreEncodedBytes + 1 })).code).toBe("INVALID_CONFIGURATION");
    expect(thrown(() => createTaskStore({ maxRecords: 0 })).code).toBe("INVALID_CONFIGURATION");
    expect(thrown(() => createTaskStore({ cacheSize: 1 } as never)).code).toBe("INVALID_CONFIGURATION");
  });
});

describe("TaskStore values", () => {
  test("stored values are deep-frozen; a strict-mode write throws TypeError", () => {
    const { store, record } = storeWithTask();
    const event = taskEvent(record, 2);
    store.appendEvent(event);
    const read = store.getEvent(event.eventId)!;
    expect(() => {
      (read as { type: string }).type = "task.failed";
    }).toThrow(TypeError);
    expect(() => {
      (read.payload as Record<string, unknown>).message = "changed";
    }).toThrow(TypeError);
    expect(() => {
      (read.source as { id: string }).id = "x";
    }).toThrow(TypeError);
    const entry = outboxFor(record);
    store.putOutbox(entry);
    const envelope = store.getEnvelope(entry.envelopeId)!;
    expect(() => {
      (envelope as { createdAt: string }).createdAt = "now";
    }).toThrow(TypeError);
    // The envelope is stored as the exact wire text it was given.
    expect(store.envelopeText(entry.envelopeId)).toBe(entry.envelopeText);
  });

  test("values are parsed once and shared between reads", () => {
    const { store, record } = storeWithTask();
    const event = taskEvent(record, 2);
    store.appendEvent(event);
    const parsesBefore = store.stats().rowParses;
    const first = store.getEvent(event.eventId);
    const second = store.getEvent(event.eventId);
    expect(first).toBe(second!);
    expect(store.stats().rowParses).toBe(parsesBefore + 1);
  });

  test("snapshots are fresh top-level objects; writing to them changes nothing", () => {
    const { store, record } = storeWithTask();
    const snapshot = store.getTask(record.taskId)!;
    (snapshot as { status: string }).status = "completed";
    expect(store.getTask(record.taskId)!.status).toBe("active");
    expect(store.getTask(record.taskId)).not.toBe(snapshot);
    expect(Object.isFrozen(snapshot.origin)).toBe(true);
  });

  test("only-new writes", () => {
    const { store, record } = storeWithTask();
    expect(store.putTask(record, "origin")).toBe(false);
    const event = taskEvent(record, 2);
    expect(store.appendEvent(event)).toBe(true);
    expect(store.appendEvent(event)).toBe(false);
    expect(thrown(() => store.appendEvent({ ...event, eventId: testId(), taskId: "missing" })).code).toBe("UNKNOWN_TASK");
  });
});

describe("TaskStore transactions", () => {
  test("a throw rolls back rows, indexes and counters", () => {
    const { store, record } = storeWithTask();
    const before = store.stats();
    const indexesBefore = store.debugIndexes().actual;
    const failure = new Error("abort");
    expect(() =>
      store.transaction(() => {
        store.appendEvent(taskEvent(record, 2));
        store.setStatus(record.taskId, "completed");
        store.putOutbox(outboxFor(record));
        store.trackDelivery(delivery("5", testId()));
        throw failure;
      }),
    ).toThrow(failure);
    const after = store.stats();
    expect({ records: after.records, bytes: after.encodedBytes }).toEqual({ records: before.records, bytes: before.encodedBytes });
    expect(store.debugIndexes().actual).toEqual(indexesBefore);
    expect(store.hasActiveTasks()).toBe(true);
    expect(store.checkpoint()).toEqual({ frontier: "0", highWater: "0" });
    // The outbox creation counter was rolled back too: the next entry gets the first seq.
    const entry = outboxFor(record);
    store.putOutbox(entry);
    expect(store.getOutbox(entry.envelopeId)!.seq).toBe(1);
  });

  test("a Promise result is an error and rolls back", () => {
    const { store, record } = storeWithTask();
    const error = thrown(() =>
      store.transaction(() => {
        store.appendEvent(taskEvent(record, 2));
        return Promise.resolve(1) as never;
      }),
    );
    expect(error.code).toBe("INVALID_TRANSACTION");
    expect(store.eventCount(record.taskId)).toBe(0);
  });

  test("nested frames merge into the parent; an inner throw undoes only the inner frame", () => {
    const { store, record } = storeWithTask();
    const kept = taskEvent(record, 2);
    const dropped = taskEvent(record, 3);
    store.transaction(() => {
      store.appendEvent(kept);
      expect(() =>
        store.transaction(() => {
          store.appendEvent(dropped);
          throw new Error("inner");
        }),
      ).toThrow("inner");
    });
    expect(store.getEvents(record.taskId).map((event) => event.eventId)).toEqual([kept.eventId]);
    const outer = taskEvent(record, 4);
    expect(() =>
      store.transaction(() => {
        store.transaction(() => store.appendEvent(outer));
        throw new Error("outer");
      }),
    ).toThrow("outer");
    expect(store.getEvent(outer.eventId)).toBeUndefined();
  });

  test("onChange fires after commit, never inside, and not for rollbacks or no-ops", () => {
    const { store, record } = storeWithTask();
    let inside = false;
    const seen: boolean[] = [];
    store.onChange(() => seen.push(inside));
    store.transaction(() => {
      inside = true;
      store.appendEvent(taskEvent(record, 2));
      store.appendEvent(taskEvent(record, 3));
      inside = false;
    });
    expect(seen).toEqual([false]);
    expect(() =>
      store.transaction(() => {
        store.appendEvent(taskEvent(record, 4));
        throw new Error("x");
      }),
    ).toThrow("x");
    store.transaction(() => store.putTask(record, "origin"));
    expect(seen).toEqual([false]);
    store.setStatus(record.taskId, "failed");
    expect(seen).toEqual([false, false]);
  });

  test("clear drops everything, notifies, and is refused inside a transaction", () => {
    const { store, record } = storeWithTask();
    store.putOutbox(outboxFor(record));
    let notified = 0;
    store.onChange(() => {
      notified += 1;
    });
    expect(thrown(() => store.transaction(() => store.clear())).code).toBe("INVALID_TRANSACTION");
    store.clear();
    expect(notified).toBe(1);
    expect(store.stats().records).toBe(0);
    expect(store.hasActiveTasks()).toBe(false);
    expect(store.pendingOutboxCount()).toBe(0);
  });
});

describe("TaskStore events and tasks", () => {
  test("events are ordered by BigInt sequence, then event id", () => {
    const { store, record } = storeWithTask();
    const sequences = ["10", "9", "9007199254740993", "9007199254740992", "2"];
    for (const sequence of sequences) store.appendEvent({ ...taskEvent(record, 1), sequence });
    expect(store.getEvents(record.taskId).map((event) => event.sequence)).toEqual(["2", "9", "10", "9007199254740992", "9007199254740993"]);
    expect(store.getEvents(record.taskId).at(-1)!.sequence).toBe("9007199254740993");
    expect(store.eventCount(record.taskId)).toBe(5);
  });

  test("active tasks are a set that follows status", () => {
    const store = createTaskStore();
    const a = taskRecord();
    const b = taskRecord();
    store.putTask(a, "origin");
    store.putTask(b, "worker");
    expect(store.activeTaskIds().sort()).toEqual([a.taskId, b.taskId].sort());
    store.setStatus(a.taskId, "completed");
    expect(store.activeTaskIds()).toEqual([b.taskId]);
    store.setStatus(b.taskId, "timed_out");
    expect(store.hasActiveTasks()).toBe(false);
    expect(
      store
        .listTasks()
        .map((task) => task.role)
        .sort(),
    ).toEqual(["origin", "worker"]);
  });

  test("updateTask moves the task and changes its generation; a missing task is UNKNOWN_TASK", () => {
    const { store, record } = storeWithTask();
    store.updateTask(record.taskId, { target: OTHER, generation: 2 });
    expect(store.getTask(record.taskId)).toMatchObject({ target: OTHER, generation: 2, origin: record.origin });
    expect(thrown(() => store.updateTask("missing", { target: OTHER })).code).toBe("UNKNOWN_TASK");
  });
});

describe("TaskStore outbox", () => {
  test("per-target FIFO: pendingOutboxAhead names older pending mail to the same target only", () => {
    const { store, record } = storeWithTask();
    const first = outboxFor(record);
    const second = outboxFor(record);
    const elsewhere = outboxFor(record, OTHER);
    const third = outboxFor(record);
    for (const entry of [first, second, elsewhere, third]) store.putOutbox(entry);
    expect(store.pendingOutboxAhead(first.envelopeId)).toEqual([]);
    expect(store.pendingOutboxAhead(third.envelopeId)).toEqual([first.envelopeId, second.envelopeId]);
    expect(store.pendingOutboxAhead(elsewhere.envelopeId)).toEqual([]);
    store.markOutboxAccepted(first.envelopeId, { acceptanceId: "a", acceptedAt: 1, duplicate: false });
    expect(store.pendingOutboxAhead(third.envelopeId)).toEqual([second.envelopeId]);
    expect(
      store
        .retryHeads()
        .map((entry) => entry.envelopeId)
        .sort(),
    ).toEqual([second.envelopeId, elsewhere.envelopeId].sort());
    expect(store.pendingOutboxCount()).toBe(3);
  });

  test("a quarantined envelope leaves the queue, blocks nothing and is indexed by envelope id", () => {
    const { store, record } = storeWithTask();
    const blocked = outboxFor(record);
    const next = outboxFor(record);
    store.putOutbox(blocked);
    store.putOutbox(next);
    const entry = store.quarantineOutbox(blocked.envelopeId, {
      errorCode: "TARGET_NOT_REGISTERED",
      details: { operation: "send" },
      quarantinedAt: 7,
    });
    expect(entry.priorState).toBe("pending");
    expect(store.getQuarantine(blocked.envelopeId)!.errorCode).toBe("TARGET_NOT_REGISTERED");
    expect(store.getOutbox(blocked.envelopeId)).toBeUndefined();
    expect(store.pendingOutboxAhead(next.envelopeId)).toEqual([]);
    expect(store.putOutbox(blocked)).toBe(false);
    expect(store.listQuarantine().map((item) => item.envelopeId)).toEqual([blocked.envelopeId]);
  });

  test("retry heads offer each target's oldest envelope in fair rotation", () => {
    const { store, record } = storeWithTask();
    const a1 = outboxFor(record, WORKER);
    const b1 = outboxFor(record, OTHER);
    const a2 = outboxFor(record, WORKER);
    const third = endpoint();
    const c1 = outboxFor(record, third);
    for (const entry of [a1, b1, a2, c1]) store.putOutbox(entry);
    const heads = () => store.retryHeads().map((entry) => entry.envelopeId);
    expect(heads()).toEqual([a1.envelopeId, b1.envelopeId, c1.envelopeId]);
    store.rotateRetry(store.getOutbox(a1.envelopeId)!.targetKey);
    expect(heads()).toEqual([b1.envelopeId, c1.envelopeId, a1.envelopeId]);
    store.rotateRetry(store.getOutbox(b1.envelopeId)!.targetKey);
    expect(heads()).toEqual([c1.envelopeId, a1.envelopeId, b1.envelopeId]);
    store.markOutboxAccepted(a1.envelopeId, { acceptanceId: "x", acceptedAt: 1, duplicate: false });
    expect(heads()).toEqual([c1.envelopeId, a2.envelopeId, b1.envelopeId]);
  });

  test("discardUnsentOperation withdraws a never-attempted envelope and its reservation", () => {
    const { store, record } = storeWithTask();
    const receipt = outboxFor(record, record.origin, "receipt");
    store.transaction(() => {
      store.putOutbox(receipt);
      store.reserveOperation(record.taskId, "delivery_evidence:e:wake_accepted:confirmed", () => ({
        logicalId: "i",
        logicalType: "task.delivery_receipt",
        envelopeIds: [receipt.envelopeId],
        createdAt: 1,
      }));
    });
    expect(store.discardUnsentOperation(receipt.envelopeId)).toBe(true);
    expect(store.getOutbox(receipt.envelopeId)).toBeUndefined();
    expect(store.getOperation(record.taskId, "delivery_evidence:e:wake_accepted:confirmed")).toBeUndefined();
    const attempted = outboxFor(record);
    store.putOutbox(attempted);
    store.markOutboxAttempted(attempted.envelopeId);
    expect(store.discardUnsentOperation(attempted.envelopeId)).toBe(false);
    expect(store.getOutbox(attempted.envelopeId)!.state).toBe("pending");
    expect(store.discardUnsentOperation("unknown")).toBe(false);
  });

  test("cooldowns are kept per key", () => {
    const store = createTaskStore();
    store.setCooldown("envelope:e", { until: 5000, code: "RELAY_CAPACITY" });
    store.setCooldown("target:t", { until: 7000, code: "RELAY_CAPACITY" });
    expect(store.getCooldown("envelope:e")!.until).toBe(5000);
    store.clearCooldown("envelope:e");
    expect(store.getCooldown("envelope:e")).toBeUndefined();
    expect(store.getCooldown("target:t")!.until).toBe(7000);
  });
});

describe("TaskStore operations and terminal delivery", () => {
  test("reservations are idempotent per (task, operation)", () => {
    const { store, record } = storeWithTask();
    let calls = 0;
    const make = () => {
      calls += 1;
      return { logicalId: `l${calls}`, logicalType: "task.completed", envelopeIds: [`env${calls}`], createdAt: 1 };
    };
    const first = store.reserveOperation(record.taskId, "terminal_intent", make);
    const second = store.reserveOperation(record.taskId, "terminal_intent", make);
    expect(first.created).toBe(true);
    expect(second.created).toBe(false);
    expect(second.record).toEqual(first.record);
    expect(calls).toBe(1);
  });

  test("withdrawing a never-sent envelope removes its row, its wire text and the reservation naming it", () => {
    const { store, record } = storeWithTask();
    const entry = outboxFor(record);
    store.transaction(() => {
      store.putOutbox(entry);
      store.reserveOperation(record.taskId, "op", () => ({
        logicalId: "l",
        logicalType: "t",
        envelopeIds: [entry.envelopeId],
        createdAt: 1,
      }));
    });
    expect(store.discardUnsentOperation(entry.envelopeId)).toBe(true);
    expect(store.getOutbox(entry.envelopeId)).toBeUndefined();
    expect(store.envelopeText(entry.envelopeId)).toBeUndefined();
    expect(store.getOperation(record.taskId, "op")).toBeUndefined();
  });
});

describe("TaskStore ACK checkpoint", () => {
  test("ACK 2 first keeps the frontier at 0; then ACK 1 moves it to 2", () => {
    const store = createTaskStore();
    store.trackDelivery(delivery("1", "e1"));
    store.trackDelivery(delivery("2", "e2"));
    expect(store.checkpoint()).toEqual({ frontier: "0", highWater: "2" });
    store.acknowledgeDelivery("e2");
    expect(store.checkpoint()).toEqual({ frontier: "0", highWater: "2" });
    store.acknowledgeDelivery("e1");
    expect(store.checkpoint()).toEqual({ frontier: "2", highWater: "2" });
  });

  test("sparse BigInt cursors: the frontier stops below the oldest unacknowledged delivery", () => {
    const store = createTaskStore();
    const big = "9007199254740993";
    const huge = "9".repeat(32);
    store.trackDelivery(delivery("5", "a"));
    store.trackDelivery(delivery(big, "b"));
    store.trackDelivery(delivery(huge, "c"));
    expect(store.deliveries().map((row) => row.cursor)).toEqual(["5", big, huge]);
    store.acknowledgeDelivery("a");
    expect(store.checkpoint().frontier).toBe("5");
    store.acknowledgeDelivery("c");
    expect(store.checkpoint().frontier).toBe("5");
    store.acknowledgeDelivery("b");
    expect(store.checkpoint()).toEqual({ frontier: huge, highWater: huge });
  });

  test("cursor identity: duplicates are no-ops, going backwards or bad cursors are INVALID_CURSOR", () => {
    const store = createTaskStore();
    expect(store.trackDelivery(delivery("3", "a"))).toBe("tracked");
    expect(store.trackDelivery(delivery("3", "a"))).toBe("duplicate");
    expect(thrown(() => store.trackDelivery(delivery("3", "b"))).code).toBe("INVALID_CURSOR");
    expect(thrown(() => store.trackDelivery(delivery("2", "c"))).code).toBe("INVALID_CURSOR");
    for (const bad of ["", "01", "-1", "1.5", "1".repeat(33)]) {
      expect(thrown(() => store.trackDelivery(delivery(bad, "d"))).code).toBe("INVALID_CURSOR");
    }
    expect(store.trackDelivery(delivery("9", "a"))).toBe("duplicate");
    expect(store.checkpoint().highWater).toBe("9");
    expect(store.pendingDeliveryCount()).toBe(1);
  });

  test("delivery rows carry the core's stage, ACK authorisation and data; what was delivered is kept beside them", () => {
    const store = createTaskStore();
    store.trackDelivery(delivery("1", "a", { x: 1 }));
    store.updateDelivery("a", { stage: "presented", data: { eventId: "e" } });
    const row = store.updateDelivery("a", { ackRequested: true, data: { eventId: "e", taskId: "t" } });
    expect(row).toMatchObject({ stage: "presented", ackRequested: true, data: { eventId: "e", taskId: "t" } });
    expect(store.deliveryEnvelope("a")).toEqual({ x: 1 });
    store.acknowledgeDelivery("a");
    expect(store.deliveryEnvelope("a")).toBeUndefined();
    expect(thrown(() => store.updateDelivery("missing", { stage: "x" })).code).toBe("INVALID_DELIVERY");
  });
});

describe("TaskStore local presentation queue", () => {
  test("local items share intake order with deliveries and complete once", () => {
    const { store, record } = storeWithTask();
    store.trackDelivery(delivery("1", "relay-1"));
    const completion = taskEvent(record, 3, "task.completed", { summary: "done" });
    store.appendEvent(completion);
    const local = store.enqueueLocalPresentation(completion);
    store.trackDelivery(delivery("2", "relay-2"));
    const orders = [store.getDelivery("relay-1")!.order, local.order, store.getDelivery("relay-2")!.order];
    expect([...orders].sort((a, b) => a - b)).toEqual(orders);
    expect(store.enqueueLocalPresentation(completion).order).toBe(local.order);
    expect(store.localPresentations().map((item) => item.event.eventId)).toEqual([completion.eventId]);
    expect(store.completeLocalPresentation(completion.eventId)).toBe(true);
    expect(store.completeLocalPresentation(completion.eventId)).toBe(false);
    expect(store.localPresentations()).toEqual([]);
  });

  test("evidence accumulates per event", () => {
    const store = createTaskStore();
    store.recordEvidence("e", { inserted: true });
    expect(store.recordEvidence("e", { woken: true })).toEqual({ inserted: true, woken: true });
  });
});

describe("TaskStore bounds (lower-only, checked before writing)", () => {
  test(`records: exactly ${maxStoreRecords} fit, one more is TASK_CAPACITY and writes nothing`, () => {
    const store = createTaskStore();
    store.transaction(() => {
      for (let index = 0; index < maxStoreRecords; index += 1) store.setCooldown(`k${index}`, { until: index, code: "c" });
    });
    expect(store.stats().records).toBe(maxStoreRecords);
    const before = store.stats();
    const error = thrown(() => store.setCooldown("one-more", { until: 0, code: "c" }));
    expect(error.code).toBe("TASK_CAPACITY");
    expect(error.retryable).toBe(false);
    expect(store.getCooldown("one-more")).toBeUndefined();
    expect(store.stats().encodedBytes).toBe(before.encodedBytes);
    // Replacing an existing record does not need a new one.
    store.setCooldown("k0", { until: 1, code: "c" });
    expect(store.getCooldown("k0")!.until).toBe(1);
  });

  test("encoded bytes: exactly 32 MiB fit, one byte more is TASK_CAPACITY", () => {
    const store = createTaskStore();
    const rowText = (code: string) => JSON.stringify({ until: 0, code });
    const chunk = "x".repeat(32 * 1024);
    let index = 0;
    store.transaction(() => {
      while (maxStoreEncodedBytes - store.stats().encodedBytes > 2 * encodedRecordBytes(`b${index}`, rowText(chunk))) {
        store.setCooldown(`b${index}`, { until: 0, code: chunk });
        index += 1;
      }
    });
    const remaining = maxStoreEncodedBytes - store.stats().encodedBytes;
    const key = "last";
    const overhead = encodedRecordBytes(key, rowText(""));
    const exact = "y".repeat(remaining - overhead);
    const error = thrown(() => store.setCooldown(key, { until: 0, code: `${exact}y` }));
    expect(error.code).toBe("TASK_CAPACITY");
    expect(store.stats().encodedBytes).toBe(maxStoreEncodedBytes - remaining);
    store.setCooldown(key, { until: 0, code: exact });
    expect(store.stats().encodedBytes).toBe(maxStoreEncodedBytes);
  });

  test("a lowered bound is enforced at its edge", () => {
    const store = createTaskStore({ maxRecords: 3 });
    const record = taskRecord();
    store.putTask(record, "origin");
    store.appendEvent(taskEvent(record, 2));
    store.appendEvent(taskEvent(record, 3));
    expect(thrown(() => store.appendEvent(taskEvent(record, 4))).code).toBe("TASK_CAPACITY");
    expect(store.eventCount(record.taskId)).toBe(2);
  });
});

describe("TaskStore indexed reads", () => {
  // 1,000 tasks × 15 events + 1,000 task rows = 16,000 records: as close to "16,000 events across
  // 1,000 tasks" as the 16,384-record bound allows (16,000 events would need 17,000 records).
  test("with 15,000 events across 1,000 tasks (16,000 records), reading one task touches only its own rows", () => {
    const eventsPerTask = 15;
    const store = createTaskStore();
    const records: TaskRecord[] = [];
    store.transaction(() => {
      for (let taskIndex = 0; taskIndex < 1000; taskIndex += 1) {
        const record = taskRecord({ taskId: `task-${taskIndex}` });
        records.push(record);
        store.putTask(record, "origin");
        for (let sequence = 1; sequence <= eventsPerTask; sequence += 1) {
          store.appendEvent({ ...taskEvent(record, sequence), eventId: `e-${taskIndex}-${sequence}` });
        }
      }
    });
    expect(store.stats().records).toBe(16_000);
    const target = records[637]!;
    const readsBefore = store.stats().rowReads;
    const snapshot = store.getTask(target.taskId)!;
    const reads = store.stats().rowReads - readsBefore;
    expect(snapshot.events.length).toBe(eventsPerTask);
    expect(snapshot.events.every((event) => event.taskId === target.taskId)).toBe(true);
    // one task row + its own events (no reservation exists, so none is read)
    expect(reads).toBe(1 + eventsPerTask);
    const eventReadsBefore = store.stats().rowReads;
    expect(store.getEvents(target.taskId).length).toBe(eventsPerTask);
    expect(store.stats().rowReads - eventReadsBefore).toBe(eventsPerTask);
    const indexOnlyBefore = store.stats().rowReads;
    expect(store.hasActiveTasks()).toBe(true);
    expect(store.eventCount(target.taskId)).toBe(eventsPerTask);
    expect(store.pendingOutboxCount()).toBe(0);
    expect(store.stats().rowReads).toBe(indexOnlyBefore);
  });
});
