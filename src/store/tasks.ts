/**
 * Tasks: each task's record and this endpoint's role in it (`task`), and what the core keeps per
 * task beside it (`meta`, opaque here). Its index holds the active tasks, so the core's periodic
 * passes walk those instead of every record ever kept.
 */
import { TaskError } from "../protocol/errors.ts";
import type { TableIndex } from "./index-kit.ts";
import type { StoreKernel } from "./kernel.ts";
import type { Bookkeeping, StoredTask, TaskStore } from "./store-types.ts";

export interface TaskIndex {
  activeTasks: Set<string>;
  /** The active tasks this endpoint works on (role `target`), a subset of `activeTasks`. */
  activeWorking: Set<string>;
}

/** The fields of a task row the index reads. */
interface TaskRow {
  readonly record: { readonly status: string };
  readonly role: string;
}

export const taskIndex: TableIndex<TaskIndex, { activeTasks: string[]; activeWorking: string[] }> = {
  empty: () => ({ activeTasks: new Set(), activeWorking: new Set() }),
  apply(index, key, previous, next) {
    const before = previous as TaskRow | undefined;
    const after = next as TaskRow | undefined;
    if (before?.record.status === "active") {
      index.activeTasks.delete(key);
      index.activeWorking.delete(key);
    }
    if (after?.record.status === "active") {
      index.activeTasks.add(key);
      if (after.role === "worker") index.activeWorking.add(key);
    }
  },
  snapshot: (index) => ({ activeTasks: [...index.activeTasks].sort(), activeWorking: [...index.activeWorking].sort() }),
};

export interface Tasks<B extends Bookkeeping> {
  readonly api: Pick<
    TaskStore<B>,
    "putTask" | "getStoredTask" | "setStatus" | "updateTask" | "activeTaskIds" | "hasActiveTasks" | "getTaskMeta" | "setTaskMeta"
  >;
  /** Whether the task exists (without reading its row). */
  has(taskId: string): boolean;
  ids(): IterableIterator<string>;
  count(): number;
  activeCount(): number;
  /** Forgets a task's meta and record. */
  discard(taskId: string): void;
}

export function createTasks<B extends Bookkeeping>(kernel: StoreKernel, index: TaskIndex): Tasks<B> {
  const { rows } = kernel;

  function requireTask(taskId: string): StoredTask {
    const stored = rows.read<StoredTask>("task", taskId);
    if (stored === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId } });
    return stored;
  }

  const api: Tasks<B>["api"] = {
    putTask(record, role) {
      return rows.transaction(() => {
        if (rows.has("task", record.taskId)) return false;
        rows.write("task", record.taskId, { record, role } satisfies StoredTask);
        return true;
      });
    },
    getStoredTask: (taskId) => rows.read<StoredTask>("task", taskId),
    setStatus(taskId, status) {
      rows.transaction(() => {
        const stored = requireTask(taskId);
        if (stored.record.status !== status) rows.write("task", taskId, { ...stored, record: { ...stored.record, status } });
      });
    },
    updateTask(taskId, patch) {
      rows.transaction(() => {
        const stored = requireTask(taskId);
        rows.write("task", taskId, { ...stored, record: { ...stored.record, ...patch } });
      });
    },
    activeTaskIds(role) {
      if (role === "worker") return [...index.activeWorking];
      if (role === "origin") return [...index.activeTasks].filter((taskId) => !index.activeWorking.has(taskId));
      return [...index.activeTasks];
    },
    hasActiveTasks: () => index.activeTasks.size > 0,
    getTaskMeta: (taskId) => rows.read<B["meta"]>("meta", taskId),
    setTaskMeta(taskId, meta) {
      rows.write("meta", taskId, meta);
    },
  };

  return {
    api,
    has: (taskId) => rows.has("task", taskId),
    ids: () => rows.keys("task"),
    count: () => rows.size("task"),
    activeCount: () => index.activeTasks.size,
    discard(taskId) {
      rows.remove("meta", taskId);
      rows.remove("task", taskId);
    },
  };
}
