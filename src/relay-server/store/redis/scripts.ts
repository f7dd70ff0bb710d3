/**
 * The Lua scripts of the Redis store: one per `RelayStore` method, so each method is one atomic
 * step however many relays share the Redis (scripts run one at a time). Every script but `epoch`
 * first checks that the epoch key still holds the epoch the relay knows, and otherwise returns
 * `{"replaced"}` without touching anything: a Redis restarted without persistence is a new state.
 *
 * Calling convention: `KEYS[1]` is the epoch key (so a cluster routes the script to the slot of the
 * prefix's hash tag), `ARGV[1]` the epoch the relay knows, `ARGV[2]` the key prefix, then the
 * method's arguments. Replies are arrays of strings, the outcome's kind first. Every number goes
 * in and out as a decimal string (`fmt`), never through Lua's `tostring` (which writes 1e+15).
 *
 * The rules are the memory store's (registry.ts, mailbox.ts, budgets.ts), step for step — the
 * fair shares (`quotas-v1`) and mail expiry (`mail-expiry-v1`) among them; the bounds come from
 * limits.ts, written into the sources here.
 */
import { createHash } from "node:crypto";
import { utf8Bytes } from "../../../protocol/canonical-json.ts";
import {
  maxReceivePageBytes,
  maxRedisCursor,
  relayActivityResolutionMs,
  relayMailLifetimeMs,
  maxRelayActiveBytes,
  maxRelayActiveItems,
  maxRelayMailboxBytes,
  maxRelayMailboxItems,
  maxRelayMetadataBytes,
  maxRelayReceiptBytes,
  maxRelayReceipts,
  maxRelayRegistrations,
  relayReceiptRetentionMs,
  relayRegistrationGraceMs,
  relayRegistrationIdleMs,
  relayRegistrationRetentionMs,
  maxRelaySenderActiveBytes,
  maxRelaySenderActiveItems,
  maxRelaySenderMailboxBytes,
  maxRelaySenderMailboxItems,
  maxRelaySenderReceiptBytes,
  maxRelaySenderReceipts,
} from "../../../protocol/limits.ts";
import { KEYS, REDIS_LAYOUT } from "./keys.ts";

export interface RedisScript {
  readonly name: string;
  readonly source: string;
  /** SHA-1 of the source (EVALSHA). */
  readonly sha: string;
}

/** Registrations a reclaim reads at a time from one of its sorted sets (how much one call of a script holds Redis). */
const RECLAIM_SCAN_PAGE = 32;

/** Items a mailbox's drop reads at a time (each member holds its envelope's text). */
const DROP_PAGE = 16;

/** Bytes of a page item `{"cursor":"…","envelope":}` besides the cursor digits and the envelope (as in mailbox.ts). */
const PAGE_ITEM_OVERHEAD_BYTES = utf8Bytes('{"cursor":"","envelope":}');

/** Helpers every script shares, then the epoch check. */
const PRELUDE = `
local P = ARGV[2] .. ':'
local function key(name, id) return P .. name .. (id or '') end
local function fmt(n) return string.format('%.0f', n) end
local function num(v) if v then return tonumber(v) end return 0 end
local function record(k)
  local flat = redis.call('HGETALL', k)
  if #flat == 0 then return nil end
  local r = {}
  for i = 1, #flat, 2 do r[flat[i]] = flat[i + 1] end
  return r
end
-- Digests compared in constant time (binding-secret.ts does the same in the memory store).
local function same_digest(a, b)
  if #a ~= #b then return false end
  local diff = 0
  for i = 1, #a do diff = bit.bor(diff, bit.bxor(string.byte(a, i), string.byte(b, i))) end
  return diff == 0
end
local function is_live(r, now) return r.state == 'active' and tonumber(r.lease) > now end
-- A decimal cursor (no leading zeros) after another: the longer one, or the larger at equal length.
local function cursor_after(a, b) return #a > #b or (#a == #b and a > b) end
local function retired_field(session, generation) return #session .. ':' .. session .. generation end
-- Ids and digests as a receipt keeps them (keys.ts, "Packed ids"): a lowercase UUID as a zero byte and its 16
-- bytes, 64 lowercase hex digits (a text digest) as a two byte and their 32 bytes, anything else as a
-- one byte, its length in two bytes and itself. A packing is taken only when it gives back the very
-- text (so equal packed ids are equal ids), checked by writing it out again.
local UUID_FORMAT = '%08x-%04x-%04x-%04x-%012x'
local function pack_id(id)
  local sub = string.sub
  if #id == 36 then
    local a, b, c, d, e = tonumber(sub(id, 1, 8), 16), tonumber(sub(id, 10, 13), 16), tonumber(sub(id, 15, 18), 16), tonumber(sub(id, 20, 23), 16), tonumber(sub(id, 25), 16)
    if a and b and c and d and e and string.format(UUID_FORMAT, a, b, c, d, e) == id then return struct.pack('>BI4I2I2I2I6', 0, a, b, c, d, e) end
  elseif #id == 64 then
    local a, b, c, d, e, f = tonumber(sub(id, 1, 12), 16), tonumber(sub(id, 13, 24), 16), tonumber(sub(id, 25, 36), 16), tonumber(sub(id, 37, 48), 16), tonumber(sub(id, 49, 60), 16), tonumber(sub(id, 61), 16)
    if a and b and c and d and e and f and string.format('%012x%012x%012x%012x%012x%04x', a, b, c, d, e, f) == id then
      return struct.pack('>BI6I6I6I6I6I2', 2, a, b, c, d, e, f)
    end
  end
  return struct.pack('>BI2', 1, #id) .. id
end
-- The position after the packed id at position at of s.
local function packed_end(s, at)
  local kind = string.byte(s, at)
  if kind == 0 then return at + 17 end
  if kind == 2 then return at + 33 end
  return at + 3 + struct.unpack('>I2', s, at + 1)
end
-- The id packed at position at of s (a UUID or any other id: never a digest), and the position after it.
local function unpack_id(s, at)
  if string.byte(s, at) == 0 then
    local a, b, c, d, e = struct.unpack('>I4I2I2I2I6', s, at + 1)
    return string.format(UUID_FORMAT, a, b, c, d, e), at + 17
  end
  local after = packed_end(s, at)
  return string.sub(s, at + 3, after - 1), after
end
-- A receipt (keys.ts): its state letter, its budget charge (three bytes), the packed digest, target
-- and source, then the cursor's digits. When it was accepted is its expiry entry's score.
local function pack_receipt(state, bytes, digest, packed_target, packed_source, cursor)
  return state .. struct.pack('>I3', tonumber(bytes)) .. pack_id(digest) .. packed_target .. packed_source .. cursor
end
-- A receipt's fields; its target packed (unpack_id(receipt.target, 1) is its id).
local function receipt_of(packed)
  local digest_end = packed_end(packed, 5)
  local target_end = packed_end(packed, digest_end)
  local source, rest = unpack_id(packed, target_end)
  return {
    state = string.sub(packed, 1, 1), bytes = struct.unpack('>I3', packed, 2), digest = string.sub(packed, 5, digest_end - 1),
    target = string.sub(packed, digest_end, target_end - 1), source = source, cursor = string.sub(packed, rest),
  }
end
-- The registration a bound script's binding read (binding_of), if any: its packed id ('p') spares
-- packing that endpoint's id again.
local bound_record = nil
-- An endpoint id packed: its registration keeps it so (from the bound record, or read), else packed here.
local function packed_endpoint(id)
  if bound_record and bound_record.id == id and bound_record.p then return bound_record.p end
  return redis.call('HGET', key('${KEYS.registration}', id), 'p') or pack_id(id)
end
-- The position after the packed envelope id (a pid, made by the relay: keys.ts, "Packed ids") that
-- starts s: '~' and 22 characters, or '#' and base64url up to ':'.
local function pid_end(s)
  if string.byte(s, 1) == 126 then return 24 end
  return string.find(s, ':', 2, true) + 1
end
-- The queued item of a mailbox at a cursor when it is the envelope's (packed id pid): its member.
local function item_at(target, pid, cursor)
  local found = redis.call('ZRANGEBYSCORE', key('${KEYS.mailboxItems}', target), cursor, cursor)
  if found[1] and string.sub(found[1], 1, #pid) == pid then return found[1] end
  return nil
end
local function found(id, r) return { 'found', id, r.session, r.state, r.lease } end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return { 'replaced' } end
`;

