-- release: delete the lock only if it still holds this grant, and wake the
-- lock's waiters in the same atomic step.
--
-- KEYS[1]  lock key (its value is "token:fence")
-- KEYS[2]  fence counter key (same hash slot)
-- KEYS[3]  wake channel (same hash slot)
-- KEYS[4]  fair-mode queue (a sorted set of waiters' tickets)
-- ARGV[1]  the grant's token
-- ARGV[2]  how to wake waiters: "p" PUBLISH, "s" SPUBLISH (sharded, Redis 7+),
--          "" = no wake-up
-- ARGV[3]  fence counter TTL in milliseconds (> 0)
--
-- The counter holds "fence tok1 tok2 ...": the tokens of the last 8
-- releases, newest first (obtain carries them over). A replay of this same
-- release (go-redis re-sends a command whose reply was lost to EOF) finds
-- its token there and still answers 1, even when other grants came in
-- between, instead of "not held". The wake-up's payload is the ticket
-- at the head of the fair-mode queue, so that the head's client wakes that
-- waiter; "r" when no one is queued.
--
-- Replies 1 when deleted (or already deleted by this token), 0 when the key
-- holds no grant with this token.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  redis.call('DEL', KEYS[1])
  local c = redis.call('GET', KEYS[2]) or string.sub(v, #ARGV[1] + 2)
  local kept, n = '', 0
  for t in string.gmatch(string.match(c, '^%d+(.*)$') or '', '%S+') do
    if n < 7 then
      kept, n = kept .. ' ' .. t, n + 1
    end
  end
  redis.call('SET', KEYS[2], string.match(c, '^%d+') .. ' ' .. ARGV[1] .. kept, 'PX', ARGV[3])
  if ARGV[2] == 'p' or ARGV[2] == 's' then
    local msg = redis.call('ZRANGE', KEYS[4], 0, 0)[1] or 'r'
    if ARGV[2] == 'p' then
      redis.pcall('PUBLISH', KEYS[3], msg)
    else
      redis.pcall('SPUBLISH', KEYS[3], msg)
    end
  end
  return 1
end
local c = redis.call('GET', KEYS[2])
if c and string.find(c .. ' ', ' ' .. ARGV[1] .. ' ', 1, true) then
  return 1
end
return 0
