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
 * The rules are the memory store's (registry.ts, mailbox.ts, budgets.ts), step for step; the
 * bounds come from limits.ts, written into the sources here.
 */
import { utf8Bytes } from "../../../protocol/canonical-json.ts";
import {
  receivePageMaxBytes,
  redisMaxCursor,
  relayMaxActiveBytes,
  relayMaxActiveItems,
  relayMaxMailboxBytes,
  relayMaxMailboxItems,
  relayMaxMetadataBytes,
  relayMaxReceiptBytes,
  relayMaxReceipts,
  relayMaxRegistrations,
  relayReceiptRetentionMs,
  relayRegistrationRetentionMs,
} from "../../../protocol/limits.ts";
import { KEYS } from "./keys.ts";

export interface RedisScript {
  readonly name: string;
  readonly source: string;
  /** SHA-1 of the source (EVALSHA). */
  readonly sha: string;
}

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
local function receipt_of(packed)
  local state, acceptance, target, cursor, accepted, bytes, digest = string.match(packed, '^(%a)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
  return { state = state, acceptance = acceptance, target = target, cursor = cursor, accepted = accepted, bytes = bytes, digest = digest }
end
local function found(id, r) return { 'found', id, r.session, r.state, r.lease } end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return { 'replaced' } end
`;

/** Drops a retired endpoint's mailbox: frees its budgets and marks its receipts dropped. */
const DROP = `
local function drop(id)
  local usage = key('${KEYS.usage}')
  for _, envelope_id in ipairs(redis.call('ZRANGE', key('${KEYS.mailboxItems}', id), 0, -1)) do
    redis.call('HINCRBY', usage, 'activeItems', -1)
    redis.call('HINCRBY', usage, 'activeBytes', -redis.call('HSTRLEN', key('${KEYS.mailboxTexts}', id), envelope_id))
    local packed = redis.call('HGET', key('${KEYS.receipts}'), envelope_id)
    if packed then redis.call('HSET', key('${KEYS.receipts}'), envelope_id, 'd' .. string.sub(packed, 2)) end
  end
  redis.call('DEL', key('${KEYS.mailbox}', id), key('${KEYS.mailboxItems}', id), key('${KEYS.mailboxTexts}', id))
  redis.call('SREM', key('${KEYS.mailboxes}'), id)
end
`;

/** Reads the epoch, creating it (ARGV[1], a fresh UUID) for a new, empty state. No epoch check. */
const EPOCH = `
local current = redis.call('GET', KEYS[1])
if current then return current end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`;

/** ARGV: 3 session, 4 generation, 5 lease end, 6 now, 7 secret digest ('' none), 8 new endpoint id, 9 its size. */
const CONNECT = `${PRELUDE}${DROP}
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
if registrations + 1 > ${relayMaxRegistrations} or metadata + size > ${relayMaxMetadataBytes} then
  return { 'full', 'registrations', fmt(registrations), 'metadataBytes', fmt(metadata) }
end
local k = key('${KEYS.registration}', new_id)
redis.call('HSET', k, 'session', session, 'generation', generation, 'lease', lease, 'state', 'active', 'size', fmt(size))
if secret ~= '' then redis.call('HSET', k, 'secret', secret) end
redis.call('HINCRBY', usage, 'registrations', 1)
redis.call('HINCRBY', usage, 'metadataBytes', size)
redis.call('ZADD', key('${KEYS.ends}'), lease, new_id)
if current then
  redis.call('HSET', key('${KEYS.registration}', current_id), 'state', 'superseded', 'retiredAt', now_text, 'successor', new_id)
  redis.call('ZADD', key('${KEYS.ends}'), now_text, current_id)
  redis.call('HSET', key('${KEYS.retired}'), retired_field(session, current.generation), current_id)
  -- The old generation is retired: its mailbox can never be received again.
  drop(current_id)
  redis.call('PUBLISH', key('${KEYS.bell}', current_id), 'r')
end
redis.call('HSET', key('${KEYS.sessions}'), session, new_id)
return { 'connected', new_id, session, 'active', lease }
`;

/** ARGV: 3 caller session, 4 endpoint id, 5 secret digest ('' none). */
const BINDING = `${PRELUDE}
local known = tostring(redis.call('HEXISTS', key('${KEYS.sessions}'), ARGV[3]))
local r = record(key('${KEYS.registration}', ARGV[4]))
if not r then return { 'binding', known, 'ok' } end
local secret, match = ARGV[5], 'ok'
if not r.secret then
  if secret ~= '' then match = 'mismatch' end
elseif secret == '' then match = 'missing'
elseif not same_digest(r.secret, secret) then match = 'mismatch' end
return { 'binding', known, match, ARGV[4], r.session, r.state, r.lease }
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
 * ARGV: 3 envelope id, 4 digest, 5 text, 6 target id, 7 receipt bytes, 8 fresh ('1'/'0'), 9 now,
 * 10 acceptance id (used when admitted). The steps of `AdmitOutcome`, in order.
 */
const ADMIT = `${PRELUDE}
local envelope_id, digest, text, target_id, receipt_bytes_text, now_text, acceptance = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[9], ARGV[10]
local target = redis.call('HMGET', key('${KEYS.registration}', target_id), 'state', 'lease')
if target[1] ~= 'active' or tonumber(target[2]) <= tonumber(now_text) then return { 'target-not-live' } end
local earlier = redis.call('HGET', key('${KEYS.receipts}'), envelope_id)
if earlier then
  local receipt = receipt_of(earlier)
  if receipt.digest ~= digest or receipt.state == 'd' then return { 'conflict' } end
  return { 'accepted', receipt.acceptance, '1' }
end
if ARGV[8] ~= '1' then return { 'stale' } end
local box = key('${KEYS.mailbox}', target_id)
local counts = redis.call('HMGET', box, 'highest', 'items', 'bytes')
local highest, items, bytes = num(counts[1]), num(counts[2]), num(counts[3])
local cursor = highest + 1
if cursor > ${redisMaxCursor} then return { 'full', 'cursor', 'items', fmt(items) } end
local item_bytes, receipt_bytes = #text, tonumber(receipt_bytes_text)
if items + 1 > ${relayMaxMailboxItems} or bytes + item_bytes > ${relayMaxMailboxBytes} then
  return { 'full', 'mailbox', 'items', fmt(items), 'bytes', fmt(bytes) }
end
local usage = key('${KEYS.usage}')
local totals = redis.call('HMGET', usage, 'activeItems', 'activeBytes', 'receipts', 'receiptBytes')
local active_items, active_bytes, receipts, receipt_total = num(totals[1]), num(totals[2]), num(totals[3]), num(totals[4])
if active_items + 1 > ${relayMaxActiveItems} or active_bytes + item_bytes > ${relayMaxActiveBytes} then
  return { 'full', 'active', 'items', fmt(active_items), 'bytes', fmt(active_bytes) }
end
if receipts + 1 > ${relayMaxReceipts} or receipt_total + receipt_bytes > ${relayMaxReceiptBytes} then
  return { 'full', 'receipts', 'receipts', fmt(receipts), 'bytes', fmt(receipt_total) }
end
redis.call('HSET', box, 'highest', fmt(cursor), 'items', fmt(items + 1), 'bytes', fmt(bytes + item_bytes))
-- A mailbox with a highest cursor is in the set already (dropping or reaping one deletes both).
if highest == 0 then redis.call('SADD', key('${KEYS.mailboxes}'), target_id) end
redis.call('HSET', usage, 'activeItems', fmt(active_items + 1), 'activeBytes', fmt(active_bytes + item_bytes), 'receipts', fmt(receipts + 1), 'receiptBytes', fmt(receipt_total + receipt_bytes))
redis.call('ZADD', key('${KEYS.mailboxItems}', target_id), fmt(cursor), envelope_id)
redis.call('HSET', key('${KEYS.mailboxTexts}', target_id), envelope_id, text)
redis.call('HSET', key('${KEYS.receipts}'), envelope_id, table.concat({ 'm', acceptance, target_id, fmt(cursor), now_text, receipt_bytes_text, digest }, '|'))
redis.call('ZADD', key('${KEYS.receiptExpiry}'), now_text, envelope_id)
redis.call('PUBLISH', key('${KEYS.bell}', target_id), 'r')
return { 'accepted', acceptance, '0' }
`;

/** ARGV: 3 endpoint id, 4 cursor (well formed), 5 limit. Items after the cursor within the item and byte bounds. */
const PAGE = `${PRELUDE}
local id, after, limit = ARGV[3], ARGV[4], tonumber(ARGV[5])
local highest = redis.call('HGET', key('${KEYS.mailbox}', id), 'highest') or '0'
if cursor_after(after, highest) then return { 'cursor-ahead', highest } end
local listed = redis.call('ZRANGEBYSCORE', key('${KEYS.mailboxItems}', id), '(' .. after, '+inf', 'WITHSCORES', 'LIMIT', '0', fmt(limit + 1))
local count = #listed / 2
local texts = {}
if count > 0 then
  local ids = {}
  for i = 1, math.min(count, limit) do ids[i] = listed[i * 2 - 1] end
  texts = redis.call('HMGET', key('${KEYS.mailboxTexts}', id), unpack(ids))
end
-- The page's pieces, joined once at the end.
local parts, total, taken, last = { '[' }, 0, 0, after
while taken < count and taken < limit do
  local cursor, text = fmt(tonumber(listed[taken * 2 + 2])), texts[taken + 1]
  local size = ${PAGE_ITEM_OVERHEAD_BYTES} + #cursor + #text
  if total + size > ${receivePageMaxBytes} then break end
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
`;

/** ARGV: 3 endpoint id, 4 envelope id. */
const ACKNOWLEDGE = `${PRELUDE}
local id, envelope_id = ARGV[3], ARGV[4]
local packed = redis.call('HGET', key('${KEYS.receipts}'), envelope_id)
if not packed then return { 'unknown' } end
local receipt = receipt_of(packed)
if receipt.target ~= id or receipt.state == 'd' then return { 'unknown' } end
if receipt.state == 'a' then return { 'acknowledged', '1' } end
local score = redis.call('ZSCORE', key('${KEYS.mailboxItems}', id), envelope_id)
if not score or fmt(tonumber(score)) ~= receipt.cursor then return { 'gone' } end
local bytes = redis.call('HSTRLEN', key('${KEYS.mailboxTexts}', id), envelope_id)
redis.call('ZREM', key('${KEYS.mailboxItems}', id), envelope_id)
redis.call('HDEL', key('${KEYS.mailboxTexts}', id), envelope_id)
redis.call('HINCRBY', key('${KEYS.mailbox}', id), 'items', -1)
redis.call('HINCRBY', key('${KEYS.mailbox}', id), 'bytes', -bytes)
local usage = key('${KEYS.usage}')
redis.call('HINCRBY', usage, 'activeItems', -1)
redis.call('HINCRBY', usage, 'activeBytes', -bytes)
redis.call('HSET', key('${KEYS.receipts}'), envelope_id, 'a' .. string.sub(packed, 2))
return { 'acknowledged', '0' }
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

/** ARGV: 3 now. Reaps registrations, expires receipts, then audits the budgets. */
const MAINTAIN = `${PRELUDE}
local now = tonumber(ARGV[3])
local usage = key('${KEYS.usage}')
local reaped, expired = 0, 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', key('${KEYS.ends}'), '-inf', fmt(now - ${relayRegistrationRetentionMs}))) do
  if num(redis.call('HGET', key('${KEYS.mailbox}', id), 'items')) == 0 then
    local r = record(key('${KEYS.registration}', id))
    redis.call('ZREM', key('${KEYS.ends}'), id)
    if r then
      redis.call('DEL', key('${KEYS.registration}', id))
      redis.call('HINCRBY', usage, 'registrations', -1)
      redis.call('HINCRBY', usage, 'metadataBytes', -tonumber(r.size))
      if redis.call('HGET', key('${KEYS.sessions}'), r.session) == id then redis.call('HDEL', key('${KEYS.sessions}'), r.session) end
      local field = retired_field(r.session, r.generation)
      if redis.call('HGET', key('${KEYS.retired}'), field) == id then redis.call('HDEL', key('${KEYS.retired}'), field) end
      reaped = reaped + 1
    end
    redis.call('DEL', key('${KEYS.mailbox}', id), key('${KEYS.mailboxItems}', id), key('${KEYS.mailboxTexts}', id))
    redis.call('SREM', key('${KEYS.mailboxes}'), id)
  end
end
-- A receipt past retention goes unless a mailbox item still pins it (then it is looked at again next time).
for _, envelope_id in ipairs(redis.call('ZRANGEBYSCORE', key('${KEYS.receiptExpiry}'), '-inf', fmt(now - ${relayReceiptRetentionMs}))) do
  local packed = redis.call('HGET', key('${KEYS.receipts}'), envelope_id)
  if not packed then
    redis.call('ZREM', key('${KEYS.receiptExpiry}'), envelope_id)
  elseif string.sub(packed, 1, 1) ~= 'm' then
    redis.call('HDEL', key('${KEYS.receipts}'), envelope_id)
    redis.call('ZREM', key('${KEYS.receiptExpiry}'), envelope_id)
    redis.call('HINCRBY', usage, 'receipts', -1)
    redis.call('HINCRBY', usage, 'receiptBytes', -tonumber(receipt_of(packed).bytes))
    expired = expired + 1
  end
end
local sum_items, sum_bytes = 0, 0
for _, id in ipairs(redis.call('SMEMBERS', key('${KEYS.mailboxes}'))) do
  local box = key('${KEYS.mailbox}', id)
  local items, bytes = num(redis.call('HGET', box, 'items')), num(redis.call('HGET', box, 'bytes'))
  if items < 0 or bytes < 0 then return { 'violation', 'mailbox usage is never negative', 'items', fmt(items), 'bytes', fmt(bytes) } end
  if items > ${relayMaxMailboxItems} or bytes > ${relayMaxMailboxBytes} then return { 'violation', 'mailbox usage stays within its bound', 'items', fmt(items), 'bytes', fmt(bytes) } end
  local listed = redis.call('ZCARD', key('${KEYS.mailboxItems}', id))
  if listed ~= items then return { 'violation', 'a mailbox counts the items it holds', 'items', fmt(items), 'listed', fmt(listed) } end
  sum_items, sum_bytes = sum_items + items, sum_bytes + bytes
end
local active_items, active_bytes = num(redis.call('HGET', usage, 'activeItems')), num(redis.call('HGET', usage, 'activeBytes'))
if sum_items ~= active_items or sum_bytes ~= active_bytes then
  return { 'violation', "relay-wide usage is the sum of the mailboxes' usage", 'activeItems', fmt(active_items), 'activeBytes', fmt(active_bytes), 'mailboxItems', fmt(sum_items), 'mailboxBytes', fmt(sum_bytes) }
end
local receipts, receipt_bytes = num(redis.call('HGET', usage, 'receipts')), num(redis.call('HGET', usage, 'receiptBytes'))
if receipts < 0 or receipt_bytes < 0 then return { 'violation', 'receipt usage is never negative', 'receipts', fmt(receipts), 'bytes', fmt(receipt_bytes) } end
return { 'maintained', fmt(reaped), fmt(expired) }
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

function script(name: string, source: string): RedisScript {
  return { name, source, sha: new Bun.CryptoHasher("sha1").update(source).digest("hex") };
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
  page: script("page", PAGE),
  acknowledge: script("acknowledge", ACKNOWLEDGE),
  look: script("look", LOOK),
  maintain: script("maintain", MAINTAIN),
  usage: script("usage", USAGE),
} as const;
