-- release: delete the lock only if it still holds this grant.
--
-- KEYS[1]  lock key (its value is "token:fence")
-- KEYS[2]  fence counter key (same hash slot)
-- ARGV[1]  the grant's token
--
-- The counter keeps "fence token" of the last release, so that a replay of
-- this same release (go-redis re-sends a command whose reply was lost to EOF)
-- still answers 1 instead of "not held".
--
-- Replies 1 when deleted (or already deleted by this token), 0 when the key
-- holds no grant with this token.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], string.sub(v, #ARGV[1] + 2) .. ' ' .. ARGV[1], 'KEEPTTL')
  return 1
end
local c = redis.call('GET', KEYS[2])
if c and string.sub(c, -(#ARGV[1] + 1)) == ' ' .. ARGV[1] then
  return 1
end
return 0
