/**
 * Key naming of the Redis store: every key is `PREFIX:NAME` or `PREFIX:NAME<id>`. The default
 * prefix is in braces, a Redis Cluster hash tag, so all keys of one relay state share one hash slot
 * (each script touches many of them). Relays that share a Redis and a prefix share their state.
 *
 * Layout (the scripts in scripts.ts build these names from `KEYS` and the prefix):
 * - `epoch`: the epoch (string); gone after a Redis restart without persistence;
 * - `usage`: hash of the relay-wide counters (activeItems, activeBytes, receipts, receiptBytes,
 *   registrations, metadataBytes);
 * - `sessions`: hash session name → endpoint id of its current registration;
 * - `retired`: hash (session, generation) → endpoint id of a superseded registration (a late
 *   connect of that generation is refused);
 * - `ends`: sorted set of endpoint ids by when their registration ended (lease end, disconnect or
 *   retirement), for reaping;
 * - `reg:<id>`: hash of one registration (session, generation, lease, state, retiredAt, successor,
 *   secret digest, size);
 * - `mb:<id>`, `mbz:<id>`, `mbt:<id>`: a mailbox's counters (highest cursor, items, bytes), its
 *   envelope ids by cursor (sorted set) and its envelope texts by envelope id (hash);
 * - `mbs`: set of endpoint ids that have a mailbox (for the budget audit);
 * - `rc`: hash envelope id → receipt (`state|acceptanceId|targetId|cursor|acceptedAt|bytes|digest`);
 * - `rcexp`: sorted set of envelope ids by acceptance time, for receipt expiry;
 * - `watchserial`: counter ordering watches across relays (a newer watch replaces an older one);
 * - `bell:<id>`: the pub/sub channel of an endpoint's doorbell.
 */

export const DEFAULT_REDIS_PREFIX = "{pi-tasks}";

export const KEYS = {
  epoch: "epoch",
  usage: "usage",
  sessions: "sessions",
  retired: "retired",
  ends: "ends",
  registration: "reg:",
  mailbox: "mb:",
  mailboxItems: "mbz:",
  mailboxTexts: "mbt:",
  mailboxes: "mbs",
  receipts: "rc",
  receiptExpiry: "rcexp",
  watchSerial: "watchserial",
  bell: "bell:",
} as const;

/** A key of the store under `prefix`. */
export function redisKey(prefix: string, name: string, id = ""): string {
  return `${prefix}:${name}${id}`;
}
