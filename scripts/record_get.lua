-- record_get: read a fenced record (written by fenced_set.lua) with its
-- remaining TTL.
--
-- KEYS[1]  the record (a hash: fields "v" value, "f" fence)
--
-- Replies {value, fence, pttl} (the fence as its decimal string, exact over
-- the whole int64 range; pttl -1: no expiry), or {} when the record does
-- not exist.
local r = redis.call('HMGET', KEYS[1], 'v', 'f')
if not r[1] or not r[2] then
  return {}
end
return {r[1], r[2], redis.call('PTTL', KEYS[1])}
