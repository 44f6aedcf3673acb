-- multi_ttl: the least remaining time to live of several locks, only if all
-- still hold this grant.
--
-- KEYS[i]  lock key i (a grant or a released record: record.lua, whose
--          grant test, the prefix token ":", this script makes)
-- ARGV[1]  the grant's token
--
-- Replies the least PTTL in milliseconds, or -3 when any key holds no grant
-- with this token.
local prefix = ARGV[1] .. ':'
local least = -1
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if not v or string.sub(v, 1, #prefix) ~= prefix then
    return -3
  end
  local pttl = redis.call('PTTL', KEYS[i])
  if least < 0 or pttl < least then
    least = pttl
  end
end
return least
