-- multi_release: delete several locks where they still hold this grant, and
-- wake each deleted lock's waiters.
--
-- KEYS[3i-2]  lock key i (its value is "token:fence")
-- KEYS[3i-1]  wake channel of lock i (same hash slot)
-- KEYS[3i]    fair-mode queue of lock i (same hash slot): the wake-up
--             names its head's ticket
-- ARGV[1]     the grant's token
-- ARGV[2]     how to wake waiters: "p" PUBLISH, "s" SPUBLISH, "" none
--
-- Replies the number of locks deleted.
local prefix = ARGV[1] .. ':'
local n = 0
for i = 1, #KEYS / 3 do
  local v = redis.call('GET', KEYS[3 * i - 2])
  if v and string.sub(v, 1, #prefix) == prefix then
    redis.call('DEL', KEYS[3 * i - 2])
    n = n + 1
    local msg = redis.call('ZRANGE', KEYS[3 * i], 0, 0)[1] or 'r'
    if ARGV[2] == 'p' then
      redis.pcall('PUBLISH', KEYS[3 * i - 1], msg)
    elseif ARGV[2] == 's' then
      redis.pcall('SPUBLISH', KEYS[3 * i - 1], msg)
    end
  end
end
return n
