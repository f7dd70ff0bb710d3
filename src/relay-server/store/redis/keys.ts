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
 * - `mb:<id>`, `mbz:<id>`: a mailbox's counters (highest cursor, items, bytes) and its queued
 *   envelopes by cursor (sorted set), each member the envelope's packed id followed by its text;
 * - `mbsh:<id>`: hash of a mailbox's senders' shares, `i<sender id>` items and `b<sender id>` bytes;
 * - `mbs`: set of endpoint ids that have a mailbox (for the budget audit);
 * - `snd:<id>`: hash of one sender's relay-wide usage (items, bytes, receipts, receiptBytes), gone
 *   once it holds nothing; `snds`: set of the senders that hold something (for the audit);
 * - `rc`: hash packed envelope id → receipt: its state letter (`m` queued, `a` acknowledged, `d`
 *   dropped, `e` expired), its budget charge (three bytes), the packed digest of the text, the
 *   packed target and source ids, then the cursor's digits;
 * - `rcexp`: sorted set of packed envelope ids by acceptance time (an expired one's by its expiry),
 *   for receipt expiry and mail expiry — the acceptance time a receipt answers a resend with;
 * - `acceptkey`: the key of the state's acceptance ids, which the relays read with the epoch and
 *   make as the memory store does (acceptance.ts: a keyed hash of the envelope id, so a resend gets
 *   the same one and nothing stores it);
 * - `layout`: the layout of these keys (`REDIS_LAYOUT`); a relay refuses a state of another one
 *   (`REDIS_LAYOUT`, the error), so relays of different versions never read each other's keys;
 * - `watchserial`: counter ordering watches across relays (a newer watch replaces an older one);
 * - `bell:<id>`: the pub/sub channel of an endpoint's doorbell.
 *
 * Packed ids: what Redis keeps per queued envelope is its text plus a few entries, so what is held
 * per envelope besides the text — the envelope id in three places, the digest and endpoints in its
 * receipt — is packed. The envelope id as the relay packs it (index.ts `packedEnvelopeId`, the
 * scripts take it so and never unpack it): a lowercase UUID as `~` and its 16 bytes in base64url,
 * any other id as `#`, its UTF-8 in base64url and `:`. The digest and endpoint ids of a receipt
 * as the scripts pack them (scripts.ts `pack_id`): a lowercase UUID as a zero byte and its 16
 * bytes, 64 lowercase hex digits (a SHA-256) as a two byte and their 32 bytes, anything else as a
 * one byte, its length in two bytes and itself. The scripts answer ids as given.
 */

export const DEFAULT_REDIS_PREFIX = "{pi-tasks}";
/** The layout this relay writes and reads (2: packed ids, the text in the mailbox's sorted set, derived acceptance ids). */
export const REDIS_LAYOUT = "2";

export const KEYS = {
  epoch: "epoch",
  lineage: "lineage",
  layout: "layout",
  usage: "usage",
  sessions: "sessions",
  retired: "retired",
  ends: "ends",
  fresh: "fresh",
  seen: "seen",
  registration: "reg:",
  mailbox: "mb:",
  mailboxItems: "mbz:",
  mailboxShares: "mbsh:",
  mailboxes: "mbs",
  sender: "snd:",
  senders: "snds",
  receipts: "rc",
  receiptExpiry: "rcexp",
  watchSerial: "watchserial",
  mintSerial: "mintserial",
  acceptanceKey: "acceptkey",
  bell: "bell:",
} as const;

/** A key of the store under `prefix`. */
export function redisKey(prefix: string, name: string, id = ""): string {
  return `${prefix}:${name}${id}`;
}
