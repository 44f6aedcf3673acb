-- semaphore_acquire: take a slot if one is free and no earlier waiter is
-- ahead of this request (first come, first served); else, with a queue TTL,
-- join the queue or renew this request's place in it.
--
-- KEYS     see semaphore_prelude.lua
-- ARGV[1]  token: the request's ticket, and the permit's token if granted
-- ARGV[2]  lease TTL in ms (> 0)
-- ARGV[3]  limit N (>= 1)
-- ARGV[4]  queue TTL in ms; 0: do not queue (a single attempt)
-- ARGV[5]  holder identity to record, "" for none
-- ARGV[6]  fence counter TTL in ms (> 0)
-- ARGV[7]  wake channel
--
-- Replies:
--   {1, slot, fence}  granted; a replay of a granted request gets the same
--   {0, rank, wait}   not granted: rank is the place in the queue (0 is
--                     next; -1 when not queued), wait the ms until the
--                     earliest lease ends (-1 when a slot is free and
--                     earlier waiters are to take it)
--   {-1, limit}       the semaphore is in use with another limit
local token, ttl, limit, qttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local freed = purge()
local count = redis.call('ZCARD', holders)
local stored = stored_limit()
if stored ~= limit then
  if stored > 0 and (count > 0 or redis.call('ZCARD', queue) > 0) then
    return {-1, stored}
  end
  redis.call('HSET', state, 'limit', limit)
end
local info = redis.call('HGET', state, 't' .. token)
if info then
  local slot, fence = string.match(info, '^(%d+):(%d+):')
  return {1, tonumber(slot), tonumber(fence)}
end
local rank = redis.call('ZRANK', queue, token)
local ahead = rank or redis.call('ZCARD', queue)
if count + ahead < limit then
  local slot = -1
  for i = 0, limit - 1 do
    if redis.call('HEXISTS', state, 's' .. i) == 0 then
      slot = i
      break
    end
  end
  local fence = math.max(tonumber(redis.call('GET', fencekey) or '0') + 1, now_us)
  redis.call('SET', fencekey, int(fence), 'PX', ARGV[6])
  redis.call('ZADD', holders, int(now + ttl), token)
  redis.call('HSET', state, 's' .. slot, token, 't' .. token,
    slot .. ':' .. int(fence) .. ':' .. int(now) .. ':' .. ARGV[5], 'now', int(now))
  seen = now -- recorded here: keep() need not
  if rank then dequeue(token) end
  keep()
  wake(limit, ARGV[7])
  return {1, slot, fence}
end
if qttl > 0 then
  if not rank then
    redis.call('ZADD', queue, redis.call('HINCRBY', state, 'seq', 1), token)
    rank = ahead
  end
  redis.call('ZADD', qdead, int(now + qttl), token)
end
keep()
if freed > 0 then wake(limit, ARGV[7]) end
local wait = -1
if count >= limit then
  local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  wait = tonumber(first[2]) - now
end
return {0, rank or -1, wait}
