-- multi_obtain: take several locks at once, all or nothing, with one fresh
-- token and a fence per key minted in the same atomic step (obtain.lua for
-- many keys).
--
-- KEYS[i]  lock key i (i = 1..n), all in one hash slot
-- ARGV[1]  token (never contains ':' or ' ', never "~")
-- ARGV[2]  lock TTL in milliseconds (> 0)
-- ARGV[3]  holder identity to record, "" for none
--
-- Each lock key holds a grant or a released record (see obtain.lua); a
-- released record is free, and the next fence is its fence + 1; an absent
-- key's is the server time in µs. Replies:
--   {1, fence1, ..., fencen}  granted; a key that already holds ARGV[1] (a
--                             replay of this request) keeps its fence
--   {0, i, pttl}              lock key i is held by another grant; nothing
--                             was written
if tonumber(ARGV[2]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
local mine, last, rels = {}, {}, {}
local clock = false
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  last[i], rels[i] = 0, ''
  if v then
    local tok, f, r = string.match(v, '^([^:]*):(%d+):([^:]*)')
    if tok == ARGV[1] then
      mine[i] = tonumber(f)
    elseif tok == '~' then
      last[i], rels[i] = tonumber(f), r
    else
      local pttl = redis.call('PTTL', KEYS[i])
      if pttl >= 0 and string.sub(v, -1) ~= '*' then
        redis.call('APPEND', KEYS[i], '*')
      end
      return {0, i, pttl}
    end
  else
    clock = true
  end
end
local now = 0
if clock then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local reply = {1}
for i = 1, #KEYS do
  local fence = mine[i]
  if not fence then
    fence = math.max(last[i] + 1, now)
    redis.call('SET', KEYS[i], ARGV[1] .. ':' .. string.format('%d', fence) .. ':' .. rels[i] .. ':' .. ARGV[3] .. ';', 'PX', ARGV[2])
  end
  reply[i + 1] = fence
end
return reply
