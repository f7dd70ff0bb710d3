/**
 * Fault: the relay restarts. Configured cores (`createConfiguredTaskCore`) run half of the tasks,
 * then the relay process is stopped and a new one started on the same port: a new epoch with an
 * empty memory, so every envelope it had accepted is gone.
 *
 * Proves that a relay restart loses the relay's memory, not the tasks: each core meets the new
 * epoch (`RELAY_RESET`), binds a fresh endpoint, finds its peer again by session name (proving the
 * task's bound key anew: proofs hold for one relay lifetime), re-sends what the new relay never
 * saw, and every task from before the restart completes — nothing lost, nothing shown twice.
 */
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { orphanProbeIntervalMs } from "../../src/protocol/limits.ts";
import { tryDrain } from "../../testkit/drain.ts";
import { account } from "./shared/accounting.ts";
import { createLedger } from "./shared/ledger.ts";
import { closeRig, makeRig } from "./shared/rig.ts";
import type { FaultSpec } from "./shared/scenario.ts";
import { DRAIN_ROUNDS, drain, workload } from "./shared/workload.ts";

export const relayRestart: FaultSpec = {
  name: "relay restart",
  injection:
    "configured cores (`createConfiguredTaskCore`) through the proxy; after half of the tasks the relay process is stopped and a new one started on the same port (new epoch, empty memory); the next passes fail `RELAY_RESET`, each core binds a fresh endpoint and keeps its tasks, finds its peer again by session name (its new endpoint proving the task's bound key with a fresh hello: proofs hold for one relay lifetime) and re-sends what the new relay never saw; then every task is finished and the second half runs. Before the first half, the worker proved its endpoint to the origin (untimed), as in every row.",
  async run({ relay: _shared, tasks }) {
    let relay = await startRelayProcess();
    const port = relay.port;
    const rig = await makeRig(relay, true);
    try {
      const ledger = createLedger();
      // At least two: the second is never taken in before the restart (found with the first's peer).
      const half = Math.max(2, Math.floor(tasks / 2));
      const to = () => rig.worker.core().endpoint()!;
      const before: string[] = [];
      for (let index = 0; index < half; index += 1) {
        const task = await ledger.offerTask(rig, to(), `before the restart ${index}`);
        // The worker takes the first one in; the rest stay accepted at the relay (and are lost with it).
        if (index === 0) await rig.worker.refresh().catch(() => undefined);
        if (task.taskId === undefined) continue;
        before.push(task.taskId);
        await ledger.offerMessage(rig, task.taskId, `message before the restart ${index}`);
      }
      const endpoints = [rig.origin.core().endpoint()!.id, rig.worker.core().endpoint()!.id];
      await relay.stop();
      relay = await startRelayProcess({ port });
      // Each side meets the new epoch (RELAY_RESET), rebinds, looks its peer up and re-sends.
      const reconnected =
        (await tryDrain([rig.origin, rig.worker], { timers: rig.timers, rounds: DRAIN_ROUNDS, cooldownMs: orphanProbeIntervalMs })) !==
        undefined;
      const rebound = rig.origin.core().endpoint()!.id !== endpoints[0] && rig.worker.core().endpoint()!.id !== endpoints[1];
      // What the new relay never saw arrives with the re-sends: let them land, then finish every task.
      await drain(rig);
      for (const taskId of before) if (rig.worker.core().findTask(taskId) !== undefined) await ledger.offerDone(rig, taskId);
      const drained = await workload(rig, ledger, Math.max(0, tasks - half), () => undefined);
      const completed = before.every((taskId) => rig.origin.core().findTask(taskId)?.status === "completed");
      // The fault hit both sides: each met the new epoch and rebound.
      const hits = [rig.origin, rig.worker].filter((party, index) => party.core().endpoint()!.id !== endpoints[index]).length;
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        hits,
        [
          { name: "fresh endpoints bound", ok: rebound },
          { name: "peers found again", ok: reconnected },
          { name: "tasks from before the restart completed", ok: completed },
          { name: "drained", ok: drained },
        ],
        `${before.length} tasks begun before the restart: re-sent after it and completed`,
      );
    } finally {
      await closeRig(rig);
      await relay.stop().catch(() => undefined);
    }
  },
};
