/**
 * A result even when the worker's model forgets to report: when this Pi settles idle while it
 * works on an active task it has not reported (`agent_task_done` not called) and is not waiting
 * (for the origin's answer, or for a task it delegated onward), its model is reminded once — one
 * message that starts one turn (`maxDoneReminders`). If it settles again still without a report,
 * the origin gets a non-terminal `task.unreported` event carrying what the model last said, so the
 * origin (its model and person) sees it and decides. Never a fabricated result. Each task is
 * reminded and reported on at most once per Pi run, and only after a run of its model began with
 * the task known (an assignment that arrived during another run waits for its own).
 */
import type { UnreportedReport } from "../../src/core/activity.ts";
import { awaitedAnswers } from "../../src/core/attention.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { maxDoneReminders } from "../../src/protocol/limits.ts";
import type { PiMessage } from "./presenter.ts";
import { openWork } from "./work.ts";

/** The message that reminds the model (shown in the session; the model reads its content). */
export const REMINDER_MESSAGE = "pi-tasks-reminder";

export interface RemindersDeps {
  readonly core: () => TaskCore | undefined;
  sendMessage(message: PiMessage, options: { triggerTurn?: boolean; deliverAs?: "steer" | "followUp" | "nextTurn" }): void;
  /** What the model last said (bounded). */
  lastText(): string;
}

export interface Reminders {
  /** A run starts: the tasks active now are ones its model had the chance to work on. */
  runStarted(): void;
  /** The model asked a question of a task in the run that just ended (its echo may not be back yet). */
  asked(taskId: string): void;
  /** Pi settled: remind, or tell the origin, as the module comment says. */
  settled(): void;
  /** Whether this session waits on something for an active task it works on. */
  waiting(): boolean;
}

function renderReminder(task: TaskView): string {
  return [
    `## pi-tasks reminder: task ${task.taskId} is still active`,
    "You ended your turn without reporting this task. Finish it with agent_task_done",
    `{taskId: "${task.taskId}", status: "completed" | "failed" | "cancelled", summary: "…"} — or, if you need`,
    `something from the origin, ask with agent_task_message {taskId: "${task.taskId}", type: "question", message: "…"}.`,
    "If you end your turn again without either, the origin is told that you stopped without reporting.",
  ].join("\n");
}

/** Reminders count per round of a task: a revision starts a new one. */
function roundKey(task: TaskView): string {
  return `${task.taskId}#${task.revision ?? 0}`;
}

export function createReminders(deps: RemindersDeps): Reminders {
  const reminded = new Map<string, number>();
  const told = new Set<string>();
  const askedInRun = new Set<string>();
  // Tasks known when a run started: an assignment that arrived during a run waits for its own run.
  const worked = new Set<string>();

  /** Waiting for the origin's answer, or for a task delegated onward from this one. */
  const waitsOn = (core: TaskCore, task: TaskView) =>
    askedInRun.has(task.taskId) ||
    awaitedAnswers(task).length > 0 ||
    core.listTasks().some((child) => child.role === "origin" && child.status === "active" && child.lineage?.parentTaskId === task.taskId);

  const tellOrigin = (core: TaskCore, task: TaskView, count: number) => {
    told.add(roundKey(task));
    const report: UnreportedReport = { message: deps.lastText(), reminders: count };
    // Best effort: the task stays active either way, and the origin's person can still ask or cancel.
    core.reportUnreported(task.taskId, report).catch(() => undefined);
  };

  return {
    runStarted() {
      const core = deps.core();
      if (core !== undefined) for (const task of openWork(core)) worked.add(roundKey(task));
    },
    asked: (taskId) => void askedInRun.add(taskId),
    waiting() {
      const core = deps.core();
      return core !== undefined && openWork(core).some((task) => waitsOn(core, task));
    },
    settled() {
      const core = deps.core();
      if (core === undefined) return;
      for (const task of openWork(core)) {
        const round = roundKey(task);
        if (!worked.has(round) || told.has(round) || waitsOn(core, task)) continue;
        const count = reminded.get(round) ?? 0;
        if (count < maxDoneReminders) {
          reminded.set(round, count + 1);
          deps.sendMessage(
            { customType: REMINDER_MESSAGE, content: renderReminder(task), display: true, details: { taskId: task.taskId } },
            { triggerTurn: true, deliverAs: "followUp" },
          );
          continue;
        }
        tellOrigin(core, task, count);
      }
      askedInRun.clear();
    },
  };
}
