-- multi_obtain: take several locks at once, all or nothing, with one fresh
-- token and a fence per key minted in the same atomic step (obtain.lua for
-- many keys).
--
-- KEYS[i]  lock key i (i = 1..n), all in one hash slot
-- ARGV[1]  token (never contains ':' or ' ', never "~")
-- ARGV[2]  lock TTL in milliseconds (> 0)
-- ARGV[3]  holder identity to record, "" for none
--
-- Each lock key holds a grant or a released record (see record.lua); a
-- released record is free, and the next fence is its fence + 1; an absent
-- key's is the server time in µs. Replies:
--   {1, fence1, ..., fencen}  granted; a key that already holds ARGV[1] (a
--                             replay of this request) keeps its fence
--   {0, i, pttl}              lock key i is held by another grant; nothing
--                             was written but its waiters' mark (if Redis
--                             accepts it: see record.lua)
-- A fence is an integer below 2^53 and its decimal string above; an error
-- when a key's last fence is 2^63-1 (no fence is left). Fences are decimal
-- strings, never Lua numbers (doubles): see fence.lua.
if tonumber(ARGV[2]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
-- fence.lua
local mine, last, rels = {}, {}, {}
local fresh = false
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  -- record.lua
  rels[i] = ''
  if tok == ARGV[1] then
    mine[i] = fence
  elseif tok == '~' then
    last[i], rels[i] = inc(fence), rel
    if not last[i] then
      return spent()
    end
  elseif v then -- held: mark it waited for
    local pttl = redis.call('PTTL', KEYS[i])
    if pttl >= 0 and mark ~= '*' then
      redis.pcall('APPEND', KEYS[i], '*') -- refused when memory is full
    end
    return {0, i, pttl}
  else
    fresh = true
  end
end
local now = fresh and clock()
local reply = {1}
for i = 1, #KEYS do
  local fence = mine[i]
  if not fence then
    fence = last[i] or now
    if now and below(fence, now) then
      fence = now
    end
    redis.call('SET', KEYS[i], ARGV[1] .. ':' .. fence .. ':' .. rels[i] .. ':' .. ARGV[3] .. ';', 'PX', ARGV[2])
  end
  reply[i + 1] = out(fence)
end
return reply
