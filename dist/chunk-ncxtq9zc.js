import{__toESM,TaskError,maxReceivePageBytes,maxRelayActiveItems,maxRelayActiveBytes,maxRelayMailboxItems,maxRelayMailboxBytes,maxRelayReceipts,maxRelayReceiptBytes,relayReceiptOverheadBytes,relayReceiptRetentionMs,maxRelayRegistrations,maxRelayMetadataBytes,relayRegistrationOverheadBytes,relayRegistrationRetentionMs,relayWatchesPerEndpoint,redisConnectTimeoutMs,redisCommandTimeoutMs,maxRedisCursor,maxRelaySenderActiveItems,maxRelaySenderActiveBytes,maxRelaySenderMailboxItems,maxRelaySenderMailboxBytes,maxRelaySenderReceipts,maxRelaySenderReceiptBytes,relayMailLifetimeMs,relayRegistrationIdleMs,relayRegistrationGraceMs,relayActivityResolutionMs}from"./chunk-9pcxyzmk.js";import{violation,acceptanceIdOf,mintAcceptanceKey,stateReplaced,REDIS_PASSWORD_VARIABLE,REDIS_PASSWORD_FILE_VARIABLE,parseRedisUrl}from"./chunk-sme3re18.js";import{within}from"./chunk-r8kja52a.js";import{utf8Bytes,canonicalBytes}from"./chunk-g7jp9st8.js";import{createConnection}from"node:net";function unavailable(target,problem,cause){return new TaskError("REDIS_UNAVAILABLE",{message:`Redis at ${target.display} ${problem}`,details:{store:target.display,problem,...cause===void 0?{}:{cause:cause instanceof Error?cause.message:String(cause)}}})}function replied(target,command,reply){return new TaskError("REDIS_UNAVAILABLE",{message:`Redis at ${target.display} refused ${command}: ${reply}`,details:{store:target.display,command,reply}})}function errorReply(error){return error instanceof TaskError&&typeof error.details.reply==="string"?error.details.reply:void 0}function socketHost(target){return target.host.replace(/^\[|\]$/g,"")}async function acceptsTcp(target,timeoutMs){let socket=createConnection({host:socketHost(target),port:target.port}),attempt=new Promise((resolve)=>{socket.once("connect",()=>resolve(!0)),socket.once("error",()=>resolve(!1))}),accepted=await within(attempt,timeoutMs)===!0;return socket.destroy(),accepted}async function bounded(work,ms,timedOut){let outcome=await within(work.then((value)=>({value})),ms);if(outcome===void 0)throw timedOut();return outcome.value}async function explain(target,options,cause){if(await acceptsTcp(target,options.connectTimeoutMs)){let hint=target.tls?"TLS or credentials":`credentials (the password of ${REDIS_PASSWORD_FILE_VARIABLE} or ${REDIS_PASSWORD_VARIABLE}), the database number, or rediss:// for a TLS port`;return unavailable(target,`accepts connections but the Redis handshake failed: check the ${hint}`,cause)}return unavailable(target,`cannot be reached (nothing accepts connections there within ${options.connectTimeoutMs} ms)`,cause)}class RedisErrorReply extends Error{}var redisModule;async function loadRedis(){redisModule??=import("./chunk-b6c469zk.js").then((m)=>__toESM(m.default,1));try{return await redisModule}catch(error){throw redisModule=void 0,new TaskError("REDIS_CLIENT_MISSING",{details:{cause:error instanceof Error?error.message:String(error)}})}}async function clientFor(target,options){let{createClient,ErrorReply}=await loadRedis(),client=createClient({...target.username===void 0?{}:{username:target.username},...target.password===void 0?{}:{password:target.password},database:target.database,RESP:3,disableOfflineQueue:!0,disableClientInfo:!0,socket:{host:socketHost(target),port:target.port,connectTimeout:options.connectTimeoutMs,reconnectStrategy:!1,...target.tls?{tls:!0,...target.ca===void 0?{}:{ca:target.ca}}:{}}});client.on("error",()=>{return});let replied=(error)=>error instanceof ErrorReply?new RedisErrorReply(error.message):error;return{connection:{get ready(){return client.isReady},send:(command,args)=>client.sendCommand([command,...args]).catch((error)=>{throw replied(error)}),subscribe:(channel,listener)=>client.subscribe(channel,listener),unsubscribe:(channel)=>client.unsubscribe(channel),close:()=>client.destroy()},connect:()=>client.connect(),onEnd:(listener)=>client.on("terminated",listener)}}async function connect(target,options,onClose){let{connection,connect:open,onEnd}=await clientFor(target,options);try{await bounded(open(),options.connectTimeoutMs,()=>unavailable(target,`did not answer within ${options.connectTimeoutMs} ms`))}catch(error){throw connection.close(),error instanceof TaskError?error:await explain(target,options,error)}return onEnd((cause)=>onClose(connection,cause)),connection}async function sendOn(target,options,connected,command,args){try{return await bounded(connected.send(command,args),options.commandTimeoutMs,()=>unavailable(target,`did not answer ${command} within ${options.commandTimeoutMs} ms`))}catch(error){if(error instanceof TaskError)throw error;if(error instanceof RedisErrorReply)throw replied(target,command,error.message);throw unavailable(target,`failed ${command}`,error)}}function createRedisLink(target,options){let current,connecting,closed=!1;function lost(client,cause){if(current!==client)return;if(current=void 0,client.close(),!closed)options.onLost?.(unavailable(target,"closed the connection",cause))}async function client(){if(closed)throw unavailable(target,"is closed (the relay is stopping)");if(current?.ready===!0)return current;if(current!==void 0)lost(current);return connecting??=connect(target,options,lost).then((made)=>{if(connecting=void 0,closed)throw made.close(),unavailable(target,"is closed (the relay is stopping)");return current=made,made},(error)=>{throw connecting=void 0,error}),connecting}let sent=0;return{client,send:async(command,args)=>(sent+=1,sendOn(target,options,await client(),command,args)),sent:()=>sent,close(){closed=!0;let open=current;current=void 0,open?.close()}}}var RING="r",WATCH_PREFIX="w";function announce(channel,serial){if(!channel.newest.includes(serial))channel.newest=[...channel.newest,serial].sort((a,b)=>a-b).slice(-relayWatchesPerEndpoint);if(channel.newest.length<relayWatchesPerEndpoint)return;let oldestKept=channel.newest[0];for(let waiter of[...channel.waiters])if(waiter.serial<oldestKept)waiter.settle(!1)}function hear(channel,message){if(message===RING)for(let waiter of[...channel.waiters])waiter.settle(!0);else if(message.startsWith(WATCH_PREFIX))announce(channel,Number(message.slice(WATCH_PREFIX.length)))}function waitOn(channel,serial,waitMs,signal,holds){return new Promise((resolve)=>{let done=!1,timer=setTimeout(()=>settle(!1),waitMs),onAbort=()=>settle(!1),waiter={serial,settle};function settle(rang){if(done)return;done=!0,clearTimeout(timer),signal?.removeEventListener("abort",onAbort),channel.waiters.delete(waiter),resolve(rang)}if(signal?.aborted===!0||!holds(channel))return settle(!1);signal?.addEventListener("abort",onAbort,{once:!0}),channel.waiters.add(waiter),announce(channel,serial)})}function createSubscriber(target,options,events){let unsubscribing=new Map,link=createRedisLink(target,{...options,onLost:()=>events.onLost()});return{async subscribe(name){await unsubscribing.get(name);let client=await link.client();await bounded(client.subscribe(name,events.onMessage),options.commandTimeoutMs,()=>unavailable(target,`did not confirm SUBSCRIBE within ${options.commandTimeoutMs} ms`))},unsubscribe(name,subscribed){let done=subscribed.then(async()=>{let client=await link.client();await bounded(client.unsubscribe(name),options.commandTimeoutMs,()=>unavailable(target,"did not confirm UNSUBSCRIBE"))}).then(()=>{return},()=>{return}).finally(()=>{if(unsubscribing.get(name)===done)unsubscribing.delete(name)});unsubscribing.set(name,done)},forget:()=>unsubscribing.clear(),close:()=>link.close()}}function createChannels(){let channels=new Map,connection=0,closed=!1;function clear(){for(let channel of channels.values())for(let waiter of[...channel.waiters])waiter.settle(!1);channels.clear()}return{get closed(){return closed},get:(name)=>channels.get(name),join(name,subscribe){let channel=channels.get(name);if(channel===void 0){let created={name,connection,subscribed:Promise.resolve(),waiters:new Set,listeners:0,newest:[]};created.subscribed=subscribe(name).then(()=>{if(created.connection=connection,!closed&&!channels.has(name))channels.set(name,created)}),channels.set(name,created),channel=created}return channel.listeners+=1,channel},leave(channel){if(channel.listeners-=1,channel.listeners>0||channels.get(channel.name)!==channel)return!1;return channels.delete(channel.name),channel.connection===connection&&!closed},abandon(channel){if(channel.listeners-=1,channels.get(channel.name)===channel)channels.delete(channel.name)},holds:(channel)=>!closed&&channels.get(channel.name)===channel,lose(){connection+=1,clear()},close(){closed=!0,clear()},waiting:()=>[...channels.values()].reduce((sum,channel)=>sum+channel.waiters.size,0)}}function createRedisDoorbell(target,options,channelOf){let channels=createChannels(),subscriber=createSubscriber(target,options,{onLost(){channels.lose(),subscriber.forget()},onMessage(message,name){let channel=channels.get(name);if(channel!==void 0)hear(channel,message)}});function release(channel){if(channels.leave(channel))subscriber.unsubscribe(channel.name,channel.subscribed)}return{async listen(endpointId){if(channels.closed)throw unavailable(target,"is closed (the relay is stopping)");let name=channelOf(endpointId),listening=channels.join(name,(channelName)=>subscriber.subscribe(channelName));try{await listening.subscribed}catch(error){throw channels.abandon(listening),error}let released=!1;return{wait:(serial,waitMs,signal)=>waitOn(listening,serial,waitMs,signal,channels.holds),release(){if(released)return;released=!0,release(listening)}}},waiting:()=>channels.waiting(),close(){channels.close(),subscriber.close()}}}function configValue(reply,name){if(Array.isArray(reply)){let index=reply.indexOf(name);return index>=0&&index+1<reply.length?String(reply[index+1]):void 0}if(reply!==null&&typeof reply==="object"){let value=reply[name];return value===void 0||value===null?void 0:String(value)}return}async function readSettings(send){let values=[];for(let name of["save","appendonly","maxmemory-policy"]){let reply;try{reply=await send("CONFIG",["GET",name])}catch(error){let reply=errorReply(error);if(reply===void 0)throw error;return{ok:!1,problem:`CONFIG GET ${name} was refused (${reply})`}}let value=configValue(reply,name);if(value===void 0)return{ok:!1,problem:`CONFIG GET ${name} answered nothing`};values.push(value)}let[save,appendonly,eviction]=values;return{ok:!0,save,appendonly,eviction}}async function guardRedisConfig(target,send,options){let settings=await readSettings(send);if(!settings.ok){if(!options.allowPersistentStore)throw new TaskError("REDIS_PERSISTENT",{message:`cannot check that Redis at ${target.display} keeps its data in memory only: ${settings.problem}. Make sure it runs with save "" and appendonly no (and maxmemory-policy noeviction), then start the relay with --allow-persistent-store to skip this check.`,details:{store:target.display,problem:settings.problem}});options.notice(`Redis at ${target.display}: configuration not checked (${settings.problem}); starting because of --allow-persistent-store`);return}if(settings.eviction!=="noeviction")throw new TaskError("REDIS_EVICTS",{message:`Redis at ${target.display} runs with maxmemory-policy ${settings.eviction}: it may evict relay keys, which would corrupt mailboxes and budgets. Set maxmemory-policy noeviction (the default); a full Redis then refuses writes and the relay answers RELAY_UNAVAILABLE.`,details:{store:target.display,maxmemoryPolicy:settings.eviction}});if(!(settings.save.trim()!==""||settings.appendonly==="yes"))return;let how=`save ${JSON.stringify(settings.save)}, appendonly ${settings.appendonly}`;if(!options.allowPersistentStore)throw new TaskError("REDIS_PERSISTENT",{message:`Redis at ${target.display} persists to disk (${how}). The relay is memory-only: accepted mail must not outlive the store, and a Redis restart must be a new epoch (RELAY_RESET). Turn persistence off (redis-server --save "" --appendonly no, or CONFIG SET save "" and CONFIG SET appendonly no), or pass --allow-persistent-store if a persistent store is intended.`,details:{store:target.display,save:settings.save,appendonly:settings.appendonly}});options.notice(`Redis at ${target.display} persists to disk (${how}); starting because of --allow-persistent-store: a Redis restart then keeps the relay's state and epoch`)}var DEFAULT_REDIS_PREFIX="{pi-tasks}",REDIS_LAYOUT="2",KEYS={epoch:"epoch",lineage:"lineage",layout:"layout",usage:"usage",sessions:"sessions",retired:"retired",ends:"ends",fresh:"fresh",seen:"seen",registration:"reg:",mailbox:"mb:",mailboxItems:"mbz:",mailboxShares:"mbsh:",mailboxes:"mbs",sender:"snd:",senders:"snds",receipts:"rc",receiptExpiry:"rcexp",watchSerial:"watchserial",mintSerial:"mintserial",acceptanceKey:"acceptkey",bell:"bell:"};function redisKey(prefix,name,id=""){return`${prefix}:${name}${id}`}import{createHash}from"node:crypto";var RECLAIM_SCAN_PAGE=32,DROP_PAGE=16,PAGE_ITEM_OVERHEAD_BYTES=utf8Bytes('{"cursor":"","envelope":}'),PRELUDE=`
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
`,RELEASE=`
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
    local members = redis.call('ZRANGE', items, 0, ${DROP_PAGE-1})
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
`,REMOVE=`
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
  local fresh = function(offset) return redis.call('ZRANGE', key('${KEYS.fresh}'), offset, offset + ${RECLAIM_SCAN_PAGE-1}) end
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
`,REPLICATION_ID=`
local function replication_id()
  local info = redis.pcall('INFO', 'replication')
  if type(info) ~= 'string' then return '' end
  return string.match(info, 'master_replid:(%x+)') or ''
end
`,EPOCH=`${REPLICATION_ID}
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
`,FAILOVER=`${REPLICATION_ID}
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
`,CONNECT=`${PRELUDE}${RELEASE}${REMOVE}
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
`,BIND_FUNCTION=`
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
`,BINDING=`${PRELUDE}${BIND_FUNCTION}
return binding_of(ARGV[3], ARGV[4], ARGV[5], ARGV[6])
`,REGISTRATION=`${PRELUDE}
local r = record(key('${KEYS.registration}', ARGV[3]))
if not r then return { 'none' } end
return found(ARGV[3], r)
`,SUCCESSOR=`${PRELUDE}
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
`,DISCONNECT=`${PRELUDE}
local k = key('${KEYS.registration}', ARGV[3])
local r = record(k)
if not r then return { 'none' } end
if r.state == 'superseded' then redis.call('HDEL', key('${KEYS.retired}'), retired_field(r.session, r.generation)) end
redis.call('HSET', k, 'lease', ARGV[4], 'state', 'disconnected', 'retiredAt', ARGV[4])
redis.call('ZADD', key('${KEYS.ends}'), ARGV[4], ARGV[3])
redis.call('PUBLISH', key('${KEYS.bell}', ARGV[3]), 'r')
return { 'disconnected' }
`,SESSION=`${PRELUDE}
local id = redis.call('HGET', key('${KEYS.sessions}'), ARGV[3])
if not id then return { 'none' } end
local r = record(key('${KEYS.registration}', id))
if not r then return { 'none' } end
return found(id, r)
`,LIVE=`${PRELUDE}
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
`,QUOTA=`
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
`,ADMIT_FUNCTION=`
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
`,ADMIT=`${PRELUDE}${QUOTA}${ADMIT_FUNCTION}
return admit(ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10])
`;function boundScript(functions,call){return`${PRELUDE}${functions}${BIND_FUNCTION}
local b = binding_of(ARGV[3], ARGV[4], ARGV[5], ARGV[6])
if not (b[2] == '1' and b[3] == 'ok' and b[5] == ARGV[3] and b[6] == 'active' and tonumber(b[7]) > tonumber(ARGV[6])) then return b end
for _, v in ipairs(${call}) do b[#b + 1] = v end
return b
`}var BOUND_ADMIT=boundScript(`${QUOTA}${ADMIT_FUNCTION}`,"admit(ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14])"),PAGE_FUNCTION=`
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
`,PAGE=`${PRELUDE}${PAGE_FUNCTION}
return page(ARGV[3], ARGV[4], ARGV[5])
`,ACKNOWLEDGE_FUNCTION=`
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
`,ACKNOWLEDGE=`${PRELUDE}${RELEASE}${ACKNOWLEDGE_FUNCTION}
return acknowledge(ARGV[3], ARGV[4])
`,LOOK=`${PRELUDE}
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
`,AUDIT=`
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
`,MAINTAIN=`${PRELUDE}${RELEASE}${REMOVE}${AUDIT}${FAILOVER}
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
`,USAGE=`${PRELUDE}
local u = record(key('${KEYS.usage}')) or {}
local function field(name) return fmt(num(u[name])) end
return {
  'usage', field('activeItems'), field('activeBytes'), field('receipts'), field('receiptBytes'), field('registrations'),
  fmt(redis.call('HLEN', key('${KEYS.sessions}'))), field('metadataBytes'), fmt(redis.call('ZCARD', key('${KEYS.receiptExpiry}'))),
}
`,BOUND_PAGE=boundScript(PAGE_FUNCTION,"page(ARGV[4], ARGV[7], ARGV[8])"),BOUND_ACKNOWLEDGE=boundScript(`${RELEASE}${ACKNOWLEDGE_FUNCTION}`,"acknowledge(ARGV[4], ARGV[7])"),ACKNOWLEDGE_EACH=`
local function acknowledge_each(id)
  local out = {}
  for i = 7, #ARGV do
    local a = acknowledge(id, ARGV[i])
    out[#out + 1] = a[1]
    out[#out + 1] = a[2] or ''
  end
  return out
end
`,BOUND_ACKNOWLEDGE_BATCH=boundScript(`${RELEASE}${ACKNOWLEDGE_FUNCTION}${ACKNOWLEDGE_EACH}`,"acknowledge_each(ARGV[4])"),ADMIT_ARGS=8,ADMIT_EACH=`
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
`,BOUND_ADMIT_EACH=boundScript(`${QUOTA}${ADMIT_FUNCTION}${RELEASE}${ACKNOWLEDGE_FUNCTION}${ADMIT_EACH}`,"admit_each(ARGV[4])");function script(name,source){return{name,source,sha:createHash("sha1").update(source).digest("hex")}}var SCRIPTS={epoch:script("epoch",EPOCH),connect:script("connect",CONNECT),binding:script("binding",BINDING),registration:script("registration",REGISTRATION),successor:script("successor",SUCCESSOR),disconnect:script("disconnect",DISCONNECT),session:script("session",SESSION),live:script("live",LIVE),admit:script("admit",ADMIT),boundAdmit:script("boundAdmit",BOUND_ADMIT),boundPage:script("boundPage",BOUND_PAGE),boundAcknowledge:script("boundAcknowledge",BOUND_ACKNOWLEDGE),boundAcknowledgeBatch:script("boundAcknowledgeBatch",BOUND_ACKNOWLEDGE_BATCH),boundAdmitEach:script("boundAdmitEach",BOUND_ADMIT_EACH),page:script("page",PAGE),acknowledge:script("acknowledge",ACKNOWLEDGE),look:script("look",LOOK),maintain:script("maintain",MAINTAIN),usage:script("usage",USAGE)},LINK_COMMANDS=["EVAL","EVALSHA","CONFIG|GET","SUBSCRIBE","UNSUBSCRIBE"],RELAY_REDIS_COMMANDS=[...new Set([...LINK_COMMANDS,...Object.values(SCRIPTS).flatMap((script)=>[...script.source.matchAll(/redis\.p?call\('([A-Z]+)'/g)].map((match)=>match[1]))])].sort();function asReply(value,script){if(!Array.isArray(value)||value.length===0||!value.every((item)=>typeof item==="string"))throw violation("a store script answers a list of strings",{script:script.name,reply:Array.isArray(value)?`an array of ${value.length}`:typeof value});return value}function viewAt(reply,at){return{endpointId:reply[at],session:reply[at+1],state:reply[at+2],leaseExpiresAt:Number(reply[at+3])}}function numbersFrom(reply,at){let out={};for(let index=at;index+1<reply.length;index+=2)out[reply[index]]=Number(reply[index+1]);return out}function stringsFrom(reply,at){let out={};for(let index=at;index+1<reply.length;index+=2)out[reply[index]]=reply[index+1];return out}function createScripts(link,prefix){let epochKey=redisKey(prefix,KEYS.epoch),known;async function evaluate(script,args){try{return await link.send("EVALSHA",[script.sha,"1",epochKey,...args])}catch(error){if(!errorReply(error)?.startsWith("NOSCRIPT"))throw error;return await link.send("EVAL",[script.source,"1",epochKey,...args])}}async function runAgainst(state,script,args){let reply=asReply(await evaluate(script,[state.epoch,prefix,...args]),script);if(reply[0]==="replaced")throw stateReplaced();return reply}return{run:(script,...args)=>runAgainst(known,script,args),async runWithAcceptance(script,args){let state=known;return{reply:await runAgainst(state,script,args),acceptanceIdOf:(envelopeId)=>acceptanceIdOf(state.acceptanceKey,envelopeId)}},async readEpoch(){let fresh=mintAcceptanceKey(),reply=await evaluate(SCRIPTS.epoch,[crypto.randomUUID(),prefix,fresh]);if(Array.isArray(reply)&&reply[0]==="layout")throw new TaskError("REDIS_LAYOUT",{details:{prefix,layout:String(reply[1]),expected:REDIS_LAYOUT}});if(!Array.isArray(reply)||reply.length!==2||!reply.every((item)=>typeof item==="string"))throw violation("the epoch script answers the epoch and the acceptance key",{reply:String(reply)});let[epoch,acceptanceKey]=reply;return known={epoch,acceptanceKey},epoch}}}async function open(link,target,options,scripts){try{await link.client(),await guardRedisConfig(target,link.send,{allowPersistentStore:options.allowPersistentStore===!0,notice:options.onNotice??(()=>{return})}),await scripts.readEpoch()}catch(error){throw link.close(),error}}function lookupOf(reply){return{callerKnown:reply[1]==="1",secret:reply[2],registration:reply.length>3?viewAt(reply,3):void 0}}var BINDING_FIELDS=7;function found(reply){return reply[0]==="found"?viewAt(reply,1):void 0}function connectOutcome(reply){switch(reply[0]){case"connected":return{kind:"connected",registration:viewAt(reply,1)};case"session-protected":return{kind:"session-protected",leaseExpiresAt:Number(reply[1])};case"secret-missing":return{kind:"secret-missing"};case"secret-mismatch":return{kind:"secret-mismatch"};case"generation-retired":return{kind:"generation-retired"};default:return{kind:"full",details:numbersFrom(reply,1)}}}function admitOutcome(reply,acceptanceId){switch(reply[0]){case"accepted":return{kind:"accepted",acceptanceId,duplicate:reply[1]==="1",acceptedAt:Number(reply[2])};case"target-not-live":return{kind:"target-not-live"};case"conflict":return{kind:"conflict"};case"expired":return{kind:"expired"};case"stale":return{kind:"stale"};case"quota":return{kind:"quota",quota:reply[1],details:numbersFrom(reply,2)};default:return{kind:"full",budget:reply[1],details:numbersFrom(reply,2)}}}function usageOf(reply,watching){let[activeItems,activeBytes,receipts,receiptBytes,registrations,sessions,metadataBytes,expiryEntries]=reply.slice(1).map(Number);return{activeItems,activeBytes,receipts,receiptBytes,registrations,sessions,metadataBytes,expiryEntries,watching}}function registrationMethods(run){return{async connect(request){let endpointId=crypto.randomUUID(),size=canonicalBytes({endpointId,session:request.session,generation:request.generation})+relayRegistrationOverheadBytes,lease=String(request.now+request.leaseMs),secret=request.secretDigest??"";return connectOutcome(await run(SCRIPTS.connect,request.session,request.generation,lease,String(request.now),secret,endpointId,String(size)))},async binding(session,endpointId,secretDigest,now){return lookupOf(await run(SCRIPTS.binding,session,endpointId,secretDigest??"",now===void 0?"":String(now)))},registration:async(endpointId)=>found(await run(SCRIPTS.registration,endpointId)),successor:async(endpointId,now)=>found(await run(SCRIPTS.successor,endpointId,String(now))),async disconnect(endpointId,now){await run(SCRIPTS.disconnect,endpointId,String(now))},sessionRegistration:async(session)=>found(await run(SCRIPTS.session,session)),async liveRegistrations(now){let reply=await run(SCRIPTS.live,String(now)),views=[];for(let at=1;at+3<reply.length;at+=4)views.push(viewAt(reply,at));return views}}}function createWatches(run,doorbell){let watches=new Set;async function look(endpointId,after,mode){let reply=await run(SCRIPTS.look,endpointId,after,mode);if(reply[0]==="cursor-ahead")return{kind:"cursor-ahead",highestCursor:reply[1],serial:0};return{kind:"watch",pending:reply[1]==="1",highestCursor:reply[2],serial:Number(reply[3])}}async function watch({endpointId,after,waitMs,signal,onPark}){let listener=await doorbell.listen(endpointId);try{let parks=waitMs>0,first=await look(endpointId,after,parks?"park":"first");if(first.kind==="cursor-ahead")return{kind:"cursor-ahead",highestCursor:first.highestCursor};if(first.pending||!parks)return{kind:"watch",pending:first.pending,highestCursor:first.highestCursor};onPark?.(),await listener.wait(first.serial,waitMs,signal);let final=await look(endpointId,after,"final");return final.kind==="watch"?{kind:"watch",pending:final.pending,highestCursor:final.highestCursor}:final}finally{listener.release()}}return{watch(request){let watching=watch(request);return watches.add(watching),watching.finally(()=>watches.delete(watching)).catch(()=>{return}),watching},async settled(){await Promise.allSettled([...watches])}}}function pageOutcome(reply){if(reply[0]==="cursor-ahead")return{kind:"cursor-ahead",highestCursor:reply[1]};return{kind:"page",itemsJson:reply[1],nextCursor:reply[2],hasMore:reply[3]==="1"}}function acknowledgeOutcome(reply){if(reply[0]==="acknowledged")return{kind:"acknowledged",duplicate:reply[1]==="1"};return{kind:reply[0]==="gone"?"gone":"unknown"}}function acknowledgeOutcomes(reply){let outcomes=[];for(let at=0;at+1<reply.length;at+=2)outcomes.push(acknowledgeOutcome(reply.slice(at,at+2)));return outcomes}function boundCall(operation){switch(operation.kind){case"admit":{let{request}=operation;return{script:SCRIPTS.boundAdmit,args:admitArgs(request),outcome:(reply,ids)=>admitOutcome(reply,ids(request.envelopeId))}}case"page":return{script:SCRIPTS.boundPage,args:[operation.after,String(operation.limit)],outcome:pageOutcome};case"acknowledge":return{script:SCRIPTS.boundAcknowledge,args:[packedEnvelopeId(operation.envelopeId)],outcome:acknowledgeOutcome};case"acknowledgeBatch":return{script:SCRIPTS.boundAcknowledgeBatch,args:operation.envelopeIds.map(packedEnvelopeId),outcome:acknowledgeOutcomes};case"admitEach":{let{requests}=operation,args=[String(requests.length),...requests.flatMap(admitArgs),...(operation.acknowledge??[]).map(packedEnvelopeId)];return{script:SCRIPTS.boundAdmitEach,args,outcome:(reply,ids)=>admitEachOutcome(reply,requests,ids)}}}}function admitEachOutcome(reply,requests,acceptanceIdOf){let admitted=[],at=0,accepted=!0;while(at<reply.length&&/^[0-9]+$/.test(reply[at])){let length=Number(reply[at]),fields=reply.slice(at+1,at+1+length),request=requests[admitted.length];admitted.push(fields[0]==="skipped"?{kind:"skipped"}:admitOutcome(fields,acceptanceIdOf(request.envelopeId))),accepted&&=fields[0]==="accepted",at+=1+length}return accepted?{admitted,acknowledged:acknowledgeOutcomes(reply.slice(at))}:{admitted}}var LOWERCASE_UUID=/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;function packedEnvelopeId(envelopeId){if(LOWERCASE_UUID.test(envelopeId))return`~${Buffer.from(envelopeId.replaceAll("-",""),"hex").toString("base64url")}`;return`#${Buffer.from(envelopeId).toString("base64url")}:`}function admitArgs(request){let receiptBytes=canonicalBytes({id:request.envelopeId,source:request.source,target:request.target})+relayReceiptOverheadBytes;return[packedEnvelopeId(request.envelopeId),request.digest,request.text,request.target.id,String(receiptBytes),request.fresh?"1":"0",String(request.now),request.source.id]}function mailMethods(scripts,watches){let{run}=scripts;return{async admit(request){let{reply,acceptanceIdOf}=await scripts.runWithAcceptance(SCRIPTS.admit,admitArgs(request));return admitOutcome(reply,acceptanceIdOf(request.envelopeId))},async bound(binding,operation){let call=boundCall(operation),bindingArgs=[binding.session,binding.endpointId,binding.secretDigest??"",String(binding.now)],{reply,acceptanceIdOf}=await scripts.runWithAcceptance(call.script,[...bindingArgs,...call.args]),lookup=lookupOf(reply.slice(0,BINDING_FIELDS));if(reply.length<=BINDING_FIELDS)return{lookup};return{lookup,outcome:call.outcome(reply.slice(BINDING_FIELDS),acceptanceIdOf)}},page:async(endpointId,after,limit)=>pageOutcome(await run(SCRIPTS.page,endpointId,after,String(limit))),acknowledge:async(endpointId,envelopeId)=>acknowledgeOutcome(await run(SCRIPTS.acknowledge,endpointId,packedEnvelopeId(envelopeId))),watch:(request)=>watches.watch(request)}}async function createRedisStore(options){let target=parseRedisUrl(options.url,options.env??{},options.password),prefix=options.prefix??DEFAULT_REDIS_PREFIX,timeouts={connectTimeoutMs:options.connectTimeoutMs??redisConnectTimeoutMs,commandTimeoutMs:options.commandTimeoutMs??redisCommandTimeoutMs},link=createRedisLink(target,timeouts),scripts=createScripts(link,prefix);await open(link,target,options,scripts);let doorbell=createRedisDoorbell(target,timeouts,(endpointId)=>redisKey(prefix,KEYS.bell,endpointId)),watches=createWatches(scripts.run,doorbell);return{target:target.display,epoch:scripts.readEpoch,...registrationMethods(scripts.run),...mailMethods(scripts,watches),async maintain(now){let reply=await scripts.run(SCRIPTS.maintain,String(now),crypto.randomUUID());if(reply[0]==="violation")throw violation(reply[1],stringsFrom(reply,2));return{reaped:Number(reply[1]),expiredReceipts:Number(reply[2]),expiredMail:Number(reply[3])}},usage:async()=>({...usageOf(await scripts.run(SCRIPTS.usage),doorbell.waiting()),roundTrips:link.sent()}),async close(){doorbell.close(),await watches.settled(),link.close()}}}export{createRedisStore};
