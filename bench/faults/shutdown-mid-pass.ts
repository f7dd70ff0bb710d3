/**
 * Fault: a lifetime shuts down mid-pass. First the worker's lifetime is closed while its pass
 * waits on a receive held at the proxy; its tasks (minimum timeout) time out at the origin once
 * the record clock passes their deadline. Then the origin's lifetime is closed while its send of
 * a new task to a fresh worker is delayed at the proxy (the send reaches the relay after the
 * close). Fresh lifetimes then run the rest of the workload.
 *
 * Proves that a shutdown ends cleanly and loses nothing silently: closed stores hold nothing, no
 * promise rejects unhandled, the closed worker's tasks are reported to the origin's model
 * (`task.timed_out`), the late send is either shown once at the fresh worker or failed to its
 * caller, and fresh lifetimes carry on and drain.
 */
import { coreInternals } from "../../src/core/task-core.ts";
import { minTaskTimeoutMs } from "../../src/protocol/limits.ts";
import type { RuleHandle } from "../../testkit/fault-proxy.ts";
import { account, type FaultRow, presentedItem } from "./shared/accounting.ts";
import { createLedger, type Item, type Ledger } from "./shared/ledger.ts";
import { closeRig, introduceParties, makeRig, type Party, plainParty, REQUEST_TIMEOUT_MS, type Rig } from "./shared/rig.ts";
import { type FaultSpec, fromEndpoint } from "./shared/scenario.ts";
import { workload } from "./shared/workload.ts";

/** 1. The worker shuts down mid-pass: its tasks time out at the origin, reported to its model. */
async function closeWorkerMidPass(rig: Rig, ledger: Ledger, first: number): Promise<{ held: RuleHandle; workerCleared: boolean }> {
  const worker = rig.worker.core().endpoint()!;
  for (let index = 0; index < first; index += 1)
    await ledger.offerTask(rig, worker, `to a worker that shuts down ${index}`, { timeoutMs: minTaskTimeoutMs });
  const held = rig.proxy.push({ operation: "receive", kind: "hold", when: fromEndpoint(worker) });
  const pass = rig.worker.refresh().catch(() => undefined);
  await rig.proxy.waitFor((stats) => stats.held === 1);
  await rig.worker.close();
  await pass;
  rig.proxy.release();
  const workerCleared = coreInternals(rig.worker.core()).store.stats().records === 0;
  rig.clock.jump(minTaskTimeoutMs);
  await rig.origin.refresh().catch(() => undefined);
  for (const item of ledger.items) {
    const timedOut = rig.origin.host.inserted.some((entry) => entry.taskId === item.taskId && entry.event.type === "task.timed_out");
    if (timedOut && !presentedItem(rig, item)) item.reported = "task.timed_out";
  }
  return { held, workerCleared };
}

interface LateSend {
  readonly freshWorker: Party;
  readonly delayed: RuleHandle;
  readonly lateItem: Item;
  readonly originCleared: boolean;
}

/** 2. The origin shuts down while a send is in flight (delayed at the proxy). */
async function closeOriginMidSend(rig: Rig, extra: Party[]): Promise<LateSend> {
  const freshWorker = await plainParty("worker", rig.proxy.url, rig.timers, rig.clock);
  extra.push(freshWorker);
  // Proven first, so the delayed send is the assignment itself (not a hello).
  await introduceParties(rig.origin, freshWorker);
  const delayed = rig.proxy.push({
    operation: "send",
    kind: "delay",
    ms: REQUEST_TIMEOUT_MS / 2,
    when: fromEndpoint(rig.origin.core().endpoint()!),
  });
  const lateLedger = createLedger();
  const late = lateLedger.offerTask(rig, freshWorker.core().endpoint()!, "sent while the origin shuts down");
  await rig.proxy.waitFor((stats) => (stats.operations.send?.faulted ?? 0) >= 1);
  await rig.origin.close();
  const lateItem = await late;
  await Bun.sleep(REQUEST_TIMEOUT_MS);
  const originCleared = coreInternals(rig.origin.core()).store.stats().records === 0;
  return { freshWorker, delayed, lateItem, originCleared };
}

