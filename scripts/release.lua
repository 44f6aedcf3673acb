-- release: delete the lock only if it still holds this grant.
--
-- KEYS[1]  lock key (its value is "token:fence")
-- ARGV[1]  the grant's token
--
-- Replies 1 when deleted, 0 when the key holds no grant with this token.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  return redis.call('DEL', KEYS[1])
end
return 0
