-- fair_obtain: take the lock in arrival order. A caller that finds the lock
-- held, or free but promised to an earlier waiter, joins (or stays in) the
-- queue; the lock is granted only to the head of the queue, or to anyone
-- when the queue is empty. Queue entries expire unless their waiter renews
-- them by trying again.
--
-- KEYS[1]  lock key
-- KEYS[2]  queue: sorted set of waiters' tickets, scored by arrival (µs)
-- KEYS[3]  queue deadlines: sorted set of tickets, scored by the server
--          time (ms) at which the entry expires
-- ARGV[1]  token of this attempt (never contains ':' or ' ', never "~")
-- ARGV[2]  lock TTL in milliseconds (> 0)
-- ARGV[3]  queue entry TTL in milliseconds (> 0)
-- ARGV[4]  the waiter's ticket: its identity in the queue, the same for all
--          attempts of one Obtain call
-- ARGV[5]  holder identity to record, "" for none
--
-- The lock key holds a grant or a released record (see obtain.lua); a
-- released record is free. The queue keys disappear with their last entry.
-- A caller's entry or mark that Redis refuses to write (out of memory) is
-- left out: the reply is the same, the caller waits outside the queue.
-- Replies:
--   {1, fence}   granted (or a replay of this same grant)
--   {0, pttl}    held by another grant: its PTTL
--   {0, wait}    free but the head of the queue is another waiter: the
--                milliseconds until the head's entry expires
--   {0, -1}      held by a value without expiry (not written by redislock)
-- A fence is an integer up to 2^53 and its decimal string above; an error
-- when the key's last fence is 2^63-1 (no fence is left). Fences are
-- decimal strings, never Lua numbers (doubles): see obtain.lua.
if tonumber(ARGV[2]) <= 0 or tonumber(ARGV[3]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
local v = redis.call('GET', KEYS[1])
local tok, last, rel = nil, nil, ''
if v then
  local f
  tok, f, rel = string.match(v, '^([^:]*):(%d+):([^:]*)')
  f = valid(f)
  if f and tok == ARGV[1] then
    return {1, out(f)}
  end
  if f and tok == '~' then
    v, last = nil, f -- released: free
  end
end
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)
-- Drop the entries of waiters that stopped renewing them.
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('ZREM', KEYS[2], m)
  redis.call('ZREM', KEYS[3], m)
end
local function enqueue()
  if not redis.call('ZSCORE', KEYS[2], ARGV[4]) then
    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
    local score = nowus
    if last[2] and tonumber(last[2]) >= score then
      score = tonumber(last[2]) + 1
    end
    local ok = redis.pcall('ZADD', KEYS[2], score, ARGV[4])
    if type(ok) == 'table' and ok.err then
      return -- refused (out of memory): not queued, still contention
    end
  end
  local ttl = tonumber(ARGV[3])
  local ok = redis.pcall('ZADD', KEYS[3], now + ttl, ARGV[4])
  if type(ok) == 'table' and ok.err then
    return -- refused (out of memory): the entry keeps its deadline
  end
  for i = 2, 3 do
    if redis.call('PTTL', KEYS[i]) < ttl then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
  end
end
if v then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl ~= -1 then
    enqueue()
    if string.sub(v, -1) ~= '*' then
      redis.pcall('APPEND', KEYS[1], '*') -- refused when memory is full
    end
  end
  return {0, pttl}
end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if head and head ~= ARGV[4] then
  enqueue()
  return {0, math.max(0, tonumber(redis.call('ZSCORE', KEYS[3], head)) - now)}
end
redis.call('ZREM', KEYS[2], ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[4])
-- The last fence + 1, or the clock in µs if that is higher (obtain.lua).
local f = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
if last then
  last = inc(last)
  if not valid(last) then
    return redis.error_reply('ERR redislock: no fence is left on this key: its last fence is 9223372036854775807')
  end
  if below(f, last) then
    f = last
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. f .. ':' .. rel .. ':' .. ARGV[5] .. ';', 'PX', ARGV[2])
return {1, out(f)}