/**
 * Releasing what queued mail and receipts hold: the relay-wide counters, the mailbox's, and the
 * sender's (its share of the mailbox and its relay-wide usage; a sender holding nothing is
 * forgotten). `set_state` rewrites a receipt's state letter.
 */
const RELEASE = `
local function forget_if_idle(source)
  local u = redis.call('HMGET', key('${KEYS.sender}', source), 'items', 'bytes', 'receipts', 'receiptBytes')
  if num(u[1]) == 0 and num(u[2]) == 0 and num(u[3]) == 0 and num(u[4]) == 0 then
    redis.call('DEL', key('${KEYS.sender}', source))
    redis.call('SREM', key('${KEYS.senders}'), source)
  end
end
local function set_state(pid, packed, state)
  redis.call('HSET', key('${KEYS.receipts}'), pid, state .. string.sub(packed, 2))
end
-- Takes a queued item (its mailbox member) out of its mailbox and frees every budget and share it held.
local function release_item(target, member, source)
  local bytes = #member - pid_end(member) + 1
  redis.call('ZREM', key('${KEYS.mailboxItems}', target), member)
  redis.call('HINCRBY', key('${KEYS.mailbox}', target), 'items', -1)
  redis.call('HINCRBY', key('${KEYS.mailbox}', target), 'bytes', -bytes)
  local usage = key('${KEYS.usage}')
  redis.call('HINCRBY', usage, 'activeItems', -1)
  redis.call('HINCRBY', usage, 'activeBytes', -bytes)
  local shares = key('${KEYS.mailboxShares}', target)
  if redis.call('HINCRBY', shares, 'i' .. source, -1) == 0 then redis.call('HDEL', shares, 'i' .. source, 'b' .. source)
  else redis.call('HINCRBY', shares, 'b' .. source, -bytes) end
  redis.call('HINCRBY', key('${KEYS.sender}', source), 'items', -1)
  redis.call('HINCRBY', key('${KEYS.sender}', source), 'bytes', -bytes)
  forget_if_idle(source)
end
local function release_receipt(pid, receipt)
  redis.call('HDEL', key('${KEYS.receipts}'), pid)
  redis.call('ZREM', key('${KEYS.receiptExpiry}'), pid)
  local usage = key('${KEYS.usage}')
  redis.call('HINCRBY', usage, 'receipts', -1)
  redis.call('HINCRBY', usage, 'receiptBytes', -tonumber(receipt.bytes))
  redis.call('HINCRBY', key('${KEYS.sender}', receipt.source), 'receipts', -1)
  redis.call('HINCRBY', key('${KEYS.sender}', receipt.source), 'receiptBytes', -tonumber(receipt.bytes))
  forget_if_idle(receipt.source)
end
-- Drops an endpoint's mailbox: 'd' for a retired endpoint (a resend is a conflict), 'e' for a
-- reaped or reclaimed one (its mail expired: its receipts kept a retention from now). Its items are
-- read a few at a time (each holds its text).
local function drop(id, state, now)
  local items = key('${KEYS.mailboxItems}', id)
  repeat
    local members = redis.call('ZRANGE', items, 0, ${DROP_PAGE - 1})
    for _, member in ipairs(members) do
      local pid = string.sub(member, 1, pid_end(member) - 1)
      local packed = redis.call('HGET', key('${KEYS.receipts}'), pid)
      release_item(id, member, receipt_of(packed).source)
      set_state(pid, packed, state)
      if state == 'e' then redis.call('ZADD', key('${KEYS.receiptExpiry}'), fmt(now), pid) end
    end
  until #members == 0
  redis.call('DEL', key('${KEYS.mailbox}', id), items, key('${KEYS.mailboxShares}', id))
  redis.call('SREM', key('${KEYS.mailboxes}'), id)
end
`;

