/**
 * Tasks read whole: a task's record and role with its events in sequence order. It joins the tasks
 * and events parts and owns no rows, so neither part has to know about the other's shape.
 */
import type { Events } from "./events.ts";
import type { Bookkeeping, TaskSnapshot, TaskStore } from "./store-types.ts";
import type { Tasks } from "./tasks.ts";

const byCreation = (a: TaskSnapshot, b: TaskSnapshot) =>
  a.createdAt - b.createdAt || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0);

export function createTaskSnapshots(tasks: Tasks<Bookkeeping>, events: Events): Pick<TaskStore, "getTask" | "listTasks"> {
  function snapshot(taskId: string): TaskSnapshot | undefined {
    const stored = tasks.api.getStoredTask(taskId);
    if (stored === undefined) return undefined;
    return { ...stored.record, role: stored.role, events: Object.freeze(events.eventsOf(taskId)) };
  }

  return {
    getTask: snapshot,
    listTasks: () => [...tasks.ids()].map((taskId) => snapshot(taskId)!).sort(byCreation),
  };
}
