-- release: give the lock back only if it still holds this grant, and wake
-- the lock's waiters in the same atomic step. The key is not deleted: it
-- becomes a released record (see obtain.lua) that keeps the last fence and
-- the names of the latest releases, for ARGV[3] milliseconds; only when
-- Redis refuses the write (out of memory) is the key deleted instead.
--
-- KEYS[1]  lock key
-- KEYS[2]  wake channel (same hash slot)
-- KEYS[3]  fair-mode queue (a sorted set of waiters' tickets); only read
--          with ARGV[4] = "q"
-- ARGV[1]  the grant's token
-- ARGV[2]  how to wake waiters: "p" PUBLISH, "s" SPUBLISH (sharded, Redis 7+),
--          "" = no wake-up
-- ARGV[3]  TTL of the released record in milliseconds (> 0)
-- ARGV[4]  "q": name the fair queue's head in the wake-up; "" = no queue
--
-- The released record lists this release first among the latest 8, each
-- named by the first 12 characters of its token, carried on by the next
-- grants (obtain.lua), so that a replay of
-- this same release (go-redis re-sends a command whose reply was lost to
-- EOF) finds its token and still answers 1, even when other grants came in
-- between, instead of "not held". The wake-up's payload is the ticket at
-- the head of the fair-mode queue, so that the head's client wakes that
-- waiter; "r" when there is no queue or no one in it.
--
-- Replies 1 when released (or already released by this token), 0 when the
-- key holds no grant with this token and no memory of its release.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
-- The value is tok ":" fence ":" rel [":" ...] (obtain.lua), read with
-- plain searches and byte compares, making as few strings as it can.
local tok = ARGV[1]
local n = #tok
local id = string.sub(tok, 1, 12) -- the release's name in rel
local j = string.find(v, ':', n + 2, true)
if j and string.byte(v, n + 1) == 58 and string.find(v, tok, 1, true) == 1 then
  -- rel runs to the next ':' (a grant) or the end; the newest 7 carried on.
  local k = (string.find(v, ':', j + 1, true) or (#v + 1)) - 1
  local ok = redis.pcall('SET', KEYS[1], '~:' .. string.sub(v, n + 2, j) .. ' ' .. id .. string.sub(v, j + 1, math.min(k, j + 7 * 13)), 'PX', ARGV[3])
  if type(ok) == 'table' and ok.err then
    -- Out of memory (maxmemory with noeviction): delete instead, which
    -- frees memory. The next fence then comes from the clock.
    redis.call('DEL', KEYS[1])
  end
  -- Wake waiters, if an attempt marked the lock (fair mode: always).
  if (ARGV[2] == 'p' or ARGV[2] == 's') and (string.byte(v, -1) == 42 or ARGV[4] == 'q') then
    local msg = 'r'
    if ARGV[4] == 'q' then
      msg = redis.call('ZRANGE', KEYS[3], 0, 0)[1] or 'r'
    end
    if ARGV[2] == 'p' then
      redis.pcall('PUBLISH', KEYS[2], msg)
    else
      redis.pcall('SPUBLISH', KEYS[2], msg)
    end
  end
  return 1
end
-- Not this grant: released by an earlier run of this request?
local i = string.find(v, ':', 1, true)
j = i and string.find(v, ':', i + 1, true)
if j then
  local r = string.sub(v, j + 1, (string.find(v, ':', j + 1, true) or 0) - 1)
  if string.find(r .. ' ', ' ' .. id .. ' ', 1, true) then
    return 1
  end
end
return 0