/** Removing a registration (reaped, or reclaimed under contention): its mailbox expires with it, its watch is answered. */
const REMOVE = `
local function remove_registration(id, now)
  local r = record(key('${KEYS.registration}', id))
  redis.call('ZREM', key('${KEYS.ends}'), id)
  redis.call('ZREM', key('${KEYS.fresh}'), id)
  redis.call('ZREM', key('${KEYS.seen}'), id)
  if r then
    local usage = key('${KEYS.usage}')
    redis.call('DEL', key('${KEYS.registration}', id))
    redis.call('HINCRBY', usage, 'registrations', -1)
    redis.call('HINCRBY', usage, 'metadataBytes', -tonumber(r.size))
    if redis.call('HGET', key('${KEYS.sessions}'), r.session) == id then redis.call('HDEL', key('${KEYS.sessions}'), r.session) end
    local field = retired_field(r.session, r.generation)
    if redis.call('HGET', key('${KEYS.retired}'), field) == id then redis.call('HDEL', key('${KEYS.retired}'), field) end
  end
  drop(id, 'e', now)
  redis.call('PUBLISH', key('${KEYS.bell}', id), 'r')
  return r ~= nil
end
-- The registration a new one may take the place of (registry.ts, reclaimable), never keep: an
-- ended one holding no mail (oldest end first); else the first-made never-used live one once its
-- grace is over; else the live one idle longest, once idle long enough; else an ended one holding
-- mail. Each set is read a page at a time (a script holds Redis): the first page nearly always decides.
local function reclaim_victim(now, keep)
  local pinning = nil
  local ended = function(offset) return redis.call('ZRANGEBYSCORE', key('${KEYS.ends}'), '-inf', fmt(now), 'LIMIT', fmt(offset), '${RECLAIM_SCAN_PAGE}') end
  local fresh = function(offset) return redis.call('ZRANGE', key('${KEYS.fresh}'), offset, offset + ${RECLAIM_SCAN_PAGE - 1}) end
  local idle = function(offset) return redis.call('ZRANGEBYSCORE', key('${KEYS.seen}'), '-inf', fmt(now - ${relayRegistrationIdleMs}), 'LIMIT', fmt(offset), '${RECLAIM_SCAN_PAGE}') end
  -- Calls visit(id) for each id of the set, page by page, until it answers 'take' (that id is the
  -- victim) or 'stop' (none of this set is).
  local function scan(page, visit)
    local offset = 0
    repeat
      local ids = page(offset)
      for _, id in ipairs(ids) do
        if id ~= keep then
          local verdict = visit(id)
          if verdict == 'take' then return id end
          if verdict == 'stop' then return nil end
        end
      end
      offset = offset + #ids
    until #ids < ${RECLAIM_SCAN_PAGE}
    return nil
  end
  local victim = scan(ended, function(id)
    if num(redis.call('HGET', key('${KEYS.mailbox}', id), 'items')) == 0 then return 'take' end
    pinning = pinning or id
    return 'skip'
  end)
  if victim then return victim end
  -- Ended ones were all seen above: below, the first live one decides.
  victim = scan(fresh, function(id)
    local r = record(key('${KEYS.registration}', id))
    if not r or not is_live(r, now) then return 'skip' end
    if now - tonumber(r.made) >= ${relayRegistrationGraceMs} then return 'take' end
    return 'stop'
  end)
  if victim then return victim end
  victim = scan(idle, function(id)
    local r = record(key('${KEYS.registration}', id))
    if r and is_live(r, now) then return 'take' end
    return 'skip'
  end)
  return victim or pinning
end
`;

/** Redis's replication id (INFO replication's `master_replid`), or '' where INFO is not allowed. */
const REPLICATION_ID = `
local function replication_id()
  local info = redis.pcall('INFO', 'replication')
  if type(info) ~= 'string' then return '' end
  return string.match(info, 'master_replid:(%x+)') or ''
end
`;

/**
 * Reads the epoch and the state's acceptance key, creating the epoch (ARGV[1], a fresh UUID) with
 * its lineage and layout for a new, empty state, and the key (ARGV[3], fresh random) for a state
 * that has none (a new one, or one replaced after a failover). A state of another layout
 * (`REDIS_LAYOUT`: one written by another version of the relay, or with no layout at all) is
 * answered `layout` and never read. No epoch check.
 */
const EPOCH = `${REPLICATION_ID}
local current = redis.call('GET', KEYS[1])
if not current then
  current = ARGV[1]
  redis.call('SET', KEYS[1], current)
  redis.call('SET', ARGV[2] .. ':${KEYS.lineage}', replication_id())
  redis.call('SET', ARGV[2] .. ':${KEYS.layout}', '${REDIS_LAYOUT}')
end
local layout = redis.call('GET', ARGV[2] .. ':${KEYS.layout}')
if layout ~= '${REDIS_LAYOUT}' then return { 'layout', layout or '' } end
local acceptance_key = redis.call('GET', ARGV[2] .. ':${KEYS.acceptanceKey}')
if not acceptance_key then
  acceptance_key = ARGV[3]
  redis.call('SET', ARGV[2] .. ':${KEYS.acceptanceKey}', acceptance_key)
end
return { current, acceptance_key }
`;

/**
 * A failover: Redis's replication id is not the one the state began with (a promoted replica, whose
 * copy may lack what the old primary accepted last). The state is replaced by a new, empty one —
 * every key of the prefix deleted, a fresh epoch (ARGV[4]) and lineage — so every relay answers
 * RELAY_RESET and its clients re-send what they hold, instead of mail being lost silently. A state
 * from before lineages were kept takes the current id.
 */
const FAILOVER = `${REPLICATION_ID}
local replid = replication_id()
local lineage = redis.call('GET', key('${KEYS.lineage}'))
if replid ~= '' and lineage and lineage ~= '' and lineage ~= replid then
  local pattern = string.gsub(P, '[%*%?%[%]%\\\\]', '\\\\%0') .. '*'
  for _, k in ipairs(redis.call('KEYS', pattern)) do redis.call('DEL', k) end
  redis.call('SET', KEYS[1], ARGV[4])
  redis.call('SET', key('${KEYS.lineage}'), replid)
  redis.call('SET', key('${KEYS.layout}'), '${REDIS_LAYOUT}')
  return { 'replaced' }
end
if not lineage then redis.call('SET', key('${KEYS.lineage}'), replid) end
`;

