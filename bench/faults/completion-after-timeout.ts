/**
 * Fault: a result after the timeout. Every task is sent with the minimum timeout; after the worker
 * took it and its message in, the origin's record clock passes the deadline and its pass times
 * the task out. Only then does the worker, not yet aware of it, report each task completed.
 *
 * Proves that a late result settles the outcome without rewriting history: the timeout is shown
 * (outcome unknown, attention indeterminate); the late completion then makes the outcome
 * `succeeded` and clears the attention while the status stays `timed_out`, and the late result is
 * shown to the origin's model once (one insertion, one wake).
 */
import { minTaskTimeoutMs } from "../../src/protocol/limits.ts";
import { account } from "./shared/accounting.ts";
import { createLedger } from "./shared/ledger.ts";
import { delegate } from "./shared/outcomes.ts";
import { closeRig, makeRig } from "./shared/rig.ts";
import type { FaultSpec } from "./shared/scenario.ts";
import { drain } from "./shared/workload.ts";

/** A worker's result that reached the origin after the task timed out (shown once: it settles the outcome). */
function isLateResult(event: { readonly type: string; readonly payload: Record<string, unknown> }): boolean {
  return event.type === "task.late_terminal" && typeof event.payload.intentId === "string";
}

export const completionAfterTimeout: FaultSpec = {
  name: "completion after timeout",
  injection: `every task is sent with the minimum timeout (${minTaskTimeoutMs / 1000} s); after the worker took it and its message in, the origin's record clock passes the deadline and its pass times the task out (\`task.timed_out\`, shown to its model; outcome unknown, attention indeterminate). Only then does the worker — not yet aware of it — report each task completed.`,
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    try {
      const ledger = createLedger();
      const { taskIds, tookIn } = await delegate(rig, ledger, tasks, "finished after its timeout", { timeoutMs: minTaskTimeoutMs });
      rig.clock.jump(minTaskTimeoutMs);
      await rig.origin.refresh().catch(() => undefined);
      const view = (taskId: string) => rig.origin.core().getTask(taskId);
      const insertedOf = (taskId: string, match: (event: { type: string; payload: Record<string, unknown> }) => boolean) =>
        rig.origin.host.inserted.filter((entry) => entry.taskId === taskId && match(entry.event));
      const timedOut = taskIds.filter((taskId) => view(taskId).status === "timed_out").length;
      const indeterminate = taskIds.every(
        (taskId) =>
          view(taskId).outcome === "unknown" &&
          view(taskId).attention === "indeterminate" &&
          insertedOf(taskId, (event) => event.type === "task.timed_out").length === 1,
      );
      const unaware = taskIds.every((taskId) => rig.worker.core().getTask(taskId).status === "active");
      for (const taskId of taskIds) await ledger.offerDone(rig, taskId);
      const drained = await drain(rig);
      for (let pass = 0; pass < 3; pass += 1) await rig.origin.refresh().catch(() => undefined);
      const settled = taskIds.every((taskId) => {
        const current = view(taskId);
        return (
          current.status === "timed_out" &&
          current.outcome === "succeeded" &&
          current.attention === undefined &&
          !current.events.some((event) => event.type === "task.completed")
        );
      });
      const shownOnce = taskIds.every((taskId) => {
        const late = insertedOf(taskId, isLateResult);
        const woken = rig.origin.host.wakes.flat().filter((entry) => entry.taskId === taskId && isLateResult(entry.event));
        return late.length === 1 && late[0]!.event.payload.lateType === "task.completed" && woken.length === 1;
      });
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        timedOut,
        [
          { name: "taken in before the timeout", ok: tookIn },
          { name: "timed out: outcome unknown, attention indeterminate, shown", ok: timedOut === taskIds.length && indeterminate },
          { name: "the worker completed without knowing", ok: unaware },
          { name: "outcome settled, status stays timed_out", ok: settled },
          { name: "late result shown once", ok: shownOnce },
          { name: "drained", ok: drained },
        ],
        `${timedOut} tasks timed out at the origin, then completed: outcome succeeded, status timed_out, the late result shown once`,
      );
    } finally {
      await closeRig(rig);
    }
  },
};
