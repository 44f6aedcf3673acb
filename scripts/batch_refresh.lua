-- batch_refresh: extend each lock of a batch, only while it holds its
-- grant (refresh.lua for many keys, for the batched renewal of held locks).
--
-- KEYS[i]     lock key i (a grant or a released record: record.lua,
--             whose grant test, the prefix token ":", this script
--             makes); all KEYS in one Redis Cluster slot
-- ARGV[1]     new TTL in milliseconds for every key (an integer > 0;
--             PEXPIRE with 0 or less would delete)
-- ARGV[i+1]   the token of the grant on KEYS[i]
--
-- Replies an array with one integer per key, in KEYS order:
--    1  extended to ARGV[1]
--    0  not held: the key is absent, released or holds another grant
--   -1  not held: the key holds a value that is not a string (WRONGTYPE)
-- or, before touching any key, an error when the TTL is not a positive
-- integer or ARGV does not hold one token per key.
if not string.match(ARGV[1] or '', '^[1-9][0-9]*$') then
  return redis.error_reply('ERR redislock: TTL must be a positive integer')
end
if #ARGV ~= #KEYS + 1 then
  return redis.error_reply('ERR redislock: batch_refresh needs one token per key')
end
local ttl = ARGV[1]
local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    out[i] = -1
  else
    local prefix = ARGV[i + 1] .. ':'
    if v and string.sub(v, 1, #prefix) == prefix then
      out[i] = redis.call('PEXPIRE', key, ttl)
    else
      out[i] = 0
    end
  end
end
return out