/** ARGV: 3 session, 4 generation, 5 lease end, 6 now, 7 secret digest ('' none), 8 new endpoint id, 9 its size. */
const CONNECT = `${PRELUDE}${RELEASE}${REMOVE}
local session, generation, lease, now_text, secret, new_id = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local now, size = tonumber(now_text), tonumber(ARGV[9])
local current_id = redis.call('HGET', key('${KEYS.sessions}'), session)
local current = nil
if current_id then current = record(key('${KEYS.registration}', current_id)) end
if current and current.secret and (secret == '' or not same_digest(current.secret, secret)) then
  if is_live(current, now) then return { 'session-protected', current.lease } end
  if current.generation == generation and current.state ~= 'superseded' then
    if secret == '' then return { 'secret-missing' } end
    return { 'secret-mismatch' }
  end
end
if current and current.generation == generation and current.state ~= 'superseded' then
  local k = key('${KEYS.registration}', current_id)
  redis.call('HSET', k, 'lease', lease, 'state', 'active')
  redis.call('HDEL', k, 'retiredAt')
  if secret ~= '' then redis.call('HSET', k, 'secret', secret) end
  redis.call('ZADD', key('${KEYS.ends}'), lease, current_id)
  return { 'connected', current_id, session, 'active', lease }
end
if redis.call('HEXISTS', key('${KEYS.retired}'), retired_field(session, generation)) == 1 then return { 'generation-retired' } end
local usage = key('${KEYS.usage}')
local registrations = num(redis.call('HGET', usage, 'registrations'))
local metadata = num(redis.call('HGET', usage, 'metadataBytes'))
-- Under contention a place is taken back from a registration that makes no use of it.
while registrations + 1 > ${maxRelayRegistrations} or metadata + size > ${maxRelayMetadataBytes} do
  local victim = reclaim_victim(now, current_id)
  if not victim then return { 'full', 'registrations', fmt(registrations), 'metadataBytes', fmt(metadata) } end
  remove_registration(victim, now)
  registrations = num(redis.call('HGET', usage, 'registrations'))
  metadata = num(redis.call('HGET', usage, 'metadataBytes'))
end
local k = key('${KEYS.registration}', new_id)
redis.call('HSET', k, 'session', session, 'generation', generation, 'lease', lease, 'state', 'active', 'size', fmt(size), 'made', now_text, 'p', pack_id(new_id))
if secret ~= '' then redis.call('HSET', k, 'secret', secret) end
redis.call('HINCRBY', usage, 'registrations', 1)
redis.call('HINCRBY', usage, 'metadataBytes', size)
redis.call('ZADD', key('${KEYS.ends}'), lease, new_id)
-- Scored by a serial, so the oldest never-used registration is the first made (as in memory).
redis.call('ZADD', key('${KEYS.fresh}'), fmt(redis.call('INCR', key('${KEYS.mintSerial}'))), new_id)
if current then
  redis.call('HSET', key('${KEYS.registration}', current_id), 'state', 'superseded', 'retiredAt', now_text, 'successor', new_id)
  redis.call('ZADD', key('${KEYS.ends}'), now_text, current_id)
  redis.call('HSET', key('${KEYS.retired}'), retired_field(session, current.generation), current_id)
  -- The old generation is retired: its mailbox can never be received again.
  drop(current_id, 'd', now)
  redis.call('PUBLISH', key('${KEYS.bell}', current_id), 'r')
end
redis.call('HSET', key('${KEYS.sessions}'), session, new_id)
return { 'connected', new_id, session, 'active', lease }
`;

/**
 * ARGV: 3 caller session, 4 endpoint id, 5 secret digest ('' none), 6 now ('' none). A binding that
 * passes — the caller's own live registration, its secret ok — is recorded as its use (at most every
 * relayActivityResolutionMs), which keeps it from being reclaimed.
 */
/**
 * The binding lookup as a function: the caller's session known, the endpoint's registration and how
 * the presented secret digest matches; with `now_text`, a passing binding records the use.
 */
const BIND_FUNCTION = `
local function binding_of(session, id, secret, now_text)
  local known = tostring(redis.call('HEXISTS', key('${KEYS.sessions}'), session))
  local k = key('${KEYS.registration}', id)
  local r = record(k)
  if not r then return { 'binding', known, 'ok' } end
  r.id = id
  bound_record = r
  local match = 'ok'
  if not r.secret then
    if secret ~= '' then match = 'mismatch' end
  elseif secret == '' then match = 'missing'
  elseif not same_digest(r.secret, secret) then match = 'mismatch' end
  if now_text ~= '' and match == 'ok' and r.session == session then
    local now = tonumber(now_text)
    if is_live(r, now) and (not r.active or now - tonumber(r.active) >= ${relayActivityResolutionMs}) then
      redis.call('HSET', k, 'active', now_text)
      redis.call('ZREM', key('${KEYS.fresh}'), id)
      redis.call('ZADD', key('${KEYS.seen}'), now_text, id)
    end
  end
  return { 'binding', known, match, id, r.session, r.state, r.lease }
end
`;

/** ARGV: 3 session, 4 endpoint id, 5 secret digest ('' none), 6 now ('' to record no use). */
const BINDING = `${PRELUDE}${BIND_FUNCTION}
return binding_of(ARGV[3], ARGV[4], ARGV[5], ARGV[6])
`;

/** ARGV: 3 endpoint id. */
const REGISTRATION = `${PRELUDE}
local r = record(key('${KEYS.registration}', ARGV[3]))
if not r then return { 'none' } end
return found(ARGV[3], r)
`;

/** ARGV: 3 endpoint id, 4 now. Follows the chain of successors (with a cycle guard). */
const SUCCESSOR = `${PRELUDE}
local start, id = ARGV[3], ARGV[3]
local r = record(key('${KEYS.registration}', id))
local seen = {}
while r and r.state == 'superseded' and r.successor do
  if seen[id] then return { 'none' } end
  seen[id] = true
  id = r.successor
  r = record(key('${KEYS.registration}', id))
end
if r and id ~= start and is_live(r, tonumber(ARGV[4])) then return found(id, r) end
return { 'none' }
`;

/** ARGV: 3 endpoint id, 4 now. */
const DISCONNECT = `${PRELUDE}
local k = key('${KEYS.registration}', ARGV[3])
local r = record(k)
if not r then return { 'none' } end
if r.state == 'superseded' then redis.call('HDEL', key('${KEYS.retired}'), retired_field(r.session, r.generation)) end
redis.call('HSET', k, 'lease', ARGV[4], 'state', 'disconnected', 'retiredAt', ARGV[4])
redis.call('ZADD', key('${KEYS.ends}'), ARGV[4], ARGV[3])
redis.call('PUBLISH', key('${KEYS.bell}', ARGV[3]), 'r')
return { 'disconnected' }
`;

