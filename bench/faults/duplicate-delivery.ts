/**
 * Fault: the worker receives mail it already has. (a) Its receive replies are cut mid-body twice,
 * so the relay serves the same page again; (b) after each task, an envelope the worker already
 * received is re-served in its next page under a fresh, higher cursor (a cursor the relay gave a
 * filler envelope the bench sent and acknowledged out of band).
 *
 * Proves that delivery is at-least-once on the wire but exactly-once to the model: a page served
 * twice and an envelope re-served under a new cursor are each inserted into the worker's model
 * once, and the workload still drains.
 */
import { encodedEnvelope } from "../../src/protocol/wire.ts";
import { coreInternals } from "../../src/core/task-core.ts";
import { account } from "./shared/accounting.ts";
import { createLedger } from "./shared/ledger.ts";
import { closeRig, makeRig } from "./shared/rig.ts";
import { type FaultSpec, fromEndpoint } from "./shared/scenario.ts";
import { workload } from "./shared/workload.ts";

export const duplicateDelivery: FaultSpec = {
  name: "duplicate delivery",
  injection:
    "(a) the worker's receive replies are cut mid-body twice (the page is served again); (b) after each task, an envelope the worker already received is re-served in its next page under a fresh, higher cursor (a cursor the relay assigned to a filler envelope the bench sent and ACKed out of band; those three requests count too).",
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    try {
      const worker = rig.worker.core().endpoint()!;
      const drops = rig.proxy.push({ operation: "receive", kind: "drop-reply", times: 2, when: fromEndpoint(worker) });
      let reserved = 0;
      const delivered = () =>
        rig.worker.replies
          .filter((entry) => entry.operation === "receive")
          .flatMap((entry) =>
            ((entry.reply?.value as { deliveries?: { envelope: Record<string, unknown> }[] } | undefined)?.deliveries ?? []).map(
              (item) => item.envelope,
            ),
          );
      /** A cursor the relay assigned but the worker's core never fetched. */
      const gapCursor = async (): Promise<string> => {
        const self = rig.origin.core().endpoint()!;
        const envelope = {
          envelopeId: crypto.randomUUID(),
          protocolVersion: 2,
          source: self,
          target: worker,
          payload: { taskId: crypto.randomUUID(), kind: "canonical_event", payload: {} },
          createdAt: new Date().toISOString(),
        };
        await coreInternals(rig.origin.core()).session.send(encodedEnvelope(envelope));
        const page = await coreInternals(rig.worker.core()).session.receive(coreInternals(rig.worker.core()).store.checkpoint().highWater);
        const cursor = page.deliveries.find((delivery) => delivery.envelopeId === envelope.envelopeId)!.cursor;
        await coreInternals(rig.worker.core()).session.acknowledge(envelope.envelopeId);
        return cursor;
      };
      const ledger = createLedger();
      const drained = await workload(
        rig,
        ledger,
        tasks,
        () => rig.proxy.clear(),
        async () => {
          const old = delivered().find((envelope) => (envelope.payload as { kind?: string } | undefined)?.kind === "assignment");
          if (old === undefined) return;
          const cursor = await gapCursor();
          rig.proxy.push({
            operation: "receive",
            kind: "rewrite",
            when: fromEndpoint(worker),
            rewrite: (reply: { value: { deliveries: unknown[] } }) => {
              reply.value.deliveries.unshift({ cursor, envelope: old });
              reserved += 1;
              return reply;
            },
          });
          await rig.worker.refresh().catch(() => undefined);
        },
      );
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        drops.hits() + reserved,
        [{ name: "drained", ok: drained }],
        `${drops.hits()} pages served twice, ${reserved} envelopes re-served under a new cursor`,
      );
    } finally {
      await closeRig(rig);
    }
  },
};
