-- obtain: take the lock if it is free, with a fresh token and a millisecond
-- TTL, and mint its fence in the same atomic step. (A handoff, a release
-- that grants the lock to a waiter, is release.lua's.)
--
-- KEYS[1]  lock key, the only key of a lock
-- ARGV[1]  token (never contains ':' or ' ', never "~")
-- ARGV[2]  lock TTL in milliseconds (> 0)
-- ARGV[3]  optional, proposed fence (quorum mode); 0 or absent = mint here:
--          the last fence + 1, or the server time in µs when the key is
--          absent
-- ARGV[4]  optional, holder identity to record; "" or absent for none
--
-- KEYS[1] holds one of
--   grant     token ":" fence ":" rel ":" holder ";" ["*"]
--   released  "~:" fence ":" rel            (written by release.lua)
-- rel is " id1 id2 ...": the latest releases on this key, newest first, at
-- most 8, each named by the first 12 characters of its token (60 random
-- bits), carried from each value to the next so that a re-sent release
-- still finds its own (release.lua). The "*" is
-- appended once an attempt found the grant held: someone waits, and its
-- release must wake them (when Redis refuses the APPEND, out of memory,
-- the attempt still reports the lock held; its waiter then polls). A
-- released record is free; any other value (one this version did not
-- write) counts as held by someone else.
--
-- Replies:
--   fence > 0          granted; also when KEYS[1] already holds ARGV[1] (a
--                      replay of this same request), with the fence minted
--                      the first time
--   -(pttl + 1) <= 0   held by another grant with that PTTL in ms; 0: held
--                      by a value without expiry
--   {-1, last}         the proposal ARGV[3] was not above the key's last fence
--                      (equal too: racing proposers can propose the same value,
--                      and two grants must never share a fence)
-- A fence (a reply's or in {-1, last}) is an integer up to 2^53 and its
-- decimal string above: exact either way. An error when the key's last
-- fence is 2^63-1 (no fence is left) or ARGV[3] is no fence.
--
-- Fences are computed as decimal strings in (0, 2^63) without leading
-- zeros, never as Lua numbers: those are doubles, exact only up to 2^53,
-- and a key's fences can go beyond (quorum proposals follow the highest
-- fence seen; the server clock in µs passes 2^53 in 2255). A fence part
-- that is no such string makes the value someone else's.
if tonumber(ARGV[2]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
local p = ARGV[3]
if p == '0' then
  p = nil
end
local v = redis.call('GET', KEYS[1])
-- The common cases first, with as few library calls as they can make (each
-- costs the server about as much as a small command): the key absent or a
-- released record, its fence and the proposal below 2^53, where Lua
-- numbers hold them exactly. Each answers as the general code below.
if not v or string.byte(v, 1) == 126 then
  local f, r, n, q = nil, '', nil, nil
  if v then
    f, r = string.match(v, '^~:([1-9]%d*):([^:]*)')
    n = f and #f <= 16 and tonumber(f)
    if not (n and n < 9007199254740991) then
      n = false -- no fence, or too long: the general code decides
    end
  end
  if p then
    q = #p <= 16 and string.find(p, '^[1-9]%d*$') and tonumber(p)
    if q and q >= 9007199254740992 then
      q = false
    end
  end
  if n ~= false and (not p or q) then
    local out
    if p then
      if n and n >= q then
        return {-1, n}
      end
      f, out = p, q
    else
      if n then
        out = n + 1
      else
        local t = redis.call('TIME') -- see the general code's fresh key
        out = t[1] * 1000000 + t[2]
      end
      f = string.format('%d', out)
    end
    redis.call('SET', KEYS[1], ARGV[1] .. ':' .. f .. ':' .. r .. ':' .. (ARGV[4] or '') .. ';', 'PX', ARGV[2])
    return out
  end
end
-- fence.lua
-- (internal/script puts the fence functions on the line above: here, after
-- the common cases, which use none, since each run makes them anew.)
local fence, rel = nil, ''
if v then
  -- tok ":" f ":" r [":" ...], found with plain searches (patterns cost
  -- more on long values); any part missing: a value of someone else's.
  local tok, f, r
  local i = string.find(v, ':', 1, true)
  local j = i and string.find(v, ':', i + 1, true)
  if j then
    tok, f = string.sub(v, 1, i - 1), valid(string.sub(v, i + 1, j - 1))
    r = string.sub(v, j + 1, (string.find(v, ':', j + 1, true) or 0) - 1)
    if not f then
      tok = nil
    end
  end
  if tok == ARGV[1] then
    return out(f)
  end
  if tok ~= '~' then
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl >= 0 and string.byte(v, -1) ~= 42 then
      redis.pcall('APPEND', KEYS[1], '*') -- refused when memory is full
    end
    return -(pttl + 1)
  end
  fence, rel = f, r
end
if p then
  if not valid(p) then
    return redis.error_reply('ERR redislock: the proposed fence is not a positive int64')
  end
  if fence and not below(fence, p) then
    return {-1, out(fence)}
  end
  fence = p
elseif fence then
  fence = inc(fence)
  if not valid(fence) then
    return redis.error_reply('ERR redislock: no fence is left on this key: its last fence is 9223372036854775807')
  end
else
  -- No memory of this key: start from the server clock in µs. Grants come
  -- far slower than one per µs, so a key's fences stay below the clock, and
  -- a fence minted from it after the key was lost or expired is still
  -- above every earlier one.
  local t = redis.call('TIME')
  fence = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence .. ':' .. rel .. ':' .. (ARGV[4] or '') .. ';', 'PX', ARGV[2])
return out(fence)