/** ARGV: 3 session. */
const SESSION = `${PRELUDE}
local id = redis.call('HGET', key('${KEYS.sessions}'), ARGV[3])
if not id then return { 'none' } end
local r = record(key('${KEYS.registration}', id))
if not r then return { 'none' } end
return found(id, r)
`;

/** ARGV: 3 now. Every session's current registration that is live, four strings each. */
const LIVE = `${PRELUDE}
local now = tonumber(ARGV[3])
local flat = redis.call('HGETALL', key('${KEYS.sessions}'))
local out = { 'live' }
for i = 2, #flat, 2 do
  local r = record(key('${KEYS.registration}', flat[i]))
  if r and is_live(r, now) then
    out[#out + 1] = flat[i]
    out[#out + 1] = r.session
    out[#out + 1] = r.state
    out[#out + 1] = r.lease
  end
end
return out
`;

/**
 * The sender's shares an admission of item_bytes and receipt_bytes would exceed (budgets.ts
 * `quotaOf`, in its order), as a reply, or nil.
 */
const QUOTA = `
local function quota_refusal(source, target, item_bytes, receipt_bytes)
  local share = redis.call('HMGET', key('${KEYS.mailboxShares}', target), 'i' .. source, 'b' .. source)
  local share_items, share_bytes = num(share[1]), num(share[2])
  if share_items + 1 > ${maxRelaySenderMailboxItems} or share_bytes + item_bytes > ${maxRelaySenderMailboxBytes} then
    return { 'quota', 'mailbox-share', 'items', fmt(share_items), 'bytes', fmt(share_bytes) }
  end
  local u = redis.call('HMGET', key('${KEYS.sender}', source), 'items', 'bytes', 'receipts', 'receiptBytes')
  local items, bytes, receipts, receipt_total = num(u[1]), num(u[2]), num(u[3]), num(u[4])
  if items + 1 > ${maxRelaySenderActiveItems} or bytes + item_bytes > ${maxRelaySenderActiveBytes} then
    return { 'quota', 'sender-active', 'items', fmt(items), 'bytes', fmt(bytes) }
  end
  if receipts + 1 > ${maxRelaySenderReceipts} or receipt_total + receipt_bytes > ${maxRelaySenderReceiptBytes} then
    return { 'quota', 'sender-receipts', 'receipts', fmt(receipts), 'bytes', fmt(receipt_total) }
  end
  return nil
end
`;

/** The admission as a function: the steps of `AdmitOutcome`, in order. */
const ADMIT_FUNCTION = `
local function admit(pid, digest, text, target_id, receipt_bytes_text, fresh, now_text, source)
  local target = redis.call('HMGET', key('${KEYS.registration}', target_id), 'state', 'lease', 'p')
  if target[1] ~= 'active' or tonumber(target[2]) <= tonumber(now_text) then return { 'target-not-live' } end
  local earlier = redis.call('HGET', key('${KEYS.receipts}'), pid)
  if earlier then
    local receipt = receipt_of(earlier)
    if receipt.digest ~= pack_id(digest) or receipt.state == 'd' then return { 'conflict' } end
    if receipt.state == 'e' then return { 'expired' } end
    return { 'accepted', '1', fmt(tonumber(redis.call('ZSCORE', key('${KEYS.receiptExpiry}'), pid))) }
  end
  if fresh ~= '1' then return { 'stale' } end
  local box = key('${KEYS.mailbox}', target_id)
  local counts = redis.call('HMGET', box, 'highest', 'items', 'bytes')
  local highest, items, bytes = num(counts[1]), num(counts[2]), num(counts[3])
  local cursor = highest + 1
  if cursor > ${maxRedisCursor} then return { 'full', 'cursor', 'items', fmt(items) } end
  local item_bytes, receipt_bytes = #text, tonumber(receipt_bytes_text)
  local refusal = quota_refusal(source, target_id, item_bytes, receipt_bytes)
  if refusal then return refusal end
  if items + 1 > ${maxRelayMailboxItems} or bytes + item_bytes > ${maxRelayMailboxBytes} then
    return { 'full', 'mailbox', 'items', fmt(items), 'bytes', fmt(bytes) }
  end
  local usage = key('${KEYS.usage}')
  local totals = redis.call('HMGET', usage, 'activeItems', 'activeBytes', 'receipts', 'receiptBytes')
  local active_items, active_bytes, receipts, receipt_total = num(totals[1]), num(totals[2]), num(totals[3]), num(totals[4])
  if active_items + 1 > ${maxRelayActiveItems} or active_bytes + item_bytes > ${maxRelayActiveBytes} then
    return { 'full', 'active', 'items', fmt(active_items), 'bytes', fmt(active_bytes) }
  end
  if receipts + 1 > ${maxRelayReceipts} or receipt_total + receipt_bytes > ${maxRelayReceiptBytes} then
    return { 'full', 'receipts', 'receipts', fmt(receipts), 'bytes', fmt(receipt_total) }
  end
  redis.call('HSET', box, 'highest', fmt(cursor), 'items', fmt(items + 1), 'bytes', fmt(bytes + item_bytes))
  -- A mailbox with a highest cursor is in the set already (dropping or reaping one deletes both).
  if highest == 0 then redis.call('SADD', key('${KEYS.mailboxes}'), target_id) end
  redis.call('HSET', usage, 'activeItems', fmt(active_items + 1), 'activeBytes', fmt(active_bytes + item_bytes), 'receipts', fmt(receipts + 1), 'receiptBytes', fmt(receipt_total + receipt_bytes))
  redis.call('HINCRBY', key('${KEYS.mailboxShares}', target_id), 'i' .. source, 1)
  redis.call('HINCRBY', key('${KEYS.mailboxShares}', target_id), 'b' .. source, item_bytes)
  local sender = key('${KEYS.sender}', source)
  redis.call('HINCRBY', sender, 'items', 1)
  redis.call('HINCRBY', sender, 'bytes', item_bytes)
  redis.call('HINCRBY', sender, 'receipts', 1)
  redis.call('HINCRBY', sender, 'receiptBytes', receipt_bytes)
  redis.call('SADD', key('${KEYS.senders}'), source)
  redis.call('ZADD', key('${KEYS.mailboxItems}', target_id), fmt(cursor), pid .. text)
  redis.call('HSET', key('${KEYS.receipts}'), pid, pack_receipt('m', receipt_bytes_text, digest, target[3] or pack_id(target_id), packed_endpoint(source), fmt(cursor)))
  redis.call('ZADD', key('${KEYS.receiptExpiry}'), now_text, pid)
  redis.call('PUBLISH', key('${KEYS.bell}', target_id), 'r')
  return { 'accepted', '0', now_text }
end
`;

