/**
 * Taking rows out of several parts at once: quarantining an outbox envelope, withdrawing one that
 * never reached the wire, forgetting a task. Each step goes through the part that owns the rows,
 * in one transaction, in a fixed order a rollback undoes exactly; this file owns no rows itself.
 */
import type { Envelopes } from "./envelopes.ts";
import type { Events } from "./events.ts";
import type { Intents } from "./intents.ts";
import type { StoreKernel } from "./kernel.ts";
import type { LocalPresentations } from "./local-presentation.ts";
import type { Operations } from "./operations.ts";
import type { Outbox } from "./outbox.ts";
import type { Quarantine } from "./quarantine.ts";
import type { Bookkeeping, TaskStore } from "./store-types.ts";
import type { Tasks } from "./tasks.ts";

export interface WithdrawalParts<B extends Bookkeeping> {
  readonly tasks: Tasks<B>;
  readonly events: Events;
  readonly local: LocalPresentations;
  readonly envelopes: Envelopes;
  readonly outbox: Outbox<B>;
  readonly quarantine: Quarantine<B>;
  readonly operations: Operations<B>;
  readonly intents: Intents;
}

type Withdrawals<B extends Bookkeeping> = Pick<TaskStore<B>, "quarantineOutbox" | "discardUnsentOperation" | "discardTask">;

/** Forgets every outbox and quarantined envelope of a task, with its text and idle retry stamps. */
function discardEnvelopesOf<B extends Bookkeeping>(parts: WithdrawalParts<B>, taskId: string): void {
  const { outbox, quarantine, envelopes } = parts;
  for (const entry of outbox.entriesOfTask(taskId)) {
    outbox.remove(entry.envelopeId);
    envelopes.discard(entry.envelopeId);
    outbox.releaseTarget(entry.targetKey);
  }
  for (const entry of quarantine.entriesOfTask(taskId)) {
    quarantine.remove(entry.envelopeId);
    envelopes.discard(entry.envelopeId);
    outbox.releaseTarget(entry.targetKey);
  }
}

export function createWithdrawals<B extends Bookkeeping>({ rows }: StoreKernel, parts: WithdrawalParts<B>): Withdrawals<B> {
  const { tasks, events, local, envelopes, outbox, quarantine, operations, intents } = parts;
  return {
    quarantineOutbox(envelopeId, reason) {
      return rows.transaction(() => {
        const entry = outbox.require(envelopeId);
        outbox.remove(envelopeId);
        quarantine.add(entry, reason);
        outbox.releaseTarget(entry.targetKey);
        return quarantine.peek(envelopeId)!;
      });
    },
    discardUnsentOperation(envelopeId) {
      return rows.transaction(() => {
        const entry = outbox.api.getOutbox(envelopeId);
        if (entry === undefined || entry.state !== "pending" || entry.attempted) return false;
        outbox.remove(envelopeId);
        envelopes.discard(envelopeId);
        operations.discardByEnvelope(envelopeId);
        outbox.releaseTarget(entry.targetKey);
        return true;
      });
    },
    discardTask(taskId) {
      return rows.transaction(() => {
        if (!tasks.has(taskId)) return false;
        for (const eventId of events.idsOf(taskId)) {
          events.discard(eventId);
          local.api.completeLocalPresentation(eventId);
        }
        discardEnvelopesOf(parts, taskId);
        operations.discardOfTask(taskId);
        intents.discardOfTask(taskId);
        tasks.discard(taskId);
        return true;
      });
    },
  };
}
