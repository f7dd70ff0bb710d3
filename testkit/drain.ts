/**
 * Draining parties: passes on every party until none has pending work and (unless told not to
 * ask) the relay holds nothing for any of them, with jump timers moved past capacity cooldowns
 * between rounds.
 */
import { coreInternals, type TaskCore } from "../src/core/task-core.ts";
import { capacityCooldownMs } from "../src/protocol/limits.ts";
import type { JumpTimers } from "./jump-timers.ts";

/** A party as a drain sees it: its TaskCore now (a lifetime may replace it) and one pass. */
export interface Drainable {
  core(): TaskCore;
  refresh(): Promise<unknown>;
}

export interface DrainOptions {
  readonly timers?: JumpTimers;
  /** Rounds before giving up (default 30). */
  readonly rounds?: number;
  /** How far the timers jump after a round that was not idle (default `capacityCooldownMs`). */
  readonly cooldownMs?: number;
  /** Also wait until the relay holds nothing for any party (default true). */
  readonly relay?: boolean;
}

/** Deliveries the relay still holds for this core's endpoint (read-only: receive never ACKs). */
export async function relayBacklog(core: TaskCore): Promise<number> {
  if (core.closed()) return 0;
  const page = await coreInternals(core).session.receive("0");
  return page.deliveries.length;
}

/** Drains (failed passes are swallowed); resolves with the rounds used, or undefined when still pending. */
export async function tryDrain(parties: readonly Drainable[], options: DrainOptions = {}): Promise<number | undefined> {
  const rounds = options.rounds ?? 30;
  for (let round = 1; round <= rounds; round += 1) {
    for (const party of parties) await party.refresh().catch(() => undefined);
    let idle = parties.every((party) => party.core().closed() || !party.core().hasPendingWork());
    if (idle && options.relay !== false) {
      for (const party of parties) if ((await relayBacklog(party.core()).catch(() => 1)) > 0) idle = false;
    }
    if (idle) return round;
    options.timers?.jump(options.cooldownMs ?? capacityCooldownMs);
  }
  return undefined;
}

/** Parties holding one core each, as drains see them (a closed core gets no pass). */
function drainable(parties: readonly { readonly core: TaskCore }[]): Drainable[] {
  return parties.map((party) => ({
    core: () => party.core,
    refresh: async () => (party.core.closed() ? undefined : await party.core.refresh()),
  }));
}

/** Drains parties holding one core each; returns the rounds used and throws when still pending. */
export async function drain(parties: readonly { readonly core: TaskCore }[], options: DrainOptions = {}): Promise<number> {
  const rounds = await tryDrain(drainable(parties), options);
  if (rounds === undefined) throw new Error(`drain: still pending after ${options.rounds ?? 30} rounds`);
  return rounds;
}

/** Passes until no party has pending work, without asking the relay; the rounds used, or `maxRounds`. */
export async function settle(parties: readonly { readonly core: TaskCore }[], maxRounds = 20): Promise<number> {
  return (await tryDrain(drainable(parties), { rounds: maxRounds, relay: false })) ?? maxRounds;
}