/**
 * ARGV: 3 packed envelope id, 4 digest, 5 text, 6 target id, 7 receipt bytes, 8 fresh ('1'/'0'),
 * 9 now, 10 source id. An acceptance answers whether it is a duplicate and when it was accepted
 * (its acceptance id is the relay's keyed hash of the envelope id: index.ts).
 */
const ADMIT = `${PRELUDE}${QUOTA}${ADMIT_FUNCTION}
return admit(ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10])
`;

/**
 * A bound operation in one round trip: the binding lookup (ARGV 3–6: session, endpoint id, secret
 * digest, now) and, when it passes — the caller known, its own live registration, its secret ok —
 * `call` (the operation's function, on ARGV 7…), its reply appended to the lookup's. A lookup that
 * does not pass does nothing more.
 */
function boundScript(functions: string, call: string): string {
  return `${PRELUDE}${functions}${BIND_FUNCTION}
local b = binding_of(ARGV[3], ARGV[4], ARGV[5], ARGV[6])
if not (b[2] == '1' and b[3] == 'ok' and b[5] == ARGV[3] and b[6] == 'active' and tonumber(b[7]) > tonumber(ARGV[6])) then return b end
for _, v in ipairs(${call}) do b[#b + 1] = v end
return b
`;
}

/** A send: ARGV 7–14 as ADMIT's 3–10. */
const BOUND_ADMIT = boundScript(
  `${QUOTA}${ADMIT_FUNCTION}`,
  "admit(ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14])",
);

/** A page as a function: the items after the cursor within the item and byte bounds. */
const PAGE_FUNCTION = `
local function page(id, after, limit_text)
  local limit = tonumber(limit_text)
  local highest = redis.call('HGET', key('${KEYS.mailbox}', id), 'highest') or '0'
  if cursor_after(after, highest) then return { 'cursor-ahead', highest } end
  local listed = redis.call('ZRANGEBYSCORE', key('${KEYS.mailboxItems}', id), '(' .. after, '+inf', 'WITHSCORES', 'LIMIT', '0', fmt(limit + 1))
  local count = #listed / 2
  -- The page's pieces, joined once at the end.
  local parts, total, taken, last = { '[' }, 0, 0, after
  while taken < count and taken < limit do
    local member = listed[taken * 2 + 1]
    local cursor, text = fmt(tonumber(listed[taken * 2 + 2])), string.sub(member, pid_end(member))
    local size = ${PAGE_ITEM_OVERHEAD_BYTES} + #cursor + #text
    if total + size > ${maxReceivePageBytes} then break end
    total = total + size
    if taken > 0 then parts[#parts + 1] = ',' end
    parts[#parts + 1] = '{"cursor":"'
    parts[#parts + 1] = cursor
    parts[#parts + 1] = '","envelope":'
    parts[#parts + 1] = text
    parts[#parts + 1] = '}'
    last = cursor
    taken = taken + 1
  end
  parts[#parts + 1] = ']'
  local more = '0'
  if taken < count then more = '1' end
  return { 'page', table.concat(parts), last, more }
end
`;

/** ARGV: 3 endpoint id, 4 cursor (well formed), 5 limit. */
const PAGE = `${PRELUDE}${PAGE_FUNCTION}
return page(ARGV[3], ARGV[4], ARGV[5])
`;

/** An acknowledgement as a function: by (packed) envelope id, of the endpoint's own mail. */
const ACKNOWLEDGE_FUNCTION = `
local function acknowledge(id, pid)
  local packed = redis.call('HGET', key('${KEYS.receipts}'), pid)
  if not packed then return { 'unknown' } end
  local receipt = receipt_of(packed)
  if receipt.target ~= packed_endpoint(id) or receipt.state == 'd' then return { 'unknown' } end
  if receipt.state == 'a' then return { 'acknowledged', '1' } end
  if receipt.state == 'e' then return { 'gone' } end
  local member = item_at(id, pid, receipt.cursor)
  if not member then return { 'gone' } end
  release_item(id, member, receipt.source)
  set_state(pid, packed, 'a')
  return { 'acknowledged', '0' }
end
`;

/** ARGV: 3 endpoint id, 4 packed envelope id. */
const ACKNOWLEDGE = `${PRELUDE}${RELEASE}${ACKNOWLEDGE_FUNCTION}
return acknowledge(ARGV[3], ARGV[4])
`;

/**
 * The doorbell's look. ARGV: 3 endpoint id, 4 cursor (well formed), 5 mode: 'park' (the first look
 * of a watch that will wait when nothing is pending: it takes a watch serial and announces it on the
 * endpoint's channel, so older watches of the endpoint are answered), 'first' (the first look of a
 * watch that will not wait) or 'final' (the look after the wait: no cursor check, as in memory).
 */
const LOOK = `${PRELUDE}
local id, after, mode = ARGV[3], ARGV[4], ARGV[5]
local highest = redis.call('HGET', key('${KEYS.mailbox}', id), 'highest') or '0'
if mode ~= 'final' and cursor_after(after, highest) then return { 'cursor-ahead', highest } end
local next_item = redis.call('ZRANGEBYSCORE', key('${KEYS.mailboxItems}', id), '(' .. after, '+inf', 'LIMIT', '0', '1')
local pending, serial = '0', '0'
if #next_item > 0 then pending = '1' end
if pending == '0' and mode == 'park' then
  serial = fmt(redis.call('INCR', key('${KEYS.watchSerial}')))
  redis.call('PUBLISH', key('${KEYS.bell}', id), 'w' .. serial)
end
return { 'watch', pending, highest, serial }
`;

