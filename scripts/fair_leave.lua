-- fair_leave: take a waiter out of the fair queue (it gave up waiting). If
-- it was the head and the lock is free, wake the waiters so that the new
-- head takes it.
--
-- KEYS[1]  lock key (free when absent or a released record: see
--          record.lua)
-- KEYS[2]  wake channel (same hash slot)
-- KEYS[3]  queue (sorted set of waiters' tickets)
-- KEYS[4]  queue deadlines (sorted set of tickets, and fair_obtain.lua's
--          "~"): deleted with the queue's last entry
-- ARGV[1]  the waiter's ticket
-- ARGV[2]  how to wake waiters: "p" PUBLISH, "s" SPUBLISH, "" none
--
-- Replies 1 when the entry was removed, 0 when there was none.
local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
local n = redis.call('ZREM', KEYS[3], ARGV[1])
local newhead = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
if newhead then
  redis.call('ZREM', KEYS[4], ARGV[1])
else
  redis.call('DEL', KEYS[4])
end
if head ~= ARGV[1] then
  return n
end
local v = redis.call('GET', KEYS[1])
-- record.lua
if not v or tok == '~' then
  local msg = newhead or 'r'
  if ARGV[2] == 'p' then
    redis.pcall('PUBLISH', KEYS[2], msg)
  elseif ARGV[2] == 's' then
    redis.pcall('SPUBLISH', KEYS[2], msg)
  end
end
return n
