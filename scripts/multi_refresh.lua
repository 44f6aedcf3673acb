-- multi_refresh: extend several locks, only if all still hold this grant.
--
-- KEYS[i]  lock key i (a grant or a released record: record.lua, whose
--          grant test, the prefix token ":", this script makes)
-- ARGV[1]  the grant's token
-- ARGV[2]  new TTL in milliseconds (> 0)
--
-- Replies 1 when all were extended, 0 (and extends none) when any key holds
-- no grant with this token.
if tonumber(ARGV[2]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
local prefix = ARGV[1] .. ':'
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if not v or string.sub(v, 1, #prefix) ~= prefix then
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
