-- refresh: extend the lock only if it still holds this grant.
--
-- KEYS[1]  lock key (a grant or a released record: record.lua, whose grant
--          test, the prefix token ":", this script makes)
-- ARGV[1]  the grant's token
-- ARGV[2]  new TTL in milliseconds (> 0; PEXPIRE with 0 or less would delete)
--
-- Replies 1 when extended, 0 when the key holds no grant with this token.
if tonumber(ARGV[2]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
