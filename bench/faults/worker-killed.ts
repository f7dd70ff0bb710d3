/**
 * Fault: the worker's Pi dies mid-task. After each task and its message reached the worker's
 * model, the worker's lifetime is closed and the relay drops its registration; the origin runs
 * passes at the active cadence on simulated time, then reassigns every task to a fresh worker.
 *
 * Proves the orphan bound and a clean hand-over: each task is `orphaned` within orphanAfterMs +
 * orphanProbeIntervalMs and shown once (one record, one wake); reassigned, the fresh worker holds
 * it under generation 2 with its history, completes it, and the origin's acknowledgement clears
 * its attention.
 */
import { activePollIntervalMs, orphanAfterMs, orphanProbeIntervalMs } from "../../src/protocol/limits.ts";
import { coreInternals } from "../../src/core/task-core.ts";
import { account } from "./shared/accounting.ts";
import { createLedger } from "./shared/ledger.ts";
import {
  allOrphaned,
  atCadence,
  carriedHistory,
  delegate,
  justProbed,
  ORPHAN_BOUND_PASSES,
  orphanToldOnce,
  reassignToFresh,
} from "./shared/outcomes.ts";
import { closeRig, makeRig, type Party } from "./shared/rig.ts";
import type { FaultSpec } from "./shared/scenario.ts";
import { drain } from "./shared/workload.ts";

export const workerKilled: FaultSpec = {
  name: "worker killed mid-task",
  injection: `after each task and its message reached the worker's model, the worker's Pi dies: its lifetime is closed and the relay drops its registration (a disconnect; a crash drops it at lease expiry, and the bound counts from then). The origin runs passes at the ${activePollIntervalMs / 1000} s active cadence (jump timers and record clock) until each task is \`orphaned\` — required within orphanAfterMs + orphanProbeIntervalMs = ${(orphanAfterMs + orphanProbeIntervalMs) / 1000} s of simulated time (${ORPHAN_BOUND_PASSES} passes) — and shown once; then it reassigns every task (\`reassignTask(taskId, {to})\`) to a fresh worker lifetime, which receives the history, finishes each task, and the origin acknowledges them.`,
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    const extra: Party[] = [];
    try {
      const ledger = createLedger();
      const { taskIds, tookIn } = await delegate(rig, ledger, tasks, "to a worker that dies");
      const probed = await justProbed(rig);
      await coreInternals(rig.worker.core())
        .session.disconnect()
        .catch(() => undefined);
      await rig.worker.close();
      const passes = await atCadence(rig, [rig.origin], allOrphaned(rig, taskIds), 2 * ORPHAN_BOUND_PASSES);
      const orphaned = taskIds.filter((taskId) => rig.origin.core().getTask(taskId).attention === "orphaned").length;
      // The pass after presents the last records; later passes must not repeat them.
      for (let pass = 0; pass < 3; pass += 1) {
        rig.timers.jump(orphanProbeIntervalMs);
        await rig.origin.refresh().catch(() => undefined);
      }
      const toldOnce = orphanToldOnce(rig, taskIds);

      const { fresh, next, moved } = await reassignToFresh(rig, taskIds, extra);
      const handedOver = await drain(next);
      const carried = carriedHistory(rig, fresh, taskIds);
      for (const taskId of taskIds) await ledger.offerDone(next, taskId);
      const finished = await drain(next);
      for (const taskId of taskIds)
        await rig.origin
          .core()
          .acknowledge({ taskId })
          .catch(() => undefined);
      const acknowledgedDrained = await drain(next);
      const completed = taskIds.every((taskId) => {
        const view = rig.origin.core().getTask(taskId);
        return view.status === "completed" && view.outcome === "succeeded" && view.attention === undefined;
      });
      const acknowledged = taskIds.every((taskId) =>
        fresh
          .core()
          .getTask(taskId)
          .events.some((event) => event.type === "task.parent_acknowledged"),
      );
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        orphaned,
        [
          { name: "taken in before the death", ok: tookIn && probed },
          { name: "orphaned within orphanAfterMs + orphanProbeIntervalMs", ok: passes !== undefined && passes <= ORPHAN_BOUND_PASSES },
          { name: "orphan shown once per task (one record, one wake)", ok: toldOnce },
          { name: "reassigned under generation 2 with its history", ok: moved === taskIds.length && carried },
          { name: "completed by the new worker, attention cleared", ok: completed },
          { name: "acknowledged", ok: acknowledged },
          { name: "drained", ok: handedOver && finished && acknowledgedDrained },
        ],
        `${orphaned} tasks orphaned after ${passes ?? "more than " + 2 * ORPHAN_BOUND_PASSES} passes (${((passes ?? 0) * activePollIntervalMs) / 1000} s simulated), reassigned and completed by a fresh worker`,
        [rig.worker, fresh],
      );
    } finally {
      for (const party of extra) await party.close().catch(() => undefined);
      await closeRig(rig);
    }
  },
};
