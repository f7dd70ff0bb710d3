/**
 * The inbox: relay deliveries this endpoint tracks until it acknowledges them (`delivery`), and
 * what the relay delivered for each (`inbound`). Its index keeps them in cursor order, so the ACK
 * frontier — every cursor at or below it acknowledged — is the cursor tracked just before the
 * oldest pending one. Each delivery takes its place in the intake order it shares with local
 * presentations.
 */
import { TaskError } from "../protocol/errors.ts";
import { type AckCheckpoint, assertCursor } from "./ack-checkpoint.ts";
import { insertSorted, removeSorted, type TableIndex } from "./index-kit.ts";
import { invariant } from "./invariant.ts";
import type { Counter, StoreKernel } from "./kernel.ts";
import type { StoreRows } from "./tables.ts";
import type { Bookkeeping, Checkpoint, DeliveryRow, TaskStore, TrackResult } from "./store-types.ts";

interface CursorKey {
  readonly cursor: bigint;
  readonly envelopeId: string;
}

export interface DeliveryIndex {
  deliveriesByCursor: CursorKey[];
}

const byCursor = (a: CursorKey, b: CursorKey) => (a.cursor < b.cursor ? -1 : a.cursor > b.cursor ? 1 : 0);

export const deliveryIndex: TableIndex<DeliveryIndex, { deliveriesByCursor: string[] }> = {
  empty: () => ({ deliveriesByCursor: [] }),
  apply(index, key, previous, next) {
    const before = previous as { cursor: string } | undefined;
    const after = next as { cursor: string } | undefined;
    if (before !== undefined)
      removeSorted(index.deliveriesByCursor, { cursor: BigInt(before.cursor), envelopeId: key }, byCursor, "deliveriesByCursor");
    if (after !== undefined)
      insertSorted(index.deliveriesByCursor, { cursor: BigInt(after.cursor), envelopeId: key }, byCursor, "deliveriesByCursor");
  },
  snapshot: (index) => ({ deliveriesByCursor: index.deliveriesByCursor.map((item) => item.envelopeId) }),
};

type NewDelivery<B extends Bookkeeping> = Parameters<TaskStore<B>["trackDelivery"]>[0];

/** Tracks a delivery once; the same envelope again is a duplicate, a cursor not past the high water is refused. */
function track<B extends Bookkeeping>(rows: StoreRows, checkpoint: AckCheckpoint, intake: Counter, delivery: NewDelivery<B>): TrackResult {
  const cursor = assertCursor(delivery.cursor);
  const highWater = checkpoint.highWater();
  if (rows.has("delivery", delivery.envelopeId)) {
    // The same envelope again: never a second delivery. Move past a higher cursor.
    if (cursor > BigInt(highWater)) checkpoint.raise(delivery.cursor);
    return "duplicate";
  }
  if (cursor <= BigInt(highWater)) {
    throw new TaskError("INVALID_CURSOR", {
      message: `cursor ${delivery.cursor} is not after the highest tracked cursor ${highWater}`,
      details: { cursor: delivery.cursor, highWater, envelopeId: delivery.envelopeId },
    });
  }
  rows.write("inbound", delivery.envelopeId, delivery.envelope);
  rows.write("delivery", delivery.envelopeId, {
    envelopeId: delivery.envelopeId,
    cursor: delivery.cursor,
    prevCursor: highWater,
    receivedAt: delivery.receivedAt,
    order: intake.next(),
    stage: delivery.stage,
    ackRequested: false,
    data: delivery.data,
  } satisfies DeliveryRow<B["stage"], B["data"]>);
  checkpoint.raise(delivery.cursor);
  return "tracked";
}

function checkpointOf(rows: StoreRows, index: DeliveryIndex, checkpoint: AckCheckpoint): Checkpoint {
  const highWater = checkpoint.highWater();
  const oldest = index.deliveriesByCursor[0];
  if (oldest === undefined) return { frontier: highWater, highWater };
  const frontier = rows.peek<DeliveryRow>("delivery", oldest.envelopeId)!.prevCursor;
  invariant(BigInt(frontier) < oldest.cursor, "the ACK frontier stays below the oldest unacknowledged delivery", {
    frontier,
    oldest: String(oldest.cursor),
  });
  return { frontier, highWater };
}

type InboxApi<B extends Bookkeeping> = Pick<
  TaskStore<B>,
  | "trackDelivery"
  | "getDelivery"
  | "deliveryEnvelope"
  | "deliveries"
  | "updateDelivery"
  | "acknowledgeDelivery"
  | "resetInbox"
  | "pendingDeliveryCount"
  | "checkpoint"
>;

/** `intake` is the order shared with local presentations. */
export function createInbox<B extends Bookkeeping>(
  kernel: StoreKernel,
  index: DeliveryIndex,
  checkpoint: AckCheckpoint,
  intake: Counter,
): InboxApi<B> {
  type Delivery = DeliveryRow<B["stage"], B["data"]>;
  const { rows } = kernel;
  return {
    trackDelivery: (delivery) => rows.transaction(() => track<B>(rows, checkpoint, intake, delivery)),
    getDelivery: (envelopeId) => rows.read<Delivery>("delivery", envelopeId),
    deliveryEnvelope: (envelopeId) => rows.read<unknown>("inbound", envelopeId),
    deliveries: () => index.deliveriesByCursor.map((item) => rows.read<Delivery>("delivery", item.envelopeId)!),
    updateDelivery(envelopeId, patch) {
      return rows.transaction(() => {
        const row = rows.read<Delivery>("delivery", envelopeId);
        if (row === undefined)
          throw new TaskError("INVALID_DELIVERY", { message: `no tracked delivery ${envelopeId}`, details: { envelopeId } });
        rows.write("delivery", envelopeId, {
          ...row,
          ...(patch.stage === undefined ? {} : { stage: patch.stage }),
          ...(patch.ackRequested === undefined ? {} : { ackRequested: patch.ackRequested }),
          ...(patch.data === undefined ? {} : { data: patch.data }),
        });
        return rows.peek<Delivery>("delivery", envelopeId)!;
      });
    },
    acknowledgeDelivery(envelopeId) {
      return rows.transaction(() => {
        const removed = rows.remove("delivery", envelopeId);
        if (removed) rows.remove("inbound", envelopeId);
        return removed;
      });
    },
    resetInbox() {
      rows.transaction(() => {
        for (const envelopeId of [...rows.keys("delivery")]) {
          rows.remove("delivery", envelopeId);
          rows.remove("inbound", envelopeId);
        }
        checkpoint.reset();
      });
    },
    pendingDeliveryCount: () => index.deliveriesByCursor.length,
    checkpoint: () => checkpointOf(rows, index, checkpoint),
  };
}
