-- inspect: read a lock for Inspect: its value, remaining TTL and how many
-- callers wait in its fair queue.
--
-- KEYS[1]  lock key (a grant or a released record: see record.lua)
-- KEYS[2]  fair-mode queue (a sorted set of waiters' tickets; absent when
--          no fair waiter queues)
--
-- Replies {pttl, value, queued} when the lock key exists (pttl as PTTL
-- reports it, queued the queue's size), or {-2, queued} when it does not.
local queued = redis.call('ZCARD', KEYS[2])
local v = redis.call('GET', KEYS[1])
if not v then
  return {-2, queued}
end
return {redis.call('PTTL', KEYS[1]), v, queued}
