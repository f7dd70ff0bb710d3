/**
 * The outbox (`outbox`): one small tracking row per envelope this endpoint sends — target,
 * purpose, creation order, pending or accepted — while the envelope itself is kept once as its
 * wire text (envelopes.ts). Its index holds each target's pending envelopes oldest first, which is
 * what per-target FIFO sending and the fair retry rotation read.
 */
import { endpointKey } from "../protocol/endpoint.ts";
import { TaskError } from "../protocol/errors.ts";
import type { Envelopes } from "./envelopes.ts";
import { insertSorted, removeSorted, sortedRecord, type TableIndex } from "./index-kit.ts";
import { invariant } from "./invariant.ts";
import type { StoreKernel } from "./kernel.ts";
import type { Quarantine } from "./quarantine.ts";
import type { RetryRotation } from "./retry-rotation.ts";
import { rowsOfTask, type StoreRows } from "./tables.ts";
import type { Bookkeeping, OutboxEntry, TaskStore } from "./store-types.ts";

interface SeqKey {
  readonly seq: number;
  readonly envelopeId: string;
}

export interface OutboxIndex {
  /** Each target's pending envelopes, oldest first. */
  pendingByTarget: Map<string, SeqKey[]>;
  /** The target of each pending envelope. */
  pendingTargetOf: Map<string, string>;
}

const bySeq = (a: SeqKey, b: SeqKey) => a.seq - b.seq;

function indexOutbox(index: OutboxIndex, key: string, before: OutboxEntry | undefined, after: OutboxEntry | undefined): void {
  if (before !== undefined && before.state === "pending") {
    const list = index.pendingByTarget.get(before.targetKey);
    invariant(list !== undefined, "a pending envelope's target has a queue");
    removeSorted(list, { seq: before.seq, envelopeId: before.envelopeId }, bySeq, "pendingByTarget");
    if (list.length === 0) index.pendingByTarget.delete(before.targetKey);
    index.pendingTargetOf.delete(key);
  }
  if (after !== undefined && after.state === "pending") {
    let list = index.pendingByTarget.get(after.targetKey);
    if (list === undefined) index.pendingByTarget.set(after.targetKey, (list = []));
    insertSorted(list, { seq: after.seq, envelopeId: after.envelopeId }, bySeq, "pendingByTarget");
    index.pendingTargetOf.set(key, after.targetKey);
  }
}

export const outboxIndex: TableIndex<OutboxIndex, { pendingByTarget: Record<string, string[]> }> = {
  empty: () => ({ pendingByTarget: new Map(), pendingTargetOf: new Map() }),
  apply: (index, key, previous, next) => indexOutbox(index, key, previous as OutboxEntry | undefined, next as OutboxEntry | undefined),
  snapshot: (index) => ({ pendingByTarget: sortedRecord(index.pendingByTarget, (list) => list.map((item) => item.envelopeId)) }),
};

/** Older pending envelopes to the same target, oldest first. */
function pendingAhead(index: OutboxIndex, envelopeId: string): string[] {
  const targetKey = index.pendingTargetOf.get(envelopeId);
  if (targetKey === undefined) return [];
  const ahead: string[] = [];
  for (const item of index.pendingByTarget.get(targetKey) ?? []) {
    if (item.envelopeId === envelopeId) break;
    ahead.push(item.envelopeId);
  }
  return ahead;
}

/** Each target's oldest pending entry, least recently rotated first. */
function retryHeads<Entry extends OutboxEntry>(rows: StoreRows, index: OutboxIndex, rotation: RetryRotation): Entry[] {
  const heads: { entry: Entry; stamp: number }[] = [];
  for (const [targetKey, list] of index.pendingByTarget) {
    const head = list[0];
    if (head !== undefined) heads.push({ entry: rows.read<Entry>("outbox", head.envelopeId)!, stamp: rotation.stampOf(targetKey) });
  }
  heads.sort((a, b) => a.stamp - b.stamp || a.entry.seq - b.entry.seq);
  return heads.map((item) => item.entry);
}

type OutboxApi<B extends Bookkeeping> = Pick<
  TaskStore<B>,
  | "putOutbox"
  | "getOutbox"
  | "pendingOutboxCount"
  | "pendingOutboxAhead"
  | "pendingOutboxFor"
  | "retryHeads"
  | "markOutboxAttempted"
  | "markOutboxAccepted"
  | "outboxOf"
  | "reencodeOutbox"
