/**
 * Fault: the worker's Pi is busy. Its host reports not presentable for a minute of simulated time
 * (five seconds in quick mode): worker passes at the 1 s active cadence with the jump timers moved
 * a second per pass, while the origin keeps sending; then the host is idle again and both drain.
 *
 * Proves that a busy model is never interrupted and never loses mail: nothing is inserted while
 * busy, yet every assignment is recorded by the worker's core meanwhile, and everything is
 * presented once the host is idle.
 */
import { activePollIntervalMs } from "../../src/protocol/limits.ts";
import { account } from "./shared/accounting.ts";
import { createLedger } from "./shared/ledger.ts";
import { closeRig, makeRig } from "./shared/rig.ts";
import type { FaultSpec } from "./shared/scenario.ts";
import { drain } from "./shared/workload.ts";

/** The busy worker's minute, as passes at the active cadence. */
export const BUSY_MS = 60_000;
export const QUICK_BUSY_MS = 5_000;

export function workerBusy(busyMs: number): FaultSpec {
  const passes = Math.round(busyMs / activePollIntervalMs);
  return {
    name: `worker busy for ${busyMs / 1000} s`,
    injection: `the worker's host reports not presentable (Pi busy) for ${busyMs / 1000} s of simulated time: ${passes} worker passes at the 1 s active cadence with the jump timers advanced 1 s per pass (no real waiting), while the origin keeps sending; then the host is idle again and both sides drain.`,
    async run({ relay, tasks }) {
      const rig = await makeRig(relay);
      try {
        const ledger = createLedger();
        const to = rig.worker.core().endpoint()!;
        rig.worker.host.busy = true;
        const before = rig.proxy.stats().total.seen;
        const every = Math.max(1, Math.floor(passes / tasks));
        const offered: string[] = [];
        for (let pass = 0; pass < passes; pass += 1) {
          if (pass % every === 0 && offered.length < tasks) {
            const task = await ledger.offerTask(rig, to, `while the worker is busy ${offered.length}`);
            if (task.taskId !== undefined) {
              offered.push(task.taskId);
              await ledger.offerMessage(rig, task.taskId, `message while busy ${offered.length}`);
            }
          }
          await rig.worker.refresh().catch(() => undefined);
          rig.timers.jump(activePollIntervalMs);
        }
        const duringBusy = rig.proxy.stats().total.seen - before;
        const insertedWhileBusy = rig.worker.host.inserted.length;
        const recorded = offered.filter((taskId) => rig.worker.core().findTask(taskId) !== undefined).length;
        rig.worker.host.busy = false;
        await rig.worker.refresh().catch(() => undefined);
        for (const taskId of offered) {
          await ledger.offerDone(rig, taskId);
        }
        const drained = await drain(rig);
        return account(
          this.name,
          this.injection,
          rig,
          ledger,
          rig.proxy.stats().total.seen,
          passes,
          [
            { name: "nothing inserted while busy", ok: insertedWhileBusy === 0 },
            { name: "assignments recorded while busy", ok: recorded === offered.length },
            { name: "drained", ok: drained },
          ],
          `${duringBusy} requests during the busy period (${passes} passes)`,
        );
      } finally {
        await closeRig(rig);
      }
    },
  };
}
