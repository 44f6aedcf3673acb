-- fenced_set: write a protected value only if the writer's fence is not older
-- than the newest fence this key has accepted.
--
-- KEYS[1]  the protected resource (a hash: fields "v" value, "f" fence)
-- ARGV[1]  value
-- ARGV[2]  the writer's fence
-- ARGV[3]  TTL of the resource in milliseconds; 0 = keep no expiry
--
-- Replies {1, fence} when written, {0, newest} when the fence is stale;
-- each fence a decimal string.
-- Fences are decimal integers in (0, 2^63) without leading zeros (the
-- library sends them so, and stores them as sent), compared as strings:
-- Lua numbers are doubles, exact only up to 2^53, and fences minted
-- elsewhere (nanosecond clocks, database sequences) go beyond.
local newest = redis.call('HGET', KEYS[1], 'f') or '0'
local fence = ARGV[2]
if below(fence, newest) then
  return {0, newest}
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'f', fence)
if tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {1, fence}
