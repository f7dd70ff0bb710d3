import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import type { TaskEndpoint, TaskRecord } from "../../src/protocol/schemas.ts";
import { createTaskStore, type TaskStore } from "../../src/store/task-store.ts";
import { canonicalEnvelope, endpoint, taskEvent, taskRecord } from "../helpers/fixtures.ts";

const TARGETS: TaskEndpoint[] = [endpoint(), endpoint(), endpoint()];

type Op =
  | { kind: "task"; status: number }
  | { kind: "event"; task: number; sequence: number }
  | { kind: "status"; task: number; status: number }
  | { kind: "retarget"; task: number; target: number }
  | { kind: "outbox"; task: number; target: number }
  | { kind: "accept"; pick: number }
  | { kind: "quarantine"; pick: number }
  | { kind: "attempt"; pick: number }
  | { kind: "discard"; pick: number }
  | { kind: "rotate"; target: number }
  | { kind: "reserve"; task: number; pick: number }
  | { kind: "track"; gap: number }
  | { kind: "ack"; pick: number }
  | { kind: "local"; task: number }
  | { kind: "complete"; pick: number };

const STATUSES = ["active", "completed", "failed", "cancelled", "timed_out"] as const;

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("task" as const), status: fc.nat(4) }),
  fc.record({ kind: fc.constant("event" as const), task: fc.nat(), sequence: fc.integer({ min: 1, max: 40 }) }),
  fc.record({ kind: fc.constant("status" as const), task: fc.nat(), status: fc.nat(4) }),
  fc.record({ kind: fc.constant("retarget" as const), task: fc.nat(), target: fc.nat(2) }),
  fc.record({ kind: fc.constant("outbox" as const), task: fc.nat(), target: fc.nat(2) }),
  fc.record({ kind: fc.constant("accept" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("quarantine" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("attempt" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("discard" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("rotate" as const), target: fc.nat(2) }),
  fc.record({ kind: fc.constant("reserve" as const), task: fc.nat(), pick: fc.nat() }),
  fc.record({ kind: fc.constant("track" as const), gap: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant("ack" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("local" as const), task: fc.nat() }),
  fc.record({ kind: fc.constant("complete" as const), pick: fc.nat() }),
);

const step = fc.record({ ops: fc.array(op, { minLength: 1, maxLength: 5 }), rollback: fc.boolean() });

function pick<T>(items: readonly T[], index: number): T | undefined {
  return items.length === 0 ? undefined : items[index % items.length];
}

/** Applies one op against the store, choosing existing ids from what the store holds. */
function apply(
  store: TaskStore,
  value: Op,
  ids: { tasks: TaskRecord[]; envelopes: string[]; deliveries: { id: string; cursor: bigint }[]; serial: number },
): void {
  const task = "task" in value ? pick(ids.tasks, value.task) : undefined;
  switch (value.kind) {
    case "task": {
      const record = taskRecord({ status: STATUSES[value.status]! });
      store.putTask(record, "origin");
      ids.tasks.push(record);
      return;
    }
    case "event":
      if (task !== undefined) store.appendEvent({ ...taskEvent(task, value.sequence) });
      return;
    case "status":
      if (task !== undefined) store.setStatus(task.taskId, STATUSES[value.status]!);
      return;
    case "retarget":
      if (task !== undefined) store.updateTask(task.taskId, { target: TARGETS[value.target]! });
      return;
    case "outbox": {
      if (task === undefined) return;
      const target = TARGETS[value.target]!;
      const envelope = { ...canonicalEnvelope({ ...taskEvent(task, 2), target }), target };
      store.putOutbox({
        envelopeId: envelope.envelopeId,
        taskId: task.taskId,
        target,
        kind: "canonical_event",
        purpose: "fanout",
        envelopeText: JSON.stringify(envelope),
      });
      ids.envelopes.push(envelope.envelopeId);
      return;
    }
    case "accept": {
      const id = pick(ids.envelopes, value.pick);
      if (id !== undefined && store.getOutbox(id) !== undefined)
        store.markOutboxAccepted(id, { acceptanceId: "a", acceptedAt: 1, duplicate: false });
      return;
    }
    case "quarantine": {
      const id = pick(ids.envelopes, value.pick);
      if (id !== undefined && store.getOutbox(id) !== undefined)
        store.quarantineOutbox(id, { errorCode: "TARGET_NOT_REGISTERED", details: {}, quarantinedAt: 1 });
      return;
    }
    case "attempt": {
      const id = pick(ids.envelopes, value.pick);
      if (id !== undefined && store.getOutbox(id) !== undefined) store.markOutboxAttempted(id);
      return;
    }
    case "discard": {
      const id = pick(ids.envelopes, value.pick);
      if (id !== undefined) store.discardUnsentOperation(id);
      return;
    }
    case "rotate":
      store.rotateRetry(`${TARGETS[value.target]!.relay}\u0000${TARGETS[value.target]!.id}`);
      return;
    case "reserve": {
      const id = pick(ids.envelopes, value.pick);
      if (task !== undefined && id !== undefined) {
        store.reserveOperation(task.taskId, `op-${value.pick % 3}`, () => ({
          logicalId: "l",
          logicalType: "task.completed",
          envelopeIds: [id],
          createdAt: 1,
        }));
      }
      return;
    }
    case "track": {
      const next = BigInt(store.checkpoint().highWater) + BigInt(value.gap);
      ids.serial += 1;
      const envelopeId = `delivery-${ids.serial}`;
      store.trackDelivery({ cursor: next.toString(), envelopeId, envelope: { n: ids.serial }, receivedAt: 1, stage: "tracked", data: {} });
      ids.deliveries.push({ id: envelopeId, cursor: next });
      return;
    }
    case "ack": {
      const delivery = pick(ids.deliveries, value.pick);
      if (delivery !== undefined) store.acknowledgeDelivery(delivery.id);
      return;
    }
    case "local": {
      if (task === undefined) return;
      const event = taskEvent(task, 3, "task.completed", { summary: "done" });
      store.appendEvent(event);
      store.enqueueLocalPresentation(event);
      return;
    }
    case "complete": {
      const local = pick(store.localPresentations(), value.pick);
      if (local !== undefined) store.completeLocalPresentation(local.eventId);
      return;
    }
  }
}

function observable(store: TaskStore) {
  const stats = store.stats();
  return {
    records: stats.records,
    bytes: stats.encodedBytes,
    indexes: store.debugIndexes().actual,
    checkpoint: store.checkpoint(),
    tasks: store.listTasks(),
    heads: store.retryHeads().map((entry) => entry.envelopeId),
  };
}

/** The frontier recomputed naively: the last cursor of the acknowledged run from the start. */
function naiveFrontier(store: TaskStore, tracked: readonly { id: string; cursor: bigint }[]): string {
  let frontier = 0n;
  for (const item of tracked) {
    if (store.getDelivery(item.id) !== undefined) break;
    frontier = item.cursor;
  }
  return frontier.toString();
}

describe("TaskStore property: indexes equal a recomputation from rows", () => {
  test("random operation sequences with random rollbacks", () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 30 }), (steps) => {
        const store = createTaskStore();
        const ids = { tasks: [] as TaskRecord[], envelopes: [] as string[], deliveries: [] as { id: string; cursor: bigint }[], serial: 0 };
        for (const { ops, rollback } of steps) {
          const before = observable(store);
          const idsBefore = { tasks: [...ids.tasks], envelopes: [...ids.envelopes], deliveries: [...ids.deliveries], serial: ids.serial };
          const abort = new Error("rollback");
          try {
            store.transaction(() => {
              for (const value of ops) apply(store, value, ids);
              if (rollback) throw abort;
            });
          } catch (error) {
            if (error !== abort) throw error;
          }
          const { actual, recomputed } = store.debugIndexes();
          expect(actual).toEqual(recomputed);
          if (rollback) {
            expect(observable(store)).toEqual(before);
            Object.assign(ids, idsBefore);
          }
          expect(store.checkpoint().frontier).toBe(naiveFrontier(store, ids.deliveries));
        }
      }),
      { numRuns: 300, seed: 424242 },
    );
  });
});
