-- release: delete the lock only if it still holds this grant, and wake the
-- lock's waiters in the same atomic step.
--
-- KEYS[1]  lock key (its value is "token:fence", "*" appended when someone
--          waits: see obtain.lua)
-- KEYS[2]  released tokens key (same hash slot)
-- KEYS[3]  wake channel (same hash slot)
-- KEYS[4]  fair-mode queue (a sorted set of waiters' tickets)
-- ARGV[1]  the grant's token
-- ARGV[2]  how to wake waiters: "p" PUBLISH, "s" SPUBLISH (sharded, Redis 7+),
--          "" = no wake-up
-- ARGV[3]  TTL of the released tokens key in milliseconds (> 0)
-- ARGV[4]  "q": name the fair queue's head in the wake-up; "" = no queue
--
-- KEYS[2] holds " tok1 tok2 ...": the tokens of recent releases, oldest
-- first (tokens all have one length). It keeps at least the last 8, so that
-- a replay of this same release (go-redis re-sends a command whose reply
-- was lost to EOF) finds its token and still answers 1, even when other
-- grants came in between, instead of "not held". Its TTL is set when it is
-- created and when it is trimmed. The wake-up's payload is the ticket at the
-- head of the fair-mode queue, so that the head's client wakes that waiter;
-- "r" when there is no queue or no one in it.
--
-- Replies 1 when deleted (or already deleted by this token), 0 when the key
-- holds no grant with this token.
local tok = ' ' .. ARGV[1]
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  redis.call('DEL', KEYS[1])
  local n = redis.call('APPEND', KEYS[2], tok)
  if n == #tok then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  elseif n > 16 * #tok then
    -- Trim to the newest 8 tokens.
    redis.call('SET', KEYS[2], string.sub(redis.call('GET', KEYS[2]), -8 * #tok), 'PX', ARGV[3])
  end
  -- Wake waiters, if an attempt marked the lock (fair mode: always).
  if (ARGV[2] == 'p' or ARGV[2] == 's') and (string.sub(v, -1) == '*' or ARGV[4] == 'q') then
    local msg = 'r'
    if ARGV[4] == 'q' then
      msg = redis.call('ZRANGE', KEYS[4], 0, 0)[1] or 'r'
    end
    if ARGV[2] == 'p' then
      redis.pcall('PUBLISH', KEYS[3], msg)
    else
      redis.pcall('SPUBLISH', KEYS[3], msg)
    end
  end
  return 1
end
local rel = redis.call('GET', KEYS[2])
if rel and string.find(rel .. ' ', tok .. ' ', 1, true) then
  return 1
end
return 0
