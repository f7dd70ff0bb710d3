/**
 * The specialists this Pi keeps warm (issue 39), as last seen: specialists.ts notes each one it
 * starts and, on every sweep, the ones still running (with where the relay has them); a stop forgets
 * one. The workers widget reads it on every pass (`poolWidgetLine`) without reading the spawn
 * records, and names each specialist busy (holding an active task of this session) or idle.
 */
import type { TaskView } from "../../src/core/task-core.ts";
import { sameEndpoint } from "../../src/protocol/endpoint.ts";
import { specialistIdleMs } from "../../src/protocol/limits.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { age } from "./describe.ts";

/** The specialists this Pi keeps warm, by session, with where each was last seen registered. */
export const warmPool = new Map<string, TaskEndpoint | undefined>();

/** Endpoints holding an active task of these (a session's tasks): busy. */
export function busyOf(tasks: readonly TaskView[]): TaskEndpoint[] {
  return tasks.filter((task) => task.role === "origin" && task.status === "active").map((task) => task.target);
}

/** A specialist stopped (by the sweep, `/tasks stop` or `agent_task_stop`): no longer kept warm. */
export function forgetSpecialist(session: string): void {
  warmPool.delete(session);
}

/** The widget's line for the pool: each specialist kept warm, busy or idle; undefined when none. */
export function poolWidgetLine(tasks: readonly TaskView[]): string | undefined {
  if (warmPool.size === 0) return undefined;
  const busy = busyOf(tasks);
  const each = [...warmPool].map(([session, endpoint]) => {
    const working = endpoint !== undefined && busy.some((held) => sameEndpoint(held, endpoint));
    return `${session} ${working ? "busy" : "idle"}`;
  });
  return `kept warm: ${each.join(" · ")} (each stops after ${age(specialistIdleMs)} idle; /tasks stop <session>)`;
}