>;

export interface Outbox<B extends Bookkeeping> {
  readonly api: OutboxApi<B>;
  /** The entry, or `INVALID_ENVELOPE`. */
  require(envelopeId: string): OutboxEntry<B["purpose"]>;
  /** Removes the tracking row (its envelope text is the envelopes part's). */
  remove(envelopeId: string): void;
  /** A task's entries in table order; each may be removed before the next is asked for. */
  entriesOfTask(taskId: string): Generator<OutboxEntry<B["purpose"]>>;
  /** Drops the target's retry stamp once nothing is pending to it. */
  releaseTarget(targetKey: string): void;
}

export interface OutboxDependencies<B extends Bookkeeping> {
  readonly envelopes: Envelopes;
  readonly quarantine: Pick<Quarantine<B>, "has">;
  readonly rotation: RetryRotation;
}

export function createOutbox<B extends Bookkeeping>(
  kernel: StoreKernel,
  index: OutboxIndex,
  { envelopes, quarantine, rotation }: OutboxDependencies<B>,
): Outbox<B> {
  type Entry = OutboxEntry<B["purpose"]>;
  const { rows } = kernel;
  const seqs = kernel.counter();

  function require(envelopeId: string): Entry {
    const entry = rows.read<Entry>("outbox", envelopeId);
    if (entry === undefined) throw new TaskError("INVALID_ENVELOPE", { message: `no outbox entry ${envelopeId}`, details: { envelopeId } });
    return entry;
  }

  function releaseTarget(targetKey: string): void {
    if (!index.pendingByTarget.has(targetKey)) rotation.forget(targetKey);
  }

  const api: OutboxApi<B> = {
    putOutbox(entry) {
      return rows.transaction(() => {
        if (rows.has("outbox", entry.envelopeId) || quarantine.has(entry.envelopeId)) return false;
        const seq = seqs.next();
        const { envelopeText, awaiting, ...tracking } = entry;
        envelopes.put(entry.envelopeId, envelopeText);
        const row: Entry = { ...tracking, targetKey: endpointKey(entry.target), seq, state: "pending", attempted: false };
        rows.write("outbox", entry.envelopeId, awaiting === true ? { ...row, awaiting: true } : row);
        return true;
      });
    },
    getOutbox: (envelopeId) => rows.read<Entry>("outbox", envelopeId),
    pendingOutboxCount: () => index.pendingTargetOf.size,
    pendingOutboxAhead: (envelopeId) => pendingAhead(index, envelopeId),
    pendingOutboxFor: (targetKey) =>
      (index.pendingByTarget.get(targetKey) ?? []).map((item) => rows.read<Entry>("outbox", item.envelopeId)!),
    retryHeads: () => retryHeads<Entry>(rows, index, rotation),
    markOutboxAttempted(envelopeId) {
      rows.transaction(() => {
        const entry = require(envelopeId);
        if (!entry.attempted) rows.write("outbox", envelopeId, { ...entry, attempted: true });
      });
    },
    markOutboxAccepted(envelopeId, acceptance) {
      rows.transaction(() => {
        const entry = require(envelopeId);
        if (entry.state === "accepted") return;
        rows.write("outbox", envelopeId, { ...entry, state: "accepted", attempted: true, acceptance });
        releaseTarget(entry.targetKey);
      });
    },
    outboxOf: (taskId) => [...rowsOfTask<Entry>(rows, "outbox", taskId)].sort((a, b) => a.seq - b.seq),
    reencodeOutbox(envelopeId, target, envelopeText, options = {}) {
      rows.transaction(() => {
        const { acceptance: _dropped, awaiting: _released, ...entry } = require(envelopeId);
        envelopes.put(envelopeId, envelopeText);
        const row: Entry = { ...entry, target, targetKey: endpointKey(target), state: "pending", attempted: false };
        rows.write("outbox", envelopeId, options.awaiting === true ? { ...row, awaiting: true } : row);
        releaseTarget(entry.targetKey);
      });
    },
  };

  return {
    api,
    require,
    remove(envelopeId) {
      rows.remove("outbox", envelopeId);
    },
    entriesOfTask: (taskId) => rowsOfTask<Entry>(rows, "outbox", taskId),
    releaseTarget,
  };
}
