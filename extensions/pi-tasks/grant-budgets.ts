/**
 * Budgets of a grant (src/protocol/grant.ts), at the worker: the turns its model ran and the cost
 * it reported while a granted task was active, and the wall time since the task was created. When
 * one runs out the task ends `failed` with `BUDGET_EXHAUSTED` and what ran out — reported to the
 * origin like any result, once; the worker gate then closes the task's tools. Checked at each turn
 * end and on a timer (`activePollIntervalMs`) for the wall time.
 */
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { activePollIntervalMs } from "../../src/protocol/limits.ts";
import { openWork } from "./work.ts";

export interface GrantBudgets {
  /** What this session's model spent on a granted task so far (a sub-task of it gets what is left). */
  spent(taskId: string): Used | undefined;
  /** A turn ended: it counts against every granted task active now. */
  turnEnded(): void;
  /** A message ended: an assistant message's cost counts against every granted task active now. */
  messageEnded(message: unknown): void;
  start(): void;
  stop(): void;
}

export interface Used {
  turns: number;
  costUsd: number;
}

/** Granted tasks this session works on whose result is not submitted yet. */
function budgeted(core: TaskCore): TaskView[] {
  return openWork(core).filter((task) => task.grant !== undefined);
}

/** What ran out, in words, or undefined. */
export function exhausted(task: TaskView, used: Used, now: number): string | undefined {
  const grant = task.grant!;
  if (grant.maxTurns !== undefined && used.turns >= grant.maxTurns) return `turns: ${used.turns} of ${grant.maxTurns}`;
  if (grant.maxCostUsd !== undefined && used.costUsd >= grant.maxCostUsd)
    return `cost: $${used.costUsd.toFixed(4)} of $${grant.maxCostUsd}`;
  if (grant.maxWallMs !== undefined && now - task.createdAt >= grant.maxWallMs)
    return `time: ${now - task.createdAt} ms of ${grant.maxWallMs} ms`;
  return undefined;
}

export function createGrantBudgets(deps: { readonly core: () => TaskCore | undefined; readonly now: () => number }): GrantBudgets {
  const used = new Map<string, Used>();
  const ended = new Set<string>();
  let timer: ReturnType<typeof setInterval> | undefined;

  const usedBy = (taskId: string) => {
    let entry = used.get(taskId);
    if (entry === undefined) used.set(taskId, (entry = { turns: 0, costUsd: 0 }));
    return entry;
  };

  const check = () => {
    const core = deps.core();
    if (core === undefined) return;
    for (const task of budgeted(core)) {
      if (ended.has(task.taskId)) continue;
      const ran = exhausted(task, usedBy(task.taskId), deps.now());
      if (ran === undefined) continue;
      ended.add(task.taskId);
      const message = `The budget granted for this task ran out (${ran}).`;
      // Reported like any result; a failure to send is retried by the passes (the outbox keeps it).
      core
        .done({ taskId: task.taskId, status: "failed", summary: message, error: { code: "BUDGET_EXHAUSTED", message, retryable: false } })
        .catch(() => undefined);
    }
  };

  return {
    spent: (taskId) => used.get(taskId),
    turnEnded() {
      const core = deps.core();
      if (core === undefined) return;
      for (const task of budgeted(core)) usedBy(task.taskId).turns += 1;
      check();
    },
    messageEnded(message) {
      if (typeof message !== "object" || message === null || (message as { role?: unknown }).role !== "assistant") return;
      const cost = (message as { usage?: { cost?: { total?: unknown } } }).usage?.cost?.total;
      // Not a positive number (NaN included: once added it would keep the cost budget from ever running out).
      if (typeof cost !== "number" || !(cost > 0)) return;
      const core = deps.core();
      if (core === undefined) return;
      for (const task of budgeted(core)) usedBy(task.taskId).costUsd += cost;
    },
    start() {
      timer ??= setInterval(() => {
        try {
          check();
        } catch {
          // A closed core: nothing to end.
        }
      }, activePollIntervalMs);
      timer.unref?.();
    },
    stop() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    },
  };
}
