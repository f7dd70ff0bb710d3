/**
 * The local presentation queue (`local`): canonical events this endpoint created itself, waiting
 * to be shown in its own session the way a delivered event would be. Each item takes its place in
 * the intake order it shares with relay deliveries, so both are presented in the order they came.
 */
import { TaskError } from "../protocol/errors.ts";
import type { TaskEvent } from "../protocol/schemas.ts";
import type { Events } from "./events.ts";
import { insertSorted, removeSorted, type TableIndex } from "./index-kit.ts";
import type { Counter, StoreKernel } from "./kernel.ts";
import type { LocalPresentation, TaskStore } from "./store-types.ts";

interface OrderKey {
  readonly order: number;
  readonly eventId: string;
}

export interface LocalIndex {
  localQueue: OrderKey[];
}

/** A queued item's row; the event itself is the events part's. */
interface LocalRow {
  readonly order: number;
  readonly taskId: string;
}

const byOrder = (a: OrderKey, b: OrderKey) => a.order - b.order;

export const localIndex: TableIndex<LocalIndex, { localQueue: string[] }> = {
  empty: () => ({ localQueue: [] }),
  apply(index, key, previous, next) {
    const before = previous as LocalRow | undefined;
    const after = next as LocalRow | undefined;
    if (before !== undefined) removeSorted(index.localQueue, { order: before.order, eventId: key }, byOrder, "localQueue");
    if (after !== undefined) insertSorted(index.localQueue, { order: after.order, eventId: key }, byOrder, "localQueue");
  },
  snapshot: (index) => ({ localQueue: index.localQueue.map((item) => item.eventId) }),
};

export interface LocalPresentations {
  readonly api: Pick<TaskStore, "enqueueLocalPresentation" | "localPresentations" | "completeLocalPresentation">;
  count(): number;
}

/** `intake` is the order shared with relay deliveries. */
export function createLocalPresentations(
  kernel: StoreKernel,
  index: LocalIndex,
  events: Pick<Events, "has" | "api">,
  intake: Counter,
): LocalPresentations {
  const { rows } = kernel;

  const presentation = (eventId: string, row: LocalRow): LocalPresentation => ({
    eventId,
    taskId: row.taskId,
    order: row.order,
    event: events.api.getEvent(eventId)!,
  });

  return {
    api: {
      enqueueLocalPresentation(event: TaskEvent) {
        return rows.transaction(() => {
          if (!rows.has("local", event.eventId)) {
            if (!events.has(event.eventId))
              throw new TaskError("INVALID_EVENT", {
                message: `event ${event.eventId} is not stored`,
                details: { eventId: event.eventId },
              });
            rows.write("local", event.eventId, { order: intake.next(), taskId: event.taskId } satisfies LocalRow);
          }
          return presentation(event.eventId, rows.peek<LocalRow>("local", event.eventId)!);
        });
      },
      localPresentations: () => index.localQueue.map((item) => presentation(item.eventId, rows.read<LocalRow>("local", item.eventId)!)),
      completeLocalPresentation: (eventId) => rows.remove("local", eventId),
    },
    count: () => index.localQueue.length,
  };
}
