-- release: delete the lock only if it still holds this grant, and wake the
-- lock's waiters in the same atomic step.
--
-- KEYS[1]  lock key (its value is "token:fence")
-- KEYS[2]  wake channel (same hash slot; optional)
-- KEYS[3]  fair-mode queue (a sorted set of waiters' tickets; optional)
-- ARGV[1]  the grant's token
-- ARGV[2]  how to wake waiters: "p" PUBLISH, "s" SPUBLISH (sharded, Redis 7+),
--          absent or "" = no wake-up
--
-- The wake-up's payload is the ticket at the head of the fair-mode queue, so
-- that the head's client wakes that waiter; "r" when no one is queued.
--
-- A failed publish (SPUBLISH before Redis 7) does not fail the release.
--
-- Replies 1 when deleted, 0 when the key holds no grant with this token.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  redis.call('DEL', KEYS[1])
  local msg = 'r'
  if KEYS[3] then
    msg = redis.call('ZRANGE', KEYS[3], 0, 0)[1] or 'r'
  end
  if KEYS[2] and ARGV[2] == 'p' then
    redis.pcall('PUBLISH', KEYS[2], msg)
  elseif KEYS[2] and ARGV[2] == 's' then
    redis.pcall('SPUBLISH', KEYS[2], msg)
  end
  return 1
end
return 0
