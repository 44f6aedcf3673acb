-- release: delete the lock only if it still holds this grant, and wake the
-- lock's waiters in the same atomic step.
--
-- KEYS[1]  lock key (its value is "token:fence")
-- KEYS[2]  wake channel (same hash slot; optional)
-- ARGV[1]  the grant's token
-- ARGV[2]  how to wake waiters: "p" PUBLISH, "s" SPUBLISH (sharded, Redis 7+),
--          absent or "" = no wake-up
--
-- Replies 1 when deleted, 0 when the key holds no grant with this token.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  redis.call('DEL', KEYS[1])
  if KEYS[2] and ARGV[2] == 'p' then
    redis.call('PUBLISH', KEYS[2], 'r')
  elseif KEYS[2] and ARGV[2] == 's' then
    redis.call('SPUBLISH', KEYS[2], 'r')
  end
  return 1
end
return 0
