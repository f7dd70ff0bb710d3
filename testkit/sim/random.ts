/**
 * The simulator's one source of chance: a seeded stream of numbers (SHA-256 of the seed and a
 * counter, from node:crypto), so the same seed always draws the same numbers in the same order.
 */
import { createHash } from "node:crypto";

/** Words (32-bit) one hash block gives: a SHA-256 digest is 32 bytes. */
const WORDS_PER_BLOCK = 8;

export interface SimRandom {
  readonly seed: number;
  /** An integer in [0, n), n ≥ 1. */
  below(n: number): number;
  /** An integer in [min, max], both included. */
  between(min: number, max: number): number;
  /** True with probability p (0 ≤ p ≤ 1). */
  chance(p: number): boolean;
  /** One item of a non-empty list. */
  pick<T>(items: readonly T[]): T;
  /** One key of a table of weights (each ≥ 0, not all 0), drawn in proportion to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K;
  /** A new stream of its own, drawn from this one (a party's choices stay apart from the network's). */
  fork(label: string): SimRandom;
}

export function createSimRandom(seed: number, label = "world"): SimRandom {
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`seed must be a non-negative safe integer, got ${seed}`);
  let counter = 0;
  let block: Buffer = Buffer.alloc(0);
  let used = WORDS_PER_BLOCK;
  const word = (): number => {
    if (used === WORDS_PER_BLOCK) {
      block = createHash("sha256").update(`${label}\0${seed}\0${counter}`).digest();
      counter += 1;
      used = 0;
    }
    const value = block.readUInt32LE(used * 4);
    used += 1;
    return value;
  };
  const below = (n: number): number => {
    if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`below(n) needs an integer n ≥ 1, got ${n}`);
    return Math.floor((word() / 2 ** 32) * n);
  };
  const random: SimRandom = {
    seed,
    below,
    between: (min, max) => min + below(max - min + 1),
    chance: (p) => word() / 2 ** 32 < p,
    pick: (items) => {
      if (items.length === 0) throw new RangeError("pick from an empty list");
      return items[below(items.length)] as (typeof items)[number];
    },
    weighted: (weights) => {
      const entries = Object.entries(weights) as [keyof typeof weights, number][];
      const total = entries.reduce((sum, [, weight]) => sum + weight, 0);
      if (!(total > 0)) throw new RangeError("weighted needs a positive total weight");
      let point = (word() / 2 ** 32) * total;
      for (const [key, weight] of entries) {
        if (point < weight) return key;
        point -= weight;
      }
      return entries.at(-1)![0];
    },
    fork: (child) => createSimRandom(seed, `${label}/${child}`),
  };
  return random;
}
