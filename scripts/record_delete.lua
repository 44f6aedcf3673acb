-- record_delete: delete a fenced record (written by fenced_set.lua) unless a
-- newer fence wrote it.
--
-- KEYS[1]  the record (a hash: fields "v" value, "f" fence)
-- ARGV[1]  the deleter's fence
--
-- Replies 0 when deleted or absent, or the record's fence (a decimal
-- string) when it is above ARGV[1] (nothing deleted).
-- Fences are decimal integers in (0, 2^63) without leading zeros (the
-- library sends them so, and stores them as sent), compared as strings:
-- Lua numbers are doubles, exact only up to 2^53, and fences minted
-- elsewhere (nanosecond clocks, database sequences) go beyond.
local f = redis.call('HGET', KEYS[1], 'f') or '0'
if below(ARGV[1], f) then
  return f
end
redis.call('DEL', KEYS[1])
return 0
