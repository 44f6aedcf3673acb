-- propose: obtain.lua for quorum mode: take the lock if it is free, with a
-- fresh token, a millisecond TTL and the fence the client proposes (above
-- the highest it has seen on the nodes), only if that is above the key's
-- last fence.
--
-- KEYS[1]  lock key: a grant or a released record (record.lua)
-- ARGV[1]  token (never contains ':' or ' ', never "~")
-- ARGV[2]  lock TTL in milliseconds (> 0)
-- ARGV[3]  the proposed fence, a decimal string (fence.lua)
-- ARGV[4]  holder identity to record; "" for none
--
-- Replies:
--   fence              granted: ARGV[3]; also when KEYS[1] already holds
--                      ARGV[1] (a replay of this same request), the fence
--                      granted the first time
--   -(pttl + 1) <= 0   held by another grant with that PTTL in ms (and
--                      marked waited for: record.lua); 0: held by a value
--                      without expiry
--   {-1, last}         ARGV[3] was not above the key's last fence (equal
--                      too: racing proposers can propose the same value,
--                      and two grants must never share a fence)
-- Each fence (a reply's or in {-1, last}) an integer below 2^53 and its
-- decimal string above: exact over the whole int64 range. An error when
-- ARGV[3] is no fence.
if tonumber(ARGV[2]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
local v = redis.call('GET', KEYS[1])
-- record.lua
if v and tok ~= ARGV[1] and tok ~= '~' then -- held: mark it waited for
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl >= 0 and mark ~= '*' then
    redis.pcall('APPEND', KEYS[1], '*') -- refused when memory is full
  end
  return -(pttl + 1)
end
if tok == ARGV[1] then
  return out(fence)
end
-- fence.lua
local p = valid(ARGV[3])
if not p then
  return redis.error_reply('ERR redislock: the proposed fence is not a positive int64')
end
if fence and not below(fence, p) then
  return {-1, out(fence)}
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. p .. ':' .. (rel or '') .. ':' .. ARGV[4] .. ';', 'PX', ARGV[2])
return out(p)
