-- multi_obtain: take several locks at once, all or nothing, with one fresh
-- token and a fence per key minted in the same atomic step.
--
-- KEYS[2i-1]  lock key i (i = 1..n)
-- KEYS[2i]    fence counter key i (same hash slot as lock key i)
-- ARGV[1]     token (never contains ':')
-- ARGV[2]     lock TTL in milliseconds (> 0)
-- ARGV[3]     fence counter TTL in milliseconds (> 0)
-- ARGV[4]     holder identity to record, "" for none
--
-- Each lock key holds "token:fence" or "token:fence:holder;" ("*" appended:
-- someone waits; see obtain.lua). Replies:
--   {1, fence1, ..., fencen}  granted; a key that already holds ARGV[1] (a
--                             replay of this request) keeps its fence
--   {0, i, pttl}              lock key i is held by another grant; nothing
--                             was written
if tonumber(ARGV[2]) <= 0 or tonumber(ARGV[3]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
local prefix = ARGV[1] .. ':'
local mine = {}
for i = 1, #KEYS / 2 do
  local v = redis.call('GET', KEYS[2 * i - 1])
  if v then
    if string.sub(v, 1, #prefix) ~= prefix then
      local pttl = redis.call('PTTL', KEYS[2 * i - 1])
      if pttl >= 0 and string.sub(v, -1) ~= '*' then
        redis.call('APPEND', KEYS[2 * i - 1], '*')
      end
      return {0, i, pttl}
    end
    mine[i] = tonumber(string.match(v, ':(%d+)'))
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local holder = ''
if ARGV[4] ~= '' then
  holder = ':' .. ARGV[4] .. ';'
end
local reply = {1}
for i = 1, #KEYS / 2 do
  local fence = mine[i]
  if not fence then
    -- The counter holds the last fence minted (obtain.lua).
    local c = tonumber((string.match(redis.call('GET', KEYS[2 * i]) or '', '^%d+'))) or 0
    fence = math.max(c + 1, now)
    local f = string.format('%d', fence)
    redis.call('SET', KEYS[2 * i], f, 'PX', ARGV[3])
    redis.call('SET', KEYS[2 * i - 1], prefix .. f .. holder, 'PX', ARGV[2])
  end
  reply[i + 1] = fence
end
return reply
