-- ttl: the lock's remaining time to live, only if it still holds this grant.
--
-- KEYS[1]  lock key (a grant or a released record: record.lua, whose grant
--          test, the prefix token ":", this script makes)
-- ARGV[1]  the grant's token
--
-- Replies the PTTL in milliseconds, or -3 when the key holds no grant with
-- this token.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  return redis.call('PTTL', KEYS[1])
end
return -3
