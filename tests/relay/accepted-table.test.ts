/**
 * The memory store's packed table of accepted envelopes (src/relay-server/store/accepted.ts)
 * against a plain model: random admissions, removals and expiry-queue passes over UUID ids and
 * other ids (uppercase UUIDs, short and long strings, non-ASCII), with enough of them that the
 * columns grow and freed slots are reused. Every live id is found with its fields, every removed
 * one is not, and a removed slot is reused only once the queue passed it.
 */
import { describe, expect, test } from "bun:test";
import { createAcceptedTable, type NewAccepted } from "../../src/relay-server/store/accepted.ts";

/** A deterministic generator (mulberry32), so a failure replays. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function idOf(next: () => number, serial: number): string {
  const kind = Math.floor(next() * 6);
  if (kind === 0) return crypto.randomUUID().toUpperCase();
  if (kind === 1) return `id-${serial}`;
  if (kind === 2) return `é✓😀-${serial}-${"x".repeat(Math.floor(next() * 600))}`;
  return crypto.randomUUID();
}

describe("the accepted table", () => {
  test("finds exactly the ids it holds, with their fields, through growth and removals", () => {
    for (const seed of [1, 2, 3]) {
      const next = random(seed);
      const table = createAcceptedTable();
      const live = new Map<string, { slot: number; accepted: NewAccepted }>();
      const removed = new Set<string>();
      /** Slots in the expiry queue, oldest first (each added slot is queued once). */
      const queue: number[] = [];
      const waiting = new Set<number>();
      for (let step = 0; step < 6_000; step += 1) {
        const roll = next();
        if (roll < 0.5 || live.size === 0) {
          const envelopeId = idOf(next, step);
          const accepted: NewAccepted = {
            envelopeId,
            cursor: step + 1,
            text: `{"envelopeId":${JSON.stringify(envelopeId)}}`,
            targetId: `target-${step % 7}`,
            sourceId: `source-${step % 5}`,
            acceptedAt: 1_000 + step,
          };
          const slot = table.add(accepted);
          expect(waiting.has(slot)).toBe(false);
          live.set(envelopeId, { slot, accepted });
          queue.push(slot);
          waiting.add(slot);
        } else if (roll < 0.8) {
          const ids = [...live.keys()];
          const envelopeId = ids[Math.floor(next() * ids.length)]!;
          const { slot } = live.get(envelopeId)!;
          if (next() < 0.5) table.settle(slot, "acknowledged", "digest");
          table.remove(slot);
          live.delete(envelopeId);
          removed.add(envelopeId);
          expect(table.removed(slot)).toBe(true);
        } else {
          const passes = Math.floor(next() * 20);
          for (let index = 0; index < passes && queue.length > 0; index += 1) {
            const slot = queue.shift()!;
            waiting.delete(slot);
            const wasLive = [...live.values()].some((entry) => entry.slot === slot);
            expect(table.dequeue(slot)).toBe(wasLive);
          }
        }
      }
      for (const [envelopeId, { slot, accepted }] of live) {
        expect(table.find(envelopeId)).toBe(slot);
        expect(table.envelopeId(slot)).toBe(envelopeId);
        expect(table.cursor(slot)).toBe(accepted.cursor);
        expect(table.targetId(slot)).toBe(accepted.targetId);
        expect(table.sourceId(slot)).toBe(accepted.sourceId);
        expect(table.acceptedAt(slot)).toBe(accepted.acceptedAt);
        expect(table.removed(slot)).toBe(false);
      }
      for (const envelopeId of removed) if (!live.has(envelopeId)) expect(table.find(envelopeId)).toBe(-1);
      expect(table.find(crypto.randomUUID())).toBe(-1);
    }
  });

  test("a receipt's state and what it keeps: the text while queued, then the digest; an expiry time only when expired", () => {
    const table = createAcceptedTable();
    const envelopeId = crypto.randomUUID();
    const slot = table.add({ envelopeId, cursor: 3, text: "{}", targetId: "t", sourceId: "s", acceptedAt: 10 });
    expect([table.state(slot), table.content(slot)]).toEqual(["mailbox", "{}"]);
    expect(() => table.expiredAt(slot)).toThrow();
    table.settle(slot, "expired", "digest", 99);
    expect([table.state(slot), table.content(slot), table.expiredAt(slot), table.acceptedAt(slot)]).toEqual(["expired", "digest", 99, 10]);
    table.remove(slot);
    expect(() => table.state(slot)).toThrow();
    expect(table.find(envelopeId)).toBe(-1);
  });
});
