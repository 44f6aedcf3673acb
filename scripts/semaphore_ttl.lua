-- semaphore_ttl: a permit's remaining lease on the server's clock.
--
-- KEYS     see semaphore_prelude.lua
-- ARGV[1]  token
--
-- Replies:
--   ms  the remaining lease (> 0)
--   -1  not held
local score = redis.call('ZSCORE', holders, ARGV[1])
if not score or tonumber(score) <= now then return -1 end
return tonumber(score) - now
