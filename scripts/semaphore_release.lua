-- semaphore_release: give a permit back, or withdraw a request from the
-- queue (a waiter that gave up, or a request whose reply was lost), and wake
-- the waiters that the freed slot awaits.
--
-- KEYS     see semaphore_prelude.lua
-- ARGV[1]  token (or ticket)
-- ARGV[2]  wake channel
--
-- Replies:
--   1  a permit was held by token and is released
--   0  no permit was held by token (its lease had ended, it was released
--      already, or token was only queued)
local score = redis.call('ZSCORE', holders, ARGV[1])
local held = score and tonumber(score) > now
if score then drop(ARGV[1]) end
dequeue(ARGV[1])
purge()
wake(stored_limit(), ARGV[2])
keep()
if held then return 1 end
return 0
