/**
 * Key naming of the Redis store: every key is `PREFIX:NAME` or `PREFIX:NAME<id>`. The default
 * prefix is in braces, a Redis Cluster hash tag, so all keys of one relay state share one hash slot
 * (each script touches many of them). Relays that share a Redis and a prefix share their state.
 *
 * Layout (the scripts in scripts.ts build these names from `KEYS` and the prefix):
 * - `epoch`: the epoch (string); gone after a Redis restart without persistence;
 * - `lineage`: Redis's replication id (`master_replid`) when the state began: a replica promoted in
 *   a failover has another one, and its state — which may lack what the old primary accepted last —
 *   is then a new epoch (scripts.ts, `maintain`);
 * - `usage`: hash of the relay-wide counters (activeItems, activeBytes, receipts, receiptBytes,
 *   registrations, metadataBytes);
 * - `sessions`: hash session name → endpoint id of its current registration;
 * - `retired`: hash (session, generation) → endpoint id of a superseded registration (a late
 *   connect of that generation is refused);
 * - `ends`: sorted set of endpoint ids by when their registration ended (lease end, disconnect or
 *   retirement), for reaping and for reclaiming ended registrations;
 * - `fresh`: sorted set of never-used endpoint ids (no bound request yet) in the order they were made
 *   (scored by the counter `mintserial`), and
 *   `seen`: sorted set of used ones by their last recorded bound request — the order in which a
 *   connect reclaims places under contention (`quotas-v1`);
 * - `reg:<id>`: hash of one registration (session, generation, lease, state, retiredAt, successor,
 *   secret digest, size, active: its last recorded bound request);
 * - `mb:<id>`, `mbz:<id>`, `mbt:<id>`: a mailbox's counters (highest cursor, items, bytes), its
 *   envelope ids by cursor (sorted set) and its envelope texts by envelope id (hash);
 * - `mbsh:<id>`: hash of a mailbox's senders' shares, `i<sender id>` items and `b<sender id>` bytes;
 * - `mbs`: set of endpoint ids that have a mailbox (for the budget audit);
 * - `snd:<id>`: hash of one sender's relay-wide usage (items, bytes, receipts, receiptBytes), gone
 *   once it holds nothing; `snds`: set of the senders that hold something (for the audit);
 * - `rc`: hash envelope id → receipt (`state|acceptanceId|targetId|sourceId|cursor|acceptedAt|bytes|digest`,
 *   state `m` queued, `a` acknowledged, `d` dropped, `e` expired);
 * - `rcexp`: sorted set of envelope ids by acceptance time (an expired one's by its expiry), for
 *   receipt expiry and mail expiry;
 * - `watchserial`: counter ordering watches across relays (a newer watch replaces an older one);
 * - `bell:<id>`: the pub/sub channel of an endpoint's doorbell.
 */

export const DEFAULT_REDIS_PREFIX = "{pi-tasks}";

export const KEYS = {
  epoch: "epoch",
  lineage: "lineage",
  usage: "usage",
  sessions: "sessions",
  retired: "retired",
  ends: "ends",
  fresh: "fresh",
  seen: "seen",
  registration: "reg:",
  mailbox: "mb:",
  mailboxItems: "mbz:",
  mailboxTexts: "mbt:",
  mailboxShares: "mbsh:",
  mailboxes: "mbs",
  sender: "snd:",
  senders: "snds",
  receipts: "rc",
  receiptExpiry: "rcexp",
  watchSerial: "watchserial",
  mintSerial: "mintserial",
  bell: "bell:",
} as const;

/** A key of the store under `prefix`. */
export function redisKey(prefix: string, name: string, id = ""): string {
  return `${prefix}:${name}${id}`;
}
