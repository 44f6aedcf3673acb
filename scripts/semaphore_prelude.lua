-- semaphore_prelude: shared by every semaphore script; internal/script puts
-- it in front of each semaphore_*.lua file. Every script takes the same five
-- keys, all in the semaphore's hash slot ("<prefix>{<name>}..."):
--
-- KEYS[1]  state hash: "limit" -> N; "seq" -> last queue number;
--          "s<slot>" -> token of the slot's holder;
--          "t<token>" -> "<slot>:<fence>:<acquired ms>:<holder identity>";
--          "now" -> the scripts' time (ms) last recorded; "off" -> ms the
--          scripts' time runs ahead of the server's (absent: 0)
-- KEYS[2]  holders: sorted set, token -> end of its lease (ms: time below)
-- KEYS[3]  queue: sorted set, ticket -> queue number (arrival order)
-- KEYS[4]  queue deadlines: sorted set, ticket -> end of its queue entry (ms)
-- KEYS[5]  fence counter: the last fence minted (expires after the last
--          grant by that grant's TTL, at least 1 s: acquire.lua's ARGV[6])
--
-- Time (now, ms) is the server's (TIME) plus "off", never a client's: a
-- lease ends when that clock passes it, whatever the clients' clocks say.
-- It never goes back: when it would read earlier than "now" (the server's
-- clock stepped back), "off" grows so that it carries on from "now", and
-- every deadline keeps what it had left then.
-- Each script first drops the holders and queue entries whose time has
-- passed, and last sets every key to expire with the latest deadline it
-- serves, so that no key lives without an expiry.
local state, holders, queue, qdead, fencekey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

local function int(x) return string.format('%d', x) end

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2]) -- fences: the server's own
local clock = redis.call('HMGET', state, 'limit', 'now', 'off')
local seen, off = tonumber(clock[2] or '0'), tonumber(clock[3] or '0')
local now = math.floor(now_us / 1000) + off
if seen > now then -- the server's clock stepped back
  off, now = off + seen - now, seen
  redis.call('HSET', state, 'off', int(off))
end

-- stored_limit: the limit in use as the script began, 0 if none.
local function stored_limit() return tonumber(clock[1] or '0') end

-- drop removes a holder and frees its slot.
local function drop(token)
  local info = redis.call('HGET', state, 't' .. token)
  if info then
    local slot = 's' .. string.match(info, '^(%d+):')
    if redis.call('HGET', state, slot) == token then redis.call('HDEL', state, slot) end
    redis.call('HDEL', state, 't' .. token)
  end
  redis.call('ZREM', holders, token)
end

-- dequeue removes a waiter's queue entry.
local function dequeue(ticket)
  redis.call('ZREM', queue, ticket)
  redis.call('ZREM', qdead, ticket)
end

-- purge drops the holders whose lease has ended and the waiters whose
-- queue entry has expired; it returns how many it dropped.
local function purge()
  local n = 0
  for _, token in ipairs(redis.call('ZRANGEBYSCORE', holders, '-inf', int(now))) do
    drop(token)
    n = n + 1
  end
  for _, ticket in ipairs(redis.call('ZRANGEBYSCORE', qdead, '-inf', int(now))) do
    dequeue(ticket)
    n = n + 1
  end
  return n
end

-- keep records the time ("now", once per ms) and makes every key expire
-- with the last lease or queue entry, or deletes them all when none is left.
local function keep()
  local last = now
  local h = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  if h[2] then last = math.max(last, tonumber(h[2])) end
  local q = redis.call('ZRANGE', qdead, -1, -1, 'WITHSCORES')
  if q[2] then last = math.max(last, tonumber(q[2])) end
  if last <= now then
    redis.call('DEL', state, holders, queue, qdead)
    return
  end
  local ms = int(last - now + 1)
  if now > seen then redis.call('HSET', state, 'now', int(now)) end
  redis.call('PEXPIRE', state, ms)
  redis.call('PEXPIRE', holders, ms)
  redis.call('PEXPIRE', queue, ms)
  redis.call('PEXPIRE', qdead, ms)
end

-- wake publishes, on channel, the tickets of the waiters that a free slot
-- now awaits: the first (limit - holders) of the queue, in order.
local function wake(limit, channel)
  local free = limit - redis.call('ZCARD', holders)
  if free <= 0 then return end
  local heads = redis.call('ZRANGE', queue, 0, free - 1)
  if #heads > 0 then redis.call('PUBLISH', channel, table.concat(heads, ' ')) end
end
