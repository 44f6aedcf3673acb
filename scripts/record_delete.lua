-- record_delete: delete a fenced record (written by fenced_set.lua) unless a
-- newer fence wrote it.
--
-- KEYS[1]  the record (a hash: fields "v" value, "f" fence)
-- ARGV[1]  the deleter's fence
--
-- Replies 0 when deleted or absent, or the record's fence when it is above
-- ARGV[1] (nothing deleted).
local f = tonumber(redis.call('HGET', KEYS[1], 'f') or '0') or 0
if f > tonumber(ARGV[1]) then
  return f
end
redis.call('DEL', KEYS[1])
return 0
