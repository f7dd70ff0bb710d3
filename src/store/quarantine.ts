/**
 * Quarantine (`quarantine`): outbox envelopes taken out of sending for good (a definitive refusal),
 * each with its tracking fields, the state it left and why. A quarantined envelope is never sent
 * again and blocks nothing; its id stays taken so it cannot be queued a second time. Its wire text
 * stays with the envelopes part.
 */
import type { StoreKernel } from "./kernel.ts";
import { rowsOfTask } from "./tables.ts";
import type { Bookkeeping, OutboxEntry, QuarantineEntry, TaskStore } from "./store-types.ts";

export interface QuarantineReason {
  readonly errorCode: string;
  readonly details: Record<string, unknown>;
  readonly quarantinedAt: number;
}

export interface Quarantine<B extends Bookkeeping> {
  readonly api: Pick<TaskStore<B>, "getQuarantine" | "listQuarantine">;
  has(envelopeId: string): boolean;
  count(): number;
  /** Stores an outbox entry (already removed from the outbox) with why it was taken out. */
  add(entry: OutboxEntry<B["purpose"]>, reason: QuarantineReason): void;
  /** The stored entry, without counting as a read. */
  peek(envelopeId: string): QuarantineEntry<B["purpose"]> | undefined;
  remove(envelopeId: string): void;
  /** A task's entries in table order; each may be removed before the next is asked for. */
  entriesOfTask(taskId: string): Generator<QuarantineEntry<B["purpose"]>>;
}

export function createQuarantine<B extends Bookkeeping>({ rows }: StoreKernel): Quarantine<B> {
  type Quarantined = QuarantineEntry<B["purpose"]>;
  return {
    api: {
      getQuarantine: (envelopeId) => rows.read<Quarantined>("quarantine", envelopeId),
      listQuarantine: () => [...rows.keys("quarantine")].map((key) => rows.read<Quarantined>("quarantine", key)!),
    },
    has: (envelopeId) => rows.has("quarantine", envelopeId),
    count: () => rows.size("quarantine"),
    add(entry, reason) {
      const { state, acceptance: _acceptance, ...rest } = entry;
      rows.write("quarantine", entry.envelopeId, { ...rest, priorState: state, ...reason } satisfies Quarantined);
    },
    peek: (envelopeId) => rows.peek<Quarantined>("quarantine", envelopeId),
    remove(envelopeId) {
      rows.remove("quarantine", envelopeId);
    },
    entriesOfTask: (taskId) => rowsOfTask<Quarantined>(rows, "quarantine", taskId),
  };
}
