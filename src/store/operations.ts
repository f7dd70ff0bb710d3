/**
 * Idempotent operations (`operation`): per task and operation key, the reservation that makes a
 * repeated request return what the first one created instead of creating it twice. Its index maps
 * each envelope to the reservation naming it, so withdrawing an unsent envelope withdraws its
 * reservation too.
 */
import { sortedRecord, type TableIndex } from "./index-kit.ts";
import type { StoreKernel } from "./kernel.ts";
import type { Bookkeeping, OperationReservation, TaskStore } from "./store-types.ts";

export interface OperationIndex {
  operationByEnvelope: Map<string, string>;
}

export const operationIndex: TableIndex<OperationIndex, { operationByEnvelope: Record<string, string> }> = {
  empty: () => ({ operationByEnvelope: new Map() }),
  apply(index, key, previous, next) {
    const before = previous as { envelopeIds: readonly string[] } | undefined;
    const after = next as { envelopeIds: readonly string[] } | undefined;
    if (before !== undefined) for (const id of before.envelopeIds) index.operationByEnvelope.delete(id);
    if (after !== undefined) for (const id of after.envelopeIds) index.operationByEnvelope.set(id, key);
  },
  snapshot: (index) => ({ operationByEnvelope: sortedRecord(index.operationByEnvelope, (key) => key) }),
};

function operationKey(taskId: string, operation: string): string {
  return `${taskId}\u0000${operation}`;
}

export interface Operations<B extends Bookkeeping> {
  readonly api: Pick<TaskStore<B>, "reserveOperation" | "getOperation">;
  /** Forgets the reservation naming the envelope, if any. */
  discardByEnvelope(envelopeId: string): void;
  /** Forgets every reservation of a task. */
  discardOfTask(taskId: string): void;
}

export function createOperations<B extends Bookkeeping>(kernel: StoreKernel, index: OperationIndex): Operations<B> {
  type Reservation = OperationReservation<B["operation"]>;
  const { rows } = kernel;
  return {
    api: {
      reserveOperation(taskId, operation, create) {
        return rows.transaction(() => {
          const key = operationKey(taskId, operation);
          const existing = rows.read<Reservation>("operation", key);
          if (existing !== undefined) return { created: false, record: existing };
          rows.write("operation", key, { taskId, operation, ...create() } satisfies Reservation);
          return { created: true, record: rows.peek<Reservation>("operation", key)! };
        });
      },
      getOperation: (taskId, operation) => rows.read<Reservation>("operation", operationKey(taskId, operation)),
    },
    discardByEnvelope(envelopeId) {
      const key = index.operationByEnvelope.get(envelopeId);
      if (key !== undefined) rows.remove("operation", key);
    },
    discardOfTask(taskId) {
      const prefix = operationKey(taskId, "");
      for (const key of [...rows.keys("operation")]) if (key.startsWith(prefix)) rows.remove("operation", key);
    },
  };
}