/** 3. Fresh lifetimes carry on (the fresh worker also takes in the late assignment). */
async function carryOnFresh(
  rig: Rig,
  freshWorker: Party,
  extra: Party[],
  tasks: number,
): Promise<{ fresh: Rig; second: Ledger; drained: boolean }> {
  const freshOrigin = await plainParty("origin", rig.proxy.url, rig.timers, rig.clock);
  extra.push(freshOrigin);
  await introduceParties(freshOrigin, freshWorker);
  const fresh: Rig = { ...rig, origin: freshOrigin, worker: freshWorker };
  const second = createLedger();
  const drained = await workload(fresh, second, tasks, () => undefined);
  return { fresh, second, drained };
}

/** The row of the three phases: the two lifetimes' rows and the late send, summed. */
function shutdownRow(
  spec: FaultSpec,
  rig: Rig,
  rows: { readonly firstRow: FaultRow; readonly secondRow: FaultRow },
  late: LateSend,
  held: RuleHandle,
  checks: FaultRow["checks"],
): FaultRow {
  const { firstRow, secondRow } = rows;
  const { freshWorker, delayed, lateItem } = late;
  // The late task: inserted at the fresh worker, or its caller was told (the call failed).
  const lateInserted = lateItem.eventId !== undefined && freshWorker.host.insertedIds().includes(lateItem.eventId);
  const lateReported = !lateInserted && !lateItem.refused;
  const offered = firstRow.offered + secondRow.offered + 1;
  const presented = firstRow.presented + secondRow.presented + (lateInserted ? 1 : 0);
  const reported = firstRow.reported + secondRow.reported + (lateReported ? 1 : 0);
  const refused = firstRow.refused + secondRow.refused + (lateItem.refused ? 1 : 0);
  const duplicated = firstRow.duplicated + secondRow.duplicated;
  const lost = offered - presented - reported - refused;
  return {
    fault: spec.name,
    injection: spec.injection,
    offered,
    accepted: firstRow.accepted + secondRow.accepted + (lateInserted ? 1 : 0),
    presented,
    duplicated,
    reported,
    lostToRelayReset: 0,
    endedWithLifetime: reported,
    refused,
    lost,
    requests: rig.proxy.stats().total.seen,
    faulted: held.hits() + delayed.hits(),
    checks,
    note: `${firstRow.reported} tasks of the closed worker reported to the origin as task.timed_out; the late send ${lateInserted ? "reached the relay after the origin closed and was inserted at the fresh worker once" : lateItem.refused ? "failed and created nothing" : "failed (its caller was told)"}`,
    ok: lost === 0 && duplicated === 0 && held.hits() > 0 && delayed.hits() > 0 && checks.every((check) => check.ok),
  };
}

export const shutdownMidPass: FaultSpec = {
  name: "shutdown mid-pass",
  injection:
    "the worker's lifetime is closed while its pass waits on a receive held at the proxy; its tasks (minimum timeout) are timed out by the origin once the record clock passes their deadline (`task.timed_out` presented to the origin's model). Then the origin's lifetime is closed while its send of a new task to a fresh worker is delayed at the proxy (the send reaches the relay after the close). Fresh lifetimes then run the rest of the workload.",
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    const extra: Party[] = [];
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", listener);
    try {
      const ledger = createLedger();
      const first = Math.max(1, Math.floor(tasks / 2));
      const { held, workerCleared } = await closeWorkerMidPass(rig, ledger, first);
      const firstRow = account(this.name, this.injection, rig, ledger, 0, 1, [], "");
      const late = await closeOriginMidSend(rig, extra);
      const { fresh, second, drained } = await carryOnFresh(rig, late.freshWorker, extra, Math.max(1, tasks - first));
      const secondRow = account(this.name, this.injection, fresh, second, 0, 1, [], "");
      const checks = [
        { name: "closed stores hold nothing", ok: workerCleared && late.originCleared },
        { name: "no unhandled rejection", ok: unhandled.length === 0 },
        { name: "fresh lifetimes drained", ok: drained },
      ];
      return shutdownRow(this, rig, { firstRow, secondRow }, late, held, checks);
    } finally {
      process.off("unhandledRejection", listener);
      for (const party of extra) await party.close().catch(() => undefined);
      await closeRig(rig);
    }
  },
};
