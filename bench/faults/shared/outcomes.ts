/**
 * Shared steps of the outcome rows: a lost worker, a worker that returns after reassignment, a
 * result that arrives after the timeout. Passes at the active cadence on simulated time, the
 * delegation these rows start with, and the checks of orphaning and reassignment.
 */
import { activePollIntervalMs, orphanAfterMs, orphanProbeIntervalMs } from "../../../src/protocol/limits.ts";
import { eventTypeRow } from "../../../src/protocol/events.ts";
import type { TaskEndpoint } from "../../../src/protocol/schemas.ts";
import type { Ledger } from "./ledger.ts";
import { introduceParties, type Party, plainParty, type Rig } from "./rig.ts";
import { drain } from "./workload.ts";

/** The bound on orphan detection, in passes at the active cadence (simulated time). */
export const ORPHAN_BOUND_PASSES = (orphanAfterMs + orphanProbeIntervalMs) / activePollIntervalMs;

/** Passes at the active cadence (timers and record clock move together) until `done()`; the passes used, or undefined. */
export async function atCadence(rig: Rig, parties: readonly Party[], done: () => boolean, limit: number): Promise<number | undefined> {
  for (let passes = 1; passes <= limit; passes += 1) {
    rig.timers.jump(activePollIntervalMs);
    rig.clock.jump(activePollIntervalMs);
    for (const party of parties) await party.refresh().catch(() => undefined);
    if (done()) return passes;
  }
  return undefined;
}

/** The start of these rows: tasks with one message each, taken in by the worker's model. */
export async function delegate(
  rig: Rig,
  ledger: Ledger,
  tasks: number,
  label: string,
  extra: Record<string, unknown> = {},
): Promise<{ taskIds: string[]; tookIn: boolean }> {
  const to = rig.worker.core().endpoint()!;
  const taskIds: string[] = [];
  for (let index = 0; index < tasks; index += 1) {
    const task = await ledger.offerTask(rig, to, `${label} ${index}`, extra);
    if (task.taskId === undefined) continue;
    taskIds.push(task.taskId);
    await ledger.offerMessage(rig, task.taskId, `message: ${label} ${index}`);
  }
  const drained = await drain(rig);
  const tookIn = ledger.items.every(
    (item) => item.kind === "done" || (item.eventId !== undefined && rig.worker.host.insertedIds().includes(item.eventId)),
  );
  return { taskIds, tookIn: drained && tookIn };
}

/**
 * Origin passes at the active cadence until the origin has just probed its worker (a successful
 * `resolve`): the registration dropped right after is the worst case for the orphan bound.
 */
export async function justProbed(rig: Rig): Promise<boolean> {
  const probes = () => rig.origin.replies.filter((entry) => entry.operation === "resolve" && entry.reply?.ok === true).length;
  const before = probes();
  return (await atCadence(rig, [rig.origin], () => probes() > before, ORPHAN_BOUND_PASSES)) !== undefined;
}

export const allOrphaned = (rig: Rig, taskIds: readonly string[]) => () =>
  taskIds.every((taskId) => rig.origin.core().findTask(taskId)?.attention === "orphaned");

/** Each task's orphan record: one event, inserted once, woken once. */
export function orphanToldOnce(rig: Rig, taskIds: readonly string[]): boolean {
  return taskIds.every((taskId) => {
    const events = rig.origin
      .core()
      .getTask(taskId)
      .events.filter((event) => event.type === "task.orphaned");
    const inserted = rig.origin.host.inserted.filter((entry) => entry.taskId === taskId && entry.event.type === "task.orphaned");
    const woken = rig.origin.host.wakes.flat().filter((entry) => entry.taskId === taskId && entry.event.type === "task.orphaned");
    return events.length === 1 && inserted.length === 1 && woken.length === 1;
  });
}

/** Moves every task to `to`; how many moved. */
async function reassignAll(rig: Rig, taskIds: readonly string[], to: TaskEndpoint): Promise<number> {
  let moved = 0;
  for (const taskId of taskIds) {
    if (
      await rig.origin
        .core()
        .reassignTask(taskId, { to })
        .then(
          () => true,
          () => false,
        )
    )
      moved += 1;
  }
  return moved;
}

/**
 * A fresh worker lifetime, proven to the origin, takes every task over (`reassignTask`): the fresh
 * worker (added to `extra`, which the caller closes), the rig with it as the worker, and how many
 * tasks moved.
 */
export async function reassignToFresh(
  rig: Rig,
  taskIds: readonly string[],
  extra: Party[],
): Promise<{ fresh: Party; next: Rig; moved: number }> {
  const fresh = await plainParty("worker", rig.proxy.url, rig.timers, rig.clock);
  extra.push(fresh);
  await introduceParties(rig.origin, fresh);
  const next: Rig = { ...rig, worker: fresh };
  const moved = await reassignAll(rig, taskIds, fresh.core().endpoint()!);
  return { fresh, next, moved };
}

/** The new worker holds each task under generation 2 with every event the origin forwards. */
export function carriedHistory(rig: Rig, worker: Party, taskIds: readonly string[]): boolean {
  return taskIds.every((taskId) => {
    const origin = rig.origin.core().getTask(taskId);
    const held = worker.core().findTask(taskId);
    if (held === undefined || origin.generation !== 2 || held.generation !== 2) return false;
    const ids = new Set(held.events.map((event) => event.eventId));
    return origin.events.filter((event) => !eventTypeRow(event.type).originLocal).every((event) => ids.has(event.eventId));
  });
}
