-- inspect: read a lock for Inspect: its value and remaining TTL.
--
-- KEYS[1]  lock key (a grant or a released record: see obtain.lua)
--
-- Replies {pttl, value} when the key exists (pttl as PTTL reports it), or
-- {-2} when it does not.
local v = redis.call('GET', KEYS[1])
if not v then
  return {-2}
end
return {redis.call('PTTL', KEYS[1]), v}
