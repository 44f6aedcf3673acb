-- multi_release: release several locks where they still hold this grant
-- (release.lua for many keys), and wake each released lock's waiters.
--
-- KEYS[3i-2]  lock key i (a grant or a released record: see record.lua)
-- KEYS[3i-1]  wake channel of lock i (same hash slot)
-- KEYS[3i]    fair-mode queue of lock i (same hash slot): the wake-up
--             names its head's ticket
-- ARGV[1]     the grant's token
-- ARGV[2]     how to wake waiters: "p" PUBLISH, "s" SPUBLISH, "" none
-- ARGV[3]     TTL of the released records in milliseconds (> 0)
--
-- Each released lock key becomes a released record (release.lua) with
-- ARGV[3] as its TTL. Replies the number of locks released by this call
-- or, as remembered in their records, by an earlier run of it.
-- record.lua: names
local n = 0
for i = 1, #KEYS / 3 do
  local k = KEYS[3 * i - 2]
  local v = redis.call('GET', k)
  -- record.lua
  if tok == ARGV[1] then -- rel: this release first, the newest 7 carried on
    if redis.pcall('SET', k, '~:' .. fence .. ': ' .. string.sub(tok, 1, 12) .. string.sub(rel, 1, 7 * 13), 'PX', ARGV[3]).err then
      redis.call('DEL', k) -- out of memory: delete instead (release.lua)
    end
    n = n + 1
    local msg = redis.call('ZRANGE', KEYS[3 * i], 0, 0)[1] or 'r'
    if ARGV[2] == 'p' then
      redis.pcall('PUBLISH', KEYS[3 * i - 1], msg)
    elseif ARGV[2] == 's' then
      redis.pcall('SPUBLISH', KEYS[3 * i - 1], msg)
    end
  elseif tok and names(rel, ARGV[1]) then
    n = n + 1
  end
end
return n
