-- release: give the lock back only if it still holds this grant, and wake
-- the lock's waiters in the same atomic step. The key is not deleted: it
-- becomes a released record (see obtain.lua) that keeps the last fence and
-- the names of the latest releases, for ARGV[2] milliseconds; only when
-- Redis refuses the write (out of memory) is the key deleted instead.
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
--
-- The released record lists this release first among the latest 8, each
-- named by the first 12 characters of its token, carried on by the next
-- grants (obtain.lua), so that a replay of
-- this same release (go-redis re-sends a command whose reply was lost to
-- EOF) finds its token and still answers 1, even when other grants came in
-- between, instead of "not held". The wake-up's payload is the ticket at
-- the head of the fair-mode queue, so that the head's client wakes that
-- waiter; "r" when there is no queue or no one in it. Waiters are woken
-- when an attempt marked the lock (its value ends in "*"), in fair mode
-- always.
--
-- Replies 1 when released (or already released by this token), 0 when the
-- key holds no grant with this token and no memory of its release.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
-- The value is tok ":" fence ":" rel [":" ...] (obtain.lua), read with
-- plain searches, making as few strings and library calls as it can (each
-- costs the server about as much as a small command).
local tok = ARGV[1]
local n = #tok
local j = string.find(v, ':', n + 2, true)
if j and string.sub(v, 1, n + 1) == tok .. ':' then
  -- rel runs to the next ':' (a grant) or the end; the newest 7 carried
  -- on, this release named first by its token's first 12 characters.
  local k = (string.find(v, ':', j + 1, true) or (#v + 1)) - 1
  if k > j + 7 * 13 then
    k = j + 7 * 13
  end
  local ok = redis.pcall('SET', KEYS[1], '~:' .. string.sub(v, n + 2, j) .. ' ' .. string.sub(tok, 1, 12) .. string.sub(v, j + 1, k), 'PX', ARGV[2])
  if ok.err then
    -- Out of memory (maxmemory with noeviction): delete instead, which
    -- frees memory. The next fence then comes from the clock.
    redis.call('DEL', KEYS[1])
  end
  -- Wake waiters, if an attempt marked the lock (fair mode: always).
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
-- Not this grant: released by an earlier run of this request?
local i = string.find(v, ':', 1, true)
j = i and string.find(v, ':', i + 1, true)
if j then
  local r = string.sub(v, j + 1, (string.find(v, ':', j + 1, true) or 0) - 1)
  if string.find(r .. ' ', ' ' .. string.sub(tok, 1, 12) .. ' ', 1, true) then
    return 1
  end
end
return 0
