/**
 * An in-memory PresentationHost (a Pi stand-in for TaskCores in tests and bench): records what was
 * inserted, woken and archived, and can be made busy (not presentable), refuse insertions or wakes.
 */
import type { PresentationHost, PresentationItem, RejectionRecord } from "../src/core/host.ts";

export interface MemoryHost extends PresentationHost {
  busy: boolean;
  refuseInsert: boolean;
  refuseWake: boolean;
  readonly inserted: PresentationItem[];
  readonly wakes: PresentationItem[][];
  readonly archived: PresentationItem[];
  readonly rejections: RejectionRecord[];
  /** Event ids inserted, in order. */
  insertedIds(): string[];
}

export function createMemoryHost(): MemoryHost {
  const host: MemoryHost = {
    busy: false,
    refuseInsert: false,
    refuseWake: false,
    inserted: [],
    wakes: [],
    archived: [],
    rejections: [],
    canPresent: () => !host.busy,
    insert(item) {
      if (host.refuseInsert) return false;
      host.inserted.push(item);
      return true;
    },
    wake(items) {
      if (host.refuseWake) return false;
      host.wakes.push([...items]);
      return true;
    },
    archive(item) {
      host.archived.push(item);
    },
    recordRejection(record) {
      host.rejections.push(record);
    },
    insertedIds: () => host.inserted.map((item) => item.eventId),
  };
  return host;
}
