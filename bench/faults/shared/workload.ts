/**
 * The standard workload of a fault row and the drain after it: per task the origin sends it and a
 * message, the worker takes both in and finishes the task, the origin takes the result in. Faults
 * may make any step fail; what is left is finished after the fault heals and both sides drain.
 */
import { tryDrain } from "../../../testkit/drain.ts";
import type { Ledger } from "./ledger.ts";
import type { Rig } from "./rig.ts";

/** Passes the drain may use before it gives up. */
export const DRAIN_ROUNDS = 40;

/** Passes on both parties until nothing is pending locally or at the relay (timers jump past cooldowns). */
export async function drain(rig: Rig, rounds = DRAIN_ROUNDS): Promise<boolean> {
  return (await tryDrain([rig.origin, rig.worker], { timers: rig.timers, rounds })) !== undefined;
}

/**
 * The standard workload: per task, the origin sends it, the worker takes it in, the origin sends a
 * message, the worker takes it in and finishes the task, the origin takes the result in. Faults
 * may make any step fail; what is left is finished after `heal()` and a drain.
 */
export async function workload(rig: Rig, ledger: Ledger, tasks: number, heal: () => void, between?: () => Promise<void>): Promise<boolean> {
  const to = rig.worker.core().endpoint()!;
  const taskIds: string[] = [];
  for (let index = 0; index < tasks; index += 1) {
    const task = await ledger.offerTask(rig, to, `fault workload task ${index}`);
    if (task.taskId !== undefined) taskIds.push(task.taskId);
    await rig.worker.refresh().catch(() => undefined);
    if (task.taskId !== undefined) await ledger.offerMessage(rig, task.taskId, `message for task ${index}`);
    await rig.worker.refresh().catch(() => undefined);
    await between?.();
  }
  const done = new Set<string>();
  const finish = async () => {
    for (const taskId of taskIds) {
      if (done.has(taskId) || rig.worker.core().findTask(taskId) === undefined) continue;
      done.add(taskId);
      await ledger.offerDone(rig, taskId);
      await rig.origin.refresh().catch(() => undefined);
    }
  };
  await finish();
  heal();
  const drained = await drain(rig);
  await finish();
  return (await drain(rig)) && drained;
}
