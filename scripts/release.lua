-- release: give the lock back only if it still holds this grant, and wake
-- the lock's waiters in the same atomic step; with ARGV[4], a handoff: the
-- grant ARGV[4] takes the lock in the same step, with the next fence. The
-- key is not deleted: it becomes a released record (see obtain.lua) that
-- keeps the last fence and the names of the latest releases, for ARGV[2]
-- milliseconds. When Redis refuses a write (out of memory) the lock is
-- freed all the same: a refused handoff releases, a refused record is
-- deleted (the next fence then comes from the clock).
--
-- KEYS[1]  lock key
-- KEYS[2]  fair-mode queue (a sorted set of waiters' tickets), same hash
--          slot; only with ARGV[3] "pq" or "sq"
-- ARGV[1]  the grant's token
-- ARGV[2]  TTL of the released record in milliseconds (> 0)
-- ARGV[3]  optional, how to wake waiters, on the lock's channel KEYS[1] ..
--          ":wake" (a channel, not a key; same hash slot): "p" PUBLISH,
--          "s" SPUBLISH (sharded, Redis 7+); "pq", "sq" the same, naming
--          the fair queue's head; absent or "": no wake-up
-- ARGV[4]  optional, handoff: the new grant's token (as obtain.lua's
--          ARGV[1]); ARGV[5] its TTL in ms (> 0), ARGV[6] its holder ("")
--
-- A release is listed first among the latest 8, each named by the first
-- 12 characters of its token, carried on by the next grants, so that a
-- replay of this same release (go-redis re-sends a command whose reply was
-- lost to EOF) still answers as the first run did, even when other grants
-- came in between. A handoff keeps the waiters' mark ("*") and wakes no
-- one. A release wakes waiters when an attempt marked the lock, in fair
-- mode always, with the ticket at the head of the fair queue ("r" when
-- there is no queue or no one in it), so that the head's client wakes it.
--
-- Replies 0 when the key holds no grant with this token and no memory of
-- its release; 1 when released (by this run or an earlier one); with
-- ARGV[4], the new grant's fence (> 1, as a decimal string) when handed
-- over (also on a replay: the key still holds ARGV[4]).
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
-- The value is tok ":" fence ":" rel [":" ...] (obtain.lua), read with
-- plain searches, making as few strings and library calls as it can (each
-- costs the server about as much as a small command).
local tok, to = ARGV[1], ARGV[4]
local n = #tok
local j = string.find(v, ':', n + 2, true)
if j and string.sub(v, 1, n + 1) == tok .. ':' then
  if to then
    local f, r = string.match(v, '^([1-9]%d*):([^:]*)', n + 2)
    local g = f and #f <= 15 and string.format('%d', tonumber(f) + 1) -- exact
    if f and not g then
-- fence.lua
      g = valid(inc(f)) -- nil after 2^63 - 1: no fence left, release
    end
    if g then
      local mark = ''
      if string.byte(v, -1) == 42 then
        mark = '*'
      end
      local ok = redis.pcall('SET', KEYS[1], to .. ':' .. g .. ': ' .. string.sub(tok, 1, 12) .. string.sub(r, 1, 7 * 13) .. ':' .. ARGV[6] .. ';' .. mark, 'PX', ARGV[5])
      if not ok.err then
        return g
      end
    end
  end
  -- rel runs to the next ':' (a grant) or the end; the newest 7 carried
  -- on, this release named first by its token's first 12 characters.
  local k = (string.find(v, ':', j + 1, true) or (#v + 1)) - 1
  if k > j + 7 * 13 then
    k = j + 7 * 13
  end
  local ok = redis.pcall('SET', KEYS[1], '~:' .. string.sub(v, n + 2, j) .. ' ' .. string.sub(tok, 1, 12) .. string.sub(v, j + 1, k), 'PX', ARGV[2])
  if ok.err then
    redis.call('DEL', KEYS[1]) -- out of memory: DEL frees memory
  end
  local wake = ARGV[3]
  if wake == 'pq' or wake == 'sq' or (wake == 'p' or wake == 's') and string.byte(v, -1) == 42 then
    local msg = 'r'
    if wake == 'pq' or wake == 'sq' then
      msg = redis.call('ZRANGE', KEYS[2], 0, 0)[1] or 'r'
    end
    if wake == 's' or wake == 'sq' then
      redis.pcall('SPUBLISH', KEYS[1] .. ':wake', msg)
    else
      redis.pcall('PUBLISH', KEYS[1] .. ':wake', msg)
    end
  end
  return 1
end
-- Not this grant: handed over or released by an earlier run of this call?
if to and string.sub(v, 1, #to + 1) == to .. ':' then
  return string.match(v, '^[^:]*:(%d+):')
end
local i = string.find(v, ':', 1, true)
j = i and string.find(v, ':', i + 1, true)
if j then
  local r = string.sub(v, j + 1, (string.find(v, ':', j + 1, true) or 0) - 1)
  if string.find(r .. ' ', ' ' .. string.sub(tok, 1, 12) .. ' ', 1, true) then
    return 1
  end
end
return 0