/**
 * The budget audit of maintenance (budgets.ts `audit`): mailboxes against their items and shares,
 * the relay-wide counters against the mailboxes and the senders. Returns a violation reply, or nil.
 */
const AUDIT = `
local function audit()
  local usage = key('${KEYS.usage}')
  local sum_items, sum_bytes = 0, 0
  for _, id in ipairs(redis.call('SMEMBERS', key('${KEYS.mailboxes}'))) do
    local box = key('${KEYS.mailbox}', id)
    local items, bytes = num(redis.call('HGET', box, 'items')), num(redis.call('HGET', box, 'bytes'))
    if items < 0 or bytes < 0 then return { 'violation', 'mailbox usage is never negative', 'items', fmt(items), 'bytes', fmt(bytes) } end
    if items > ${maxRelayMailboxItems} or bytes > ${maxRelayMailboxBytes} then return { 'violation', 'mailbox usage stays within its bound', 'items', fmt(items), 'bytes', fmt(bytes) } end
    local listed = redis.call('ZCARD', key('${KEYS.mailboxItems}', id))
    if listed ~= items then return { 'violation', 'a mailbox counts the items it holds', 'items', fmt(items), 'listed', fmt(listed) } end
    local shares, share_items, share_bytes = redis.call('HGETALL', key('${KEYS.mailboxShares}', id)), 0, 0
    for i = 1, #shares, 2 do
      local value = tonumber(shares[i + 1])
      if string.sub(shares[i], 1, 1) == 'i' then
        if value <= 0 or value > ${maxRelaySenderMailboxItems} then return { 'violation', "a sender's share of a mailbox stays within its bound", 'items', fmt(value) } end
        share_items = share_items + value
      else share_bytes = share_bytes + value end
    end
    if share_items ~= items or share_bytes ~= bytes then
      return { 'violation', "a mailbox's usage is the sum of its senders' shares", 'items', fmt(items), 'bytes', fmt(bytes), 'shareItems', fmt(share_items), 'shareBytes', fmt(share_bytes) }
    end
    sum_items, sum_bytes = sum_items + items, sum_bytes + bytes
  end
  local active_items, active_bytes = num(redis.call('HGET', usage, 'activeItems')), num(redis.call('HGET', usage, 'activeBytes'))
  if sum_items ~= active_items or sum_bytes ~= active_bytes then
    return { 'violation', "relay-wide usage is the sum of the mailboxes' usage", 'activeItems', fmt(active_items), 'activeBytes', fmt(active_bytes), 'mailboxItems', fmt(sum_items), 'mailboxBytes', fmt(sum_bytes) }
  end
  local receipts, receipt_bytes = num(redis.call('HGET', usage, 'receipts')), num(redis.call('HGET', usage, 'receiptBytes'))
  if receipts < 0 or receipt_bytes < 0 then return { 'violation', 'receipt usage is never negative', 'receipts', fmt(receipts), 'bytes', fmt(receipt_bytes) } end
  local s = { 0, 0, 0, 0 }
  for _, source in ipairs(redis.call('SMEMBERS', key('${KEYS.senders}'))) do
    local u = redis.call('HMGET', key('${KEYS.sender}', source), 'items', 'bytes', 'receipts', 'receiptBytes')
    for i = 1, 4 do
      if num(u[i]) < 0 then return { 'violation', "a sender's usage is never negative", 'field', fmt(i), 'value', fmt(num(u[i])) } end
      s[i] = s[i] + num(u[i])
    end
    if num(u[1]) > ${maxRelaySenderActiveItems} or num(u[2]) > ${maxRelaySenderActiveBytes} or num(u[3]) > ${maxRelaySenderReceipts} or num(u[4]) > ${maxRelaySenderReceiptBytes} then
      return { 'violation', "a sender's usage stays within its shares", 'items', fmt(num(u[1])), 'bytes', fmt(num(u[2])), 'receipts', fmt(num(u[3])), 'receiptBytes', fmt(num(u[4])) }
    end
  end
  if s[1] ~= active_items or s[2] ~= active_bytes or s[3] ~= receipts or s[4] ~= receipt_bytes then
    return { 'violation', "relay-wide usage is the sum of the senders' usage", 'activeItems', fmt(active_items), 'activeBytes', fmt(active_bytes), 'receipts', fmt(receipts), 'receiptBytes', fmt(receipt_bytes), 'senderItems', fmt(s[1]), 'senderBytes', fmt(s[2]), 'senderReceipts', fmt(s[3]), 'senderReceiptBytes', fmt(s[4]) }
  end
  return nil
end
`;

/**
 * ARGV: 3 now, 4 a fresh epoch (taken only after a failover). Replaces the state after a failover;
 * otherwise expires queued mail past its lifetime and receipts past their retention, reaps
 * registrations, then audits the budgets and shares.
 */
const MAINTAIN = `${PRELUDE}${RELEASE}${REMOVE}${AUDIT}${FAILOVER}
local now = tonumber(ARGV[3])
local reaped, expired, expired_mail = 0, 0, 0
-- Receipts past retention (an expired one's counted from its expiry): a queued one's mail expires
-- once past its lifetime (and its receipt stays a retention from now); any other receipt goes.
-- A queued receipt's score is its acceptance.
local due = redis.call('ZRANGEBYSCORE', key('${KEYS.receiptExpiry}'), '-inf', fmt(now - ${relayReceiptRetentionMs}), 'WITHSCORES')
for i = 1, #due, 2 do
  local pid = due[i]
  local packed = redis.call('HGET', key('${KEYS.receipts}'), pid)
  if not packed then
    redis.call('ZREM', key('${KEYS.receiptExpiry}'), pid)
  else
    local receipt = receipt_of(packed)
    if receipt.state ~= 'm' then
      release_receipt(pid, receipt)
      expired = expired + 1
    elseif now - tonumber(due[i + 1]) >= ${relayMailLifetimeMs} then
      local target = unpack_id(receipt.target, 1)
      local member = item_at(target, pid, receipt.cursor)
      if member then release_item(target, member, receipt.source) end
      set_state(pid, packed, 'e')
      redis.call('ZADD', key('${KEYS.receiptExpiry}'), fmt(now), pid)
      expired_mail = expired_mail + 1
    end
  end
end
-- Ended registrations: reaped a retention after they ended, or a mail lifetime after when they pin mail.
for _, id in ipairs(redis.call('ZRANGEBYSCORE', key('${KEYS.ends}'), '-inf', fmt(now - ${relayRegistrationRetentionMs}))) do
  local ended = tonumber(redis.call('ZSCORE', key('${KEYS.ends}'), id))
  if num(redis.call('HGET', key('${KEYS.mailbox}', id), 'items')) == 0 or now - ended >= ${relayMailLifetimeMs} then
    if remove_registration(id, now) then reaped = reaped + 1 end
  end
end
local violation = audit()
if violation then return violation end
return { 'maintained', fmt(reaped), fmt(expired), fmt(expired_mail) }
`;

