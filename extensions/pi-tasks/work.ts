/**
 * The tasks this session works on (the worker side) that are still active and whose result it has
 * not submitted: what reminders, grants and budgets act on.
 */
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";

export function openWork(core: TaskCore): TaskView[] {
  return core
    .activeTaskIds()
    .map((taskId) => core.findTask(taskId))
    .filter((task): task is TaskView => task?.role === "worker" && task.terminalDelivery.state === "not_submitted");
}
