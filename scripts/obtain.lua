-- obtain: take the lock if it is free, with a fresh token and a millisecond
-- TTL, and mint its fence in the same atomic step: the last fence + 1, or
-- the server time in µs when the key has no memory of one. (Quorum mode
-- proposes its fence: propose.lua. A handoff, a release that grants the
-- lock to a waiter, is release.lua's.)
--
-- KEYS[1]  lock key, the only key of a lock: a grant or a released record
--          (record.lua)
-- ARGV[1]  token (never contains ':' or ' ', never "~")
-- ARGV[2]  lock TTL in milliseconds (> 0)
-- ARGV[3]  optional, holder identity to record; "" or absent for none
--
-- Replies:
--   fence > 0          granted; also when KEYS[1] already holds ARGV[1] (a
--                      replay of this same request), with the fence minted
--                      the first time
--   -(pttl + 1) <= 0   held by another grant with that PTTL in ms (and
--                      marked waited for: record.lua); 0: held by a value
--                      without expiry
-- A fence is an integer below 2^53 and its decimal string above: exact
-- either way. An error when the key's last fence is 2^63-1 (no fence is
-- left).
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
-- fence.lua
local n -- the reply, once known: the fence as a Lua number while exact
if tok ~= ARGV[1] then -- free: the next fence, or the clock's
  if fence then
    fence, n = inc(fence)
    if not fence then
      -- fence.lua: spent
      return spent()
    end
  else
    -- fence.lua: clock
    fence, rel = clock(), ''
  end
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence .. ':' .. rel .. ':' .. (ARGV[3] or '') .. ';', 'PX', ARGV[2])
end
if n then
  return n
end
-- fence.lua: out
return out(fence)
