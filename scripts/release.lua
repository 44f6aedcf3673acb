-- release: give the lock back only if it still holds this grant, and wake
-- the lock's waiters in the same atomic step; with ARGV[4], a handoff: the
-- grant ARGV[4] takes the lock in the same step, with the next fence. The
-- key is not deleted: it becomes a released record (record.lua) that
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
-- The release is named first among the latest releases (record.lua),
-- so that a replay of this same release (go-redis re-sends a command whose
-- reply was lost to EOF) still answers as the first run did, even when
-- other grants came in between. A handoff keeps the waiters' mark and
-- wakes no one. A release wakes waiters when an attempt marked the lock,
-- in fair mode always, with the ticket at the head of the fair queue ("r"
-- when there is no queue or no one in it), so that the head's client
-- wakes it.
--
-- Replies 0 when the key holds no grant with this token and no memory of
-- its release; 1 when released (by this run or an earlier one); with
-- ARGV[4], the new grant's fence (> 1, as a decimal string) when handed
-- over (also on a replay: the key still holds ARGV[4]).
local v = redis.call('GET', KEYS[1])
-- record.lua
if not tok then
  return 0
end
local to = ARGV[4]
if tok == ARGV[1] then -- rel: this release first, the newest 7 carried on
  if to then
    -- fence.lua: inc
    local g = inc(fence) -- none left after 2^63-1: release
    if g and not redis.pcall('SET', KEYS[1], to .. ':' .. g .. ': ' .. string.sub(tok, 1, 12) .. string.sub(rel, 1, 7 * 13) .. ':' .. ARGV[6] .. ';' .. mark, 'PX', ARGV[5]).err then
      return g
    end
  end
  if redis.pcall('SET', KEYS[1], '~:' .. fence .. ': ' .. string.sub(tok, 1, 12) .. string.sub(rel, 1, 7 * 13), 'PX', ARGV[2]).err then
    redis.call('DEL', KEYS[1]) -- out of memory: DEL frees memory
  end
  local wake = ARGV[3]
  local fair = wake == 'pq' or wake == 'sq'
  if fair or (wake == 'p' or wake == 's') and mark == '*' then
    local msg = fair and redis.call('ZRANGE', KEYS[2], 0, 0)[1] or 'r'
    if wake == 's' or wake == 'sq' then
      redis.pcall('SPUBLISH', KEYS[1] .. ':wake', msg)
    else
      redis.pcall('PUBLISH', KEYS[1] .. ':wake', msg)
    end
  end
  return 1
elseif to and tok == to then -- handed over by an earlier run of this call
  return fence
end
-- record.lua: names
if names(rel, ARGV[1]) then -- released by an earlier run of this call
  return 1
end
return 0
