-- semaphore_refresh: extend a permit's lease, only while it is held: a
-- permit whose lease has ended on the server's clock is gone, even if no one
-- took its slot yet.
--
-- KEYS     see semaphore_prelude.lua
-- ARGV[1]  token
-- ARGV[2]  lease TTL in ms (> 0), from now
-- ARGV[3]  wake channel
--
-- Replies:
--   1  extended
--   0  not held (its lease ended, or it was released)
local score = redis.call('ZSCORE', holders, ARGV[1])
if not score or tonumber(score) <= now then
  local limit = stored_limit()
  if purge() > 0 then wake(limit, ARGV[3]) end
  keep()
  return 0
end
redis.call('ZADD', holders, 'XX', int(now + tonumber(ARGV[2])), ARGV[1])
keep()
return 1
