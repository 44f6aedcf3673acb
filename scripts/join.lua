-- join: bring one node into a quorum grant that it does not hold (it
-- missed the grant, or lost it): extend the key where it holds the grant,
-- take it where it is free, and never where it holds another grant or
-- this grant's own release.
--
-- KEYS[1]  lock key (a grant or a released record: see record.lua)
-- ARGV[1]  the grant's token (never contains ':' or ' ', never "~")
-- ARGV[2]  TTL in milliseconds (> 0)
-- ARGV[3]  the grant's fence: a positive int64, as a decimal string
-- ARGV[4]  holder identity to record; "" for none
--
-- Replies
--   1  the key held this grant: extended to ARGV[2] (as refresh.lua)
--   2  the key was free, and no attempt after this grant's reached it: it
--      was absent, or another grant's released record with a fence below
--      ARGV[3]. It now holds this grant, with ARGV[2] as its TTL; the
--      record's latest releases are carried on (record.lua).
--   3  the same, but the record's fence was ARGV[3] or above: an attempt
--      after this grant's reached the node. The fence part keeps the
--      record's: a node's last fence never goes back, so the fences of
--      later grants stay ordered.
--   0  the key holds another grant, a value this version did not write,
--      or a released record naming this grant's release (a grant is never
--      taken again after its release)
-- An error when ARGV[2] is not positive or ARGV[3] is no fence.
if tonumber(ARGV[2]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then -- this grant (record.lua)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
-- fence.lua
local mine = valid(ARGV[3])
if not mine then
  return redis.error_reply('ERR redislock: the fence is not a positive int64')
end
-- record.lua
if v and tok ~= '~' then
  return 0 -- held by another grant, or not a value of this version
end
-- record.lua: names
if v and names(rel, ARGV[1]) then
  return 0 -- this grant was released here
end
local reply = 2
if fence and not below(fence, mine) then
  reply = 3 -- the record's fence stays: a node's last fence never goes back
else
  fence = mine
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence .. ':' .. (rel or '') .. ':' .. ARGV[4] .. ';', 'PX', ARGV[2])
return reply
