-- semaphore_inspect: the semaphore as the server sees it now.
--
-- KEYS     see semaphore_prelude.lua
-- ARGV     none
--
-- Replies:
--   {limit, waiters, holders}  limit 0 when the semaphore is unused;
--                              holders is a list, by slot, of
--                              {slot, fence, holder identity, lease left ms,
--                              age ms}
local limit = stored_limit()
purge()
local out = {}
for i = 0, limit - 1 do
  local token = redis.call('HGET', state, 's' .. i)
  if token then
    local info = redis.call('HGET', state, 't' .. token)
    local slot, fence, acquired, holder = string.match(info, '^(%d+):(%d+):(%d+):(.*)$')
    local score = redis.call('ZSCORE', holders, token)
    table.insert(out, {tonumber(slot), tonumber(fence), holder, tonumber(score) - now, now - tonumber(acquired)})
  end
end
local waiters = redis.call('ZCARD', queue)
keep()
return {limit, waiters, out}
