-- fair_obtain: take the lock in arrival order. A caller that finds the lock
-- held, or free but promised to an earlier waiter, joins (or stays in) the
-- queue; the lock is granted only to the head of the queue, or to anyone
-- when the queue is empty. Entries expire unless their waiter tries again.
--
-- KEYS[1]  lock key
-- KEYS[2]  queue: sorted set of waiters' tickets, scored by arrival (µs)
-- KEYS[3]  queue deadlines: sorted set of tickets, scored by the server
--          time (ms) at which the entry expires; and "~", scored by the
--          server time of the latest attempt that queued less 2^45 ms
-- ARGV[1]  token of this attempt (never contains ':' or ' ', never "~")
-- ARGV[2]  lock TTL in milliseconds (> 0)
-- ARGV[3]  queue entry TTL in milliseconds (> 0)
-- ARGV[4]  the waiter's ticket, the same for all attempts of one Obtain call
-- ARGV[5]  holder identity to record, "" for none
--
-- The lock key holds a grant or a released record (see record.lua); a
-- released record is free. When TIME reads earlier than "~" (the server's
-- clock stepped back), every deadline moves back as far. The queue keys go
-- with the last waiter granted (or leaving), else expire by the queue TTL.
-- Replies:
--   {1, fence}   granted (or a replay of this same grant)
--   {0, pttl}    held by another grant: its PTTL
--   {0, wait}    free but the head of the queue is another waiter: the
--                milliseconds until the head's entry expires
--   {0, -1}      held by a value without expiry (not written by redislock)
-- A fence is an integer below 2^53 and its decimal string above; an error
-- when the key's last fence is 2^63-1 (no fence is left). Fences are
-- decimal strings, never Lua numbers (doubles): see fence.lua.
if tonumber(ARGV[2]) <= 0 or tonumber(ARGV[3]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
local v = redis.call('GET', KEYS[1])
-- record.lua
-- fence.lua
if tok == ARGV[1] then return {1, out(fence)} end
local last = tok == '~' and fence -- released: free, with its last fence
if last then v = nil else rel = '' end
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)
-- Drop the entries of waiters that stopped renewing them. The range finds
-- "~" only when the server's clock has stepped back to before its time.
local since = string.format('(%d', now - 2^45)
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], since, now)
if gone[1] == '~' then -- move everything back, "~" (sorted first) to now
  local d = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
  local back = tonumber(d[2]) + 2^45 - now
  for i = 1, #d, 2 do redis.call('ZADD', KEYS[3], tonumber(d[i + 1]) - back, d[i]) end
  gone = redis.call('ZRANGEBYSCORE', KEYS[3], since, now)
end
for _, m in ipairs(gone) do
  redis.call('ZREM', KEYS[2], m)
  redis.call('ZREM', KEYS[3], m)
end
local function enqueue() -- a ZADD refused (out of memory) leaves the caller out: same reply
  if not redis.call('ZSCORE', KEYS[2], ARGV[4]) then -- after the tail
    local tail = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
    if type(redis.pcall('ZADD', KEYS[2], math.max(nowus, (tonumber(tail) or 0) + 1), ARGV[4])) == 'table' then return end
  end
  local ttl = tonumber(ARGV[3])
  if type(redis.pcall('ZADD', KEYS[3], now + ttl, ARGV[4], now - 2^45, '~')) == 'table' then return end
  if redis.call('PTTL', KEYS[2]) < ttl then -- the queue keys expire together
    redis.call('PEXPIRE', KEYS[2], ttl)
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
end
if v then -- held: queue and mark it waited for
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl ~= -1 then
    enqueue()
    if mark ~= '*' then redis.pcall('APPEND', KEYS[1], '*') end -- may be refused
  end
  return {0, pttl}
end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if head and head ~= ARGV[4] then
  enqueue()
  return {0, math.max(0, tonumber(redis.call('ZSCORE', KEYS[3], head)) - now)}
end
if head then redis.call('ZREM', KEYS[2], head) end -- this waiter's entry
if head and redis.call('ZRANGE', KEYS[2], 0, 0)[1] then
  redis.call('ZREM', KEYS[3], head)
else
  redis.call('DEL', KEYS[3]) -- no one waits: the deadlines and "~" go
end
-- The last fence + 1, or the clock in µs if that is higher.
local f = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
if last then
  last = inc(last)
  if not last then return spent() end
  if below(f, last) then f = last end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. f .. ':' .. rel .. ':' .. ARGV[5] .. ';', 'PX', ARGV[2])
return {1, out(f)}
