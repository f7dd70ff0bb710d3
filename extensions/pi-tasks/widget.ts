/**
 * The live workers widget (the interactive TUI shows it above the editor; RPC clients receive it as
 * a `setWidget` request): one line per active task this session assigned whose worker reports its
 * activity — who, what its model is doing now and for how long, what it used, when it was last
 * heard — then one line naming the specialists kept warm (specialists.ts), each busy or idle.
 * Rewritten in place after each pass; unchanged lines are not sent again; no line when no worker
 * reports and none is kept warm.
 */
import type { TaskView } from "../../src/core/task-core.ts";
import { activityLine } from "./describe.ts";
import { claimedName, oneLine, ownSessionName } from "./quote.ts";
import { shortId } from "./short-ids.ts";
import { poolWidgetLine } from "./pool.ts";

export const WIDGET_KEY = "pi-tasks-workers";

export interface WidgetTarget {
  setWidget?(key: string, lines: string[] | undefined): void;
}

/** The widget's lines for these tasks at `now`, then the pool's (empty when no worker reports and none is kept warm). */
export function workerWidgetLines(tasks: readonly TaskView[], now: number): string[] {
  const pool = poolWidgetLine(tasks);
  return [...activityLines(tasks, now), ...(pool === undefined ? [] : [pool])];
}

function activityLines(tasks: readonly TaskView[], now: number): string[] {
  return tasks
    .filter((task) => task.role === "origin" && task.status === "active" && task.activity !== undefined)
    .map((task) => {
      const peer = task.peer;
      // A paired peer's name is ours; a claimed one is shown as a claim.
      const who =
        peer?.verified !== true
          ? "worker"
          : peer.peerName !== undefined
            ? oneLine(peer.peerName)
            : peer.claimedName !== undefined
              ? peer.self
                ? ownSessionName(peer.claimedName)
                : claimedName(peer.claimedName)
              : "worker";
      return `${who} · task ${shortId(task.taskId)}: ${activityLine(task.activity!, now)}`;
    });
}

export interface WorkerWidget {
  bind(target: WidgetTarget): void;
  show(lines: readonly string[]): void;
}

export function createWorkerWidget(): WorkerWidget {
  let target: WidgetTarget | undefined;
  let last = "";
  return {
    bind(next) {
      target = next;
      last = "";
    },
    show(lines) {
      const text = lines.join("\n");
      if (text === last || target === undefined) return;
      last = text;
      try {
        target.setWidget?.(WIDGET_KEY, lines.length === 0 ? undefined : [...lines]);
      } catch {
        // A stale Pi context throws after reload or replacement; the widget simply stops.
      }
    },
  };
}
