/**
 * The retry rotation (`rotation`): per target, a stamp of when it was last moved to the back, so
 * retries serve the targets in turn and one busy target cannot starve the others. The stamps come
 * from a counter a rollback undoes; a target's stamp is dropped once nothing is pending to it.
 */
import type { TableIndex } from "./index-kit.ts";
import { sortedRecord } from "./index-kit.ts";
import type { StoreKernel } from "./kernel.ts";
import type { TaskStore } from "./store-types.ts";

export interface RotationIndex {
  rotation: Map<string, number>;
}

export const rotationIndex: TableIndex<RotationIndex, { rotation: Record<string, number> }> = {
  empty: () => ({ rotation: new Map() }),
  apply(index, key, _previous, next) {
    const after = next as { stamp: number } | undefined;
    if (after === undefined) index.rotation.delete(key);
    else index.rotation.set(key, after.stamp);
  },
  snapshot: (index) => ({ rotation: sortedRecord(index.rotation, (stamp) => stamp) }),
};

export interface RetryRotation {
  readonly api: Pick<TaskStore, "rotateRetry">;
  /** When the target was last rotated (0: never, so it comes first). */
  stampOf(targetKey: string): number;
  /** Drops the target's stamp (it has nothing pending). */
  forget(targetKey: string): void;
}

export function createRetryRotation(kernel: StoreKernel, index: RotationIndex): RetryRotation {
  const { rows } = kernel;
  const stamps = kernel.counter();
  return {
    api: {
      rotateRetry(targetKey) {
        rows.transaction(() => {
          const stamp = stamps.next();
          rows.write("rotation", targetKey, { stamp });
        });
      },
    },
    stampOf: (targetKey) => index.rotation.get(targetKey) ?? 0,
    forget(targetKey) {
      if (rows.has("rotation", targetKey)) rows.remove("rotation", targetKey);
    },
  };
}
