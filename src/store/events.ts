/**
 * Events: each task's canonical events (`event`), indexed by task in sequence order so a task's
 * history is read without scanning every event, and the presentation evidence this lifetime
 * recorded per event (`evidence`: inserted, woken, archived, …), which lives and dies with it.
 */
import { TaskError } from "../protocol/errors.ts";
import type { TaskEvent } from "../protocol/schemas.ts";
import { insertSorted, removeSorted, sortedRecord, type TableIndex } from "./index-kit.ts";
import { invariant } from "./invariant.ts";
import type { StoreKernel } from "./kernel.ts";
import type { Bookkeeping, Evidence, TaskStore } from "./store-types.ts";
import type { Tasks } from "./tasks.ts";

interface EventKey {
  readonly sequence: bigint;
  readonly eventId: string;
}

export interface EventIndex {
  eventsByTask: Map<string, EventKey[]>;
}

/** The fields of an event row the index reads. */
interface EventRow {
  readonly eventId: string;
  readonly taskId: string;
  readonly sequence: string;
}

const byEvent = (a: EventKey, b: EventKey) =>
  a.sequence < b.sequence ? -1 : a.sequence > b.sequence ? 1 : a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0;

export const eventIndex: TableIndex<EventIndex, { eventsByTask: Record<string, string[]> }> = {
  empty: () => ({ eventsByTask: new Map() }),
  apply(index, _key, previous, next) {
    const before = previous as EventRow | undefined;
    const after = next as EventRow | undefined;
    if (before !== undefined) {
      const list = index.eventsByTask.get(before.taskId);
      invariant(list !== undefined, "an indexed event's task has an event list");
      removeSorted(list, { sequence: BigInt(before.sequence), eventId: before.eventId }, byEvent, "eventsByTask");
      if (list.length === 0) index.eventsByTask.delete(before.taskId);
    }
    if (after !== undefined) {
      let list = index.eventsByTask.get(after.taskId);
      if (list === undefined) index.eventsByTask.set(after.taskId, (list = []));
      insertSorted(list, { sequence: BigInt(after.sequence), eventId: after.eventId }, byEvent, "eventsByTask");
    }
  },
  snapshot: (index) => ({ eventsByTask: sortedRecord(index.eventsByTask, (list) => list.map((item) => item.eventId)) }),
};

export interface Events {
  readonly api: Pick<TaskStore, "appendEvent" | "getEvent" | "getEvents" | "eventCount" | "getEvidence" | "recordEvidence">;
  /** A task's events in sequence order (a fresh array). */
  eventsOf(taskId: string): TaskEvent[];
  /** The ids of a task's events in sequence order (a copy). */
  idsOf(taskId: string): string[];
  has(eventId: string): boolean;
  count(): number;
  /** Forgets an event and its evidence. */
  discard(eventId: string): void;
}

export function createEvents(kernel: StoreKernel, index: EventIndex, tasks: Pick<Tasks<Bookkeeping>, "has">): Events {
  const { rows } = kernel;

  const eventsOf = (taskId: string) => (index.eventsByTask.get(taskId) ?? []).map((item) => rows.read<TaskEvent>("event", item.eventId)!);

  const api: Events["api"] = {
    appendEvent(event) {
      return rows.transaction(() => {
        // Only its existence: reading the task would parse the row just written.
        if (!tasks.has(event.taskId)) throw new TaskError("UNKNOWN_TASK", { details: { taskId: event.taskId } });
        if (rows.has("event", event.eventId)) return false;
        rows.write("event", event.eventId, event);
        return true;
      });
    },
    getEvent: (eventId) => rows.read<TaskEvent>("event", eventId),
    getEvents: (taskId) => Object.freeze(eventsOf(taskId)),
    eventCount: (taskId) => index.eventsByTask.get(taskId)?.length ?? 0,
    getEvidence: (eventId) => rows.read<Evidence>("evidence", eventId),
    recordEvidence(eventId, patch) {
      return rows.transaction(() => {
        const current = rows.read<Evidence>("evidence", eventId) ?? {};
        rows.write("evidence", eventId, { ...current, ...patch });
        return rows.peek<Evidence>("evidence", eventId)!;
      });
    },
  };

  return {
    api,
    eventsOf,
    idsOf: (taskId) => (index.eventsByTask.get(taskId) ?? []).map((item) => item.eventId),
    has: (eventId) => rows.has("event", eventId),
    count: () => rows.size("event"),
    discard(eventId) {
      rows.remove("event", eventId);
      rows.remove("evidence", eventId);
    },
  };
}
