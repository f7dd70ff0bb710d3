/**
 * Fault: a zombie worker. The worker's registration is gone (its session disconnects) while its Pi
 * keeps its tasks in RAM; the origin orphans the tasks and reassigns them to a fresh worker
 * (generation 2). Then the old worker comes back — bound again on the same relay state with its
 * lifetime re-homed, as the recovering core does — and reports every task completed with its
 * generation-1 intents before the new worker says anything; then the new worker finishes them.
 *
 * Proves that a reassignment fences the old generation: every late generation-1 completion is
 * refused `STALE_GENERATION` and counted once, never presented to the origin's model nor recorded,
 * and each task's one result comes from the new worker.
 */
import { coreInternals, rehomeCore } from "../../src/core/task-core.ts";
import { eventTypeRow } from "../../src/protocol/events.ts";
import { tryDrain } from "../../testkit/drain.ts";
import { account } from "./shared/accounting.ts";
import { createLedger, type Ledger } from "./shared/ledger.ts";
import { allOrphaned, atCadence, delegate, ORPHAN_BOUND_PASSES, reassignToFresh } from "./shared/outcomes.ts";
import { closeRig, makeRig, type Party, type Rig } from "./shared/rig.ts";
import type { FaultSpec } from "./shared/scenario.ts";
import { DRAIN_ROUNDS } from "./shared/workload.ts";

type RelaySession = ReturnType<typeof coreInternals>["session"];

/** The old worker returns on the same relay state and reports every task completed, before the new worker said anything. */
async function zombieReports(
  rig: Rig,
  zombie: Party,
  session: RelaySession,
  taskIds: readonly string[],
): Promise<{ sent: number; refusedFirst: number }> {
  const back = await session.rebind();
  rehomeCore(zombie.core(), back.endpoint, false);
  const zombieSummary = (taskId: string) => `zombie result ${taskId.slice(0, 8)}`;
  let sent = 0;
  for (const taskId of taskIds) {
    const result = await zombie
      .core()
      .done({ taskId, status: "completed", summary: zombieSummary(taskId) })
      .catch(() => undefined);
    if (result?.terminalDelivery.state === "accepted") sent += 1;
  }
  await rig.origin.refresh().catch(() => undefined);
  const refusedFirst = rig.origin.core().rejections().STALE_GENERATION ?? 0;
  return { sent, refusedFirst };
}

/** The new worker takes the tasks in, then finishes them (the zombie's passes run beside). */
async function newWorkerFinishes(next: Rig, zombie: Party, ledger: Ledger, taskIds: readonly string[]): Promise<boolean> {
  const parties = [next.origin, next.worker, zombie];
  const handedOver = (await tryDrain(parties, { timers: next.timers, rounds: DRAIN_ROUNDS })) !== undefined;
  for (const taskId of taskIds) await ledger.offerDone(next, taskId);
  return handedOver && (await tryDrain(parties, { timers: next.timers, rounds: DRAIN_ROUNDS })) !== undefined;
}

/** What the origin made of the zombie's reports: refusals counted and recorded, anything shown or kept, whose results stand. */
function zombieOutcome(rig: Rig, taskIds: readonly string[]) {
  const stale = rig.origin.core().rejections().STALE_GENERATION ?? 0;
  const recorded = rig.origin.host.rejections.filter((rejection) => rejection.code === "STALE_GENERATION").length;
  const isZombie = (payload: Record<string, unknown>) => typeof payload.summary === "string" && payload.summary.startsWith("zombie result");
  const shown = rig.origin.host.inserted.some((entry) => isZombie(entry.event.payload));
  const kept = taskIds.some((taskId) =>
    rig.origin
      .core()
      .getTask(taskId)
      .events.some((event) => isZombie(event.payload)),
  );
  const fromNew = taskIds.every((taskId) => {
    const view = rig.origin.core().getTask(taskId);
    const terminal = view.events.filter((event) => eventTypeRow(event.type).terminalStatus !== null || event.type === "task.late_terminal");
    return (
      view.status === "completed" &&
      view.generation === 2 &&
      terminal.length === 1 &&
      terminal[0]!.payload.summary === `done ${taskId.slice(0, 8)}`
    );
  });
  return { stale, recorded, shown, kept, fromNew };
}

export const zombieWorker: FaultSpec = {
  name: "zombie worker",
  injection:
    "the worker's registration is gone (its session disconnects) while its Pi keeps its tasks in RAM; the origin orphans the tasks at the active cadence and reassigns them to a fresh worker (generation 2). Then the old worker comes back — bound again on the same relay state (`rebind`) with its lifetime re-homed (`rehomeCore`), as the recovering core does — and reports every task completed with its generation-1 intents before the new worker says anything; then the new worker finishes them.",
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    const extra: Party[] = [];
    try {
      const ledger = createLedger();
      const { taskIds, tookIn } = await delegate(rig, ledger, tasks, "to a worker that comes back");
      const zombie = rig.worker;
      const session = coreInternals(zombie.core()).session;
      await session.disconnect().catch(() => undefined);
      const passes = await atCadence(rig, [rig.origin], allOrphaned(rig, taskIds), 2 * ORPHAN_BOUND_PASSES);
      const { fresh, next, moved } = await reassignToFresh(rig, taskIds, extra);
      const { sent, refusedFirst } = await zombieReports(rig, zombie, session, taskIds);
      const drained = await newWorkerFinishes(next, zombie, ledger, taskIds);
      const { stale, recorded, shown, kept, fromNew } = zombieOutcome(rig, taskIds);
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        stale,
        [
          { name: "taken in before the loss", ok: tookIn },
          { name: "orphaned and reassigned (generation 2)", ok: passes !== undefined && moved === taskIds.length },
          { name: "the old worker's done reached the relay", ok: sent === taskIds.length },
          {
            name: "refused STALE_GENERATION and counted, once per done",
            ok: refusedFirst === taskIds.length && stale === taskIds.length && recorded === taskIds.length,
          },
          { name: "never presented, never recorded", ok: !shown && !kept },
          { name: "the result comes from the new generation", ok: fromNew },
          { name: "drained", ok: drained },
        ],
        `${stale} generation-1 completions refused; every result came from the reassigned worker`,
        [zombie, fresh],
      );
    } finally {
      for (const party of extra) await party.close().catch(() => undefined);
      await closeRig(rig);
    }
  },
};
