/**
 * A fault row's accounting: of what the ledger offered, how much the relay accepted, the receiving
 * model was shown (presented), was shown twice, was reported to the sender's model, was refused,
 * and what is left — the silent loss, which must be 0. `FaultRow` is the row the matrix prints
 * and docs/reliability.md tabulates.
 */
import { eventTypeRow } from "../../../src/protocol/events.ts";
import type { MemoryHost } from "../../../testkit/memory-host.ts";
import type { Item, Ledger } from "./ledger.ts";
import type { Party, Rig } from "./rig.ts";

export interface FaultRow {
  readonly fault: string;
  readonly injection: string;
  readonly offered: number;
  readonly accepted: number;
  readonly presented: number;
  readonly duplicated: number;
  /** Not presented, but reported to the sender's model (both kinds below). */
  readonly reported: number;
  /** Accepted mail the relay lost in a restart, reported as `RELAY_STATE_LOST`. */
  readonly lostToRelayReset: number;
  /** Mail to or from a lifetime that was shut down, reported by the task's timeout or the failed call. */
  readonly endedWithLifetime: number;
  readonly refused: number;
  readonly lost: number;
  readonly requests: number;
  /** Requests the fault actually hit (proof the fault was injected). */
  readonly faulted: number;
  readonly checks: readonly { readonly name: string; readonly ok: boolean }[];
  readonly note: string;
  readonly ok: boolean;
}

function acceptedIds(parties: readonly Party[]): Set<string> {
  const ids = new Set<string>();
  for (const party of parties) {
    for (const entry of party.replies) {
      if (entry.operation !== "send" || entry.reply?.ok !== true) continue;
      const id = (entry.reply.value as { envelopeId?: unknown } | undefined)?.envelopeId;
      if (typeof id === "string") ids.add(id);
    }
  }
  return ids;
}

function insertionCounts(host: MemoryHost): Map<string, number> {
  const counts = new Map<string, number>();
  for (const id of host.insertedIds()) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/** `workers`: every worker lifetime that held the tasks (a reassignment adds one). */
export function presentedItem(rig: Rig, item: Item, workers: readonly Party[] = [rig.worker]): boolean {
  if (item.kind === "done") {
    // The origin's model sees the canonical terminal event of the task.
    return rig.origin.host.inserted.some((entry) => entry.taskId === item.taskId && eventTypeRow(entry.event.type).terminalStatus !== null);
  }
  return item.eventId !== undefined && workers.some((worker) => worker.host.insertedIds().includes(item.eventId!));
}

export function account(
  fault: string,
  injection: string,
  rig: Rig,
  ledger: Ledger,
  requests: number,
  faulted: number,
  checks: FaultRow["checks"],
  note: string,
  workers: readonly Party[] = [rig.worker],
): FaultRow {
  const accepted = acceptedIds([rig.origin, ...workers]);
  let presented = 0;
  let reported = 0;
  let lostToRelayReset = 0;
  let refused = 0;
  let acceptedCount = 0;
  for (const item of ledger.items) {
    if (item.envelopeId !== undefined && accepted.has(item.envelopeId)) acceptedCount += 1;
    if (item.refused) refused += 1;
    else if (presentedItem(rig, item, workers)) presented += 1;
    else if (item.reported !== undefined) {
      reported += 1;
      if (item.reported === "RELAY_STATE_LOST") lostToRelayReset += 1;
    }
  }
  let duplicated = 0;
  for (const host of [rig.origin.host, ...workers.map((worker) => worker.host)])
    for (const count of insertionCounts(host).values()) duplicated += count - 1;
  const offered = ledger.items.length;
  const lost = offered - presented - reported - refused;
  const ok = lost === 0 && duplicated === 0 && faulted > 0 && checks.every((check) => check.ok);
  return {
    fault,
    injection,
    offered,
    accepted: acceptedCount,
    presented,
    duplicated,
    reported,
    lostToRelayReset,
    endedWithLifetime: reported - lostToRelayReset,
    refused,
    lost,
    requests,
    faulted,
    checks,
    note,
    ok,
  };
}