/** No ARGV beyond the prefix. */
const USAGE = `${PRELUDE}
local u = record(key('${KEYS.usage}')) or {}
local function field(name) return fmt(num(u[name])) end
return {
  'usage', field('activeItems'), field('activeBytes'), field('receipts'), field('receiptBytes'), field('registrations'),
  fmt(redis.call('HLEN', key('${KEYS.sessions}'))), field('metadataBytes'), fmt(redis.call('ZCARD', key('${KEYS.receiptExpiry}'))),
}
`;

/** A receive: ARGV 7 cursor, 8 limit (the endpoint is the binding's). */
const BOUND_PAGE = boundScript(PAGE_FUNCTION, "page(ARGV[4], ARGV[7], ARGV[8])");

/** An acknowledgement: ARGV 7 packed envelope id (the endpoint is the binding's). */
const BOUND_ACKNOWLEDGE = boundScript(`${RELEASE}${ACKNOWLEDGE_FUNCTION}`, "acknowledge(ARGV[4], ARGV[7])");

/**
 * `ack-batch-v1`: ARGV 7… the packed envelope ids, each acknowledged on its own (as ACKNOWLEDGE), their
 * outcomes two fields each, in order: the kind and the duplicate flag ('' when not acknowledged).
 */
const ACKNOWLEDGE_EACH = `
local function acknowledge_each(id)
  local out = {}
  for i = 7, #ARGV do
    local a = acknowledge(id, ARGV[i])
    out[#out + 1] = a[1]
    out[#out + 1] = a[2] or ''
  end
  return out
end
`;
const BOUND_ACKNOWLEDGE_BATCH = boundScript(`${RELEASE}${ACKNOWLEDGE_FUNCTION}${ACKNOWLEDGE_EACH}`, "acknowledge_each(ARGV[4])");

/** Script arguments of one admission (ADMIT's ARGV 3–10). */
export const ADMIT_ARGS = 8;

/**
 * `send-batch-v1` / `ack-carry-v1`: ARGV 7 the number of admissions n, then n × ADMIT_ARGS
 * admission arguments (as ADMIT's 3–10), then the packed envelope ids to acknowledge. Each admission
 * on its own, in order; one to a target already refused (or skipped) in this script is skipped. Reply: each
 * admission's reply prefixed by its length ('skipped' alone when skipped); then, only if every one
 * was accepted, two fields per acknowledged id as ACKNOWLEDGE_EACH.
 */
const ADMIT_EACH = `
local function admit_each(id)
  local n = tonumber(ARGV[7])
  local out = {}
  local refused = {}
  local all = true
  for i = 0, n - 1 do
    local a = 8 + i * ${ADMIT_ARGS}
    local r
    if refused[ARGV[a + 3]] then r = { 'skipped' } else
      r = admit(ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7])
    end
    if r[1] ~= 'accepted' then refused[ARGV[a + 3]] = true; all = false end
    out[#out + 1] = tostring(#r)
    for _, v in ipairs(r) do out[#out + 1] = v end
  end
  if all then
    for i = 8 + n * ${ADMIT_ARGS}, #ARGV do
      local k = acknowledge(id, ARGV[i])
      out[#out + 1] = k[1]
      out[#out + 1] = k[2] or ''
    end
  end
  return out
end
`;
const BOUND_ADMIT_EACH = boundScript(`${QUOTA}${ADMIT_FUNCTION}${RELEASE}${ACKNOWLEDGE_FUNCTION}${ADMIT_EACH}`, "admit_each(ARGV[4])");

function script(name: string, source: string): RedisScript {
  return { name, source, sha: createHash("sha1").update(source).digest("hex") };
}

export const SCRIPTS = {
  epoch: script("epoch", EPOCH),
  connect: script("connect", CONNECT),
  binding: script("binding", BINDING),
  registration: script("registration", REGISTRATION),
  successor: script("successor", SUCCESSOR),
  disconnect: script("disconnect", DISCONNECT),
  session: script("session", SESSION),
  live: script("live", LIVE),
  admit: script("admit", ADMIT),
  boundAdmit: script("boundAdmit", BOUND_ADMIT),
  boundPage: script("boundPage", BOUND_PAGE),
  boundAcknowledge: script("boundAcknowledge", BOUND_ACKNOWLEDGE),
  boundAcknowledgeBatch: script("boundAcknowledgeBatch", BOUND_ACKNOWLEDGE_BATCH),
  boundAdmitEach: script("boundAdmitEach", BOUND_ADMIT_EACH),
  page: script("page", PAGE),
  acknowledge: script("acknowledge", ACKNOWLEDGE),
  look: script("look", LOOK),
  maintain: script("maintain", MAINTAIN),
  usage: script("usage", USAGE),
} as const;

/** The commands the relay sends outside its scripts: the scripts themselves, the guard's and the doorbell's (connecting is HELLO, which Redis allows every user). */
const LINK_COMMANDS = ["EVAL", "EVALSHA", "CONFIG|GET", "SUBSCRIBE", "UNSUBSCRIBE"] as const;

/**
 * Every Redis command the relay uses — those above and every command its scripts call (read from
 * their sources) — sorted: what a Redis ACL user for the relay needs, and nothing more
 * (docs/multi-machine.md; tests/redis/tls-acl.test.ts starts a relay with exactly these).
 */
export const RELAY_REDIS_COMMANDS: readonly string[] = [
  ...new Set([
    ...LINK_COMMANDS,
    ...Object.values(SCRIPTS).flatMap((script) => [...script.source.matchAll(/redis\.p?call\('([A-Z]+)'/g)].map((match) => match[1]!)),
  ]),
].sort();
