-- obtain: set the lock if absent, with a fresh token and a millisecond TTL,
-- and mint its fence in the same atomic step. With ARGV[5], hand the lock
-- over: release the grant ARGV[5] and grant ARGV[1] in the same step.
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter key (same hash slot): the last fence minted
-- KEYS[3]  released tokens key (same hash slot; see release.lua); only read
--          or written with ARGV[6]
-- ARGV[1]  token (never contains ':')
-- ARGV[2]  lock TTL in milliseconds (> 0)
-- ARGV[3]  proposed fence; 0 = mint here: counter + 1, or the server time in
--          µs when there is no counter (first grant, or the counter was lost
--          or expired)
-- ARGV[4]  fence counter TTL in milliseconds (> 0), set when the counter is
--          created (and by each proposal); also the TTL of KEYS[3]
-- ARGV[5]  holder identity to record, "" for none
-- ARGV[6]  optional, handoff: the token of a grant being released (release.lua
--          without its wake-up: the lock stays held). When KEYS[1] holds it,
--          the lock passes to ARGV[1] as if released and obtained at once.
--
-- The lock key holds "token:fence", or "token:fence:holder;" with a holder,
-- and a "*" appended once an attempt found it held: someone waits, and its
-- release must wake them (release.lua). An unmarked value never ends in "*".
-- Replies:
--   {1, fence}    granted; also when KEYS[1] already holds ARGV[1] (a replay
--                 of this same request), with the fence minted the first time
--   {0, pttl}     held by another grant (pttl as PTTL reports it)
--   {-1, counter} the proposal was not above the stored counter
-- With ARGV[6], a third element: 1 if the grant ARGV[5] was released (by
-- this run or an earlier run of this same request), else 0.
local from = ARGV[6]
local handed = 0
local v = redis.call('GET', KEYS[1])
if v then
  local mine = string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':'
  if not mine and from and string.sub(v, 1, #from + 1) == from .. ':' then
    handed = 1
  else
    if from then
      -- Released already (a replay whose first run's reply was lost)?
      local rel = redis.call('GET', KEYS[3]) or ''
      handed = string.find(rel .. ' ', ' ' .. from .. ' ', 1, true) and 1 or 0
    end
    local a, b = 1, tonumber(string.match(v, ':(%d+)'))
    if not mine then
      a, b = 0, redis.call('PTTL', KEYS[1])
      if b >= 0 and string.sub(v, -1) ~= '*' then
        redis.call('APPEND', KEYS[1], '*')
      end
    end
    if from then
      return {a, b, handed}
    end
    return {a, b}
  end
end
if tonumber(ARGV[2]) <= 0 or tonumber(ARGV[4]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
-- counterValue reads the counter's fence: a plain integer, or the leading
-- number of "fence tok1 tok2 ...", as an earlier version wrote it (INCR
-- refuses that one); 0 when there is no counter or no number.
local function counterValue()
  return tonumber((string.match(redis.call('GET', KEYS[2]) or '', '^%d+'))) or 0
end
local fence = tonumber(ARGV[3])
if fence == 0 then
  fence = redis.pcall('INCR', KEYS[2])
  local reset = type(fence) == 'table' or fence == 1
  if type(fence) == 'table' then
    fence = counterValue() + 1
  end
  if fence == 1 then
    -- No counter: start it at the server clock in µs. It grows by one per
    -- grant, far slower than the clock, so it stays below the clock, and a
    -- fence minted from the clock after the counter is lost or expired is
    -- still higher than every earlier one.
    local t = redis.call('TIME')
    fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  if reset then
    redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[4])
  end
else
  local counter = counterValue()
  if fence <= counter then
    return {-1, counter}
  end
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
end
if handed == 1 then
  -- The handed-over grant's release, remembered as release.lua does.
  local tok = ' ' .. from
  local n = redis.call('APPEND', KEYS[3], tok)
  if n == #tok then
    redis.call('PEXPIRE', KEYS[3], ARGV[4])
  elseif n > 16 * #tok then
    redis.call('SET', KEYS[3], string.sub(redis.call('GET', KEYS[3]), -8 * #tok), 'PX', ARGV[4])
  end
end
-- A handoff keeps the mark of the waiters of other clients.
local mark = ''
if v and string.sub(v, -1) == '*' then
  mark = '*'
end
local holder = ''
if ARGV[5] ~= '' then
  holder = ':' .. ARGV[5] .. ';'
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%d', fence) .. holder .. mark, 'PX', ARGV[2])
if from then
  return {1, fence, handed}
end
return {1, fence}
