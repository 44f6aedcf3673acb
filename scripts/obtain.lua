-- obtain: set the lock if absent, with a fresh token and a millisecond TTL,
-- and mint its fence in the same atomic step. With ARGV[5], hand the lock
-- over: release the grant ARGV[5] and grant ARGV[1] in the same step.
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter key (same hash slot)
-- ARGV[1]  token (never contains ':')
-- ARGV[2]  lock TTL in milliseconds (> 0)
-- ARGV[3]  proposed fence; 0 = mint here: counter + 1, or the server time in
--          µs when there is no counter (first grant, or the counter was lost)
-- ARGV[4]  fence counter TTL in milliseconds (> 0)
-- ARGV[5]  optional, handoff: the token of a grant being released (release.lua
--          without its wake-up: the lock stays held). When KEYS[1] holds it,
--          the lock passes to ARGV[1] as if released and obtained at once.
--
-- The lock key holds "token:fence", with a "*" appended once an attempt
-- found it held: someone waits, and its release must wake them (release.lua).
-- Replies:
--   {1, fence}    granted; also when KEYS[1] already holds ARGV[1] (a replay
--                 of this same request), with the fence minted the first time
--   {0, pttl}     held by another grant (pttl as PTTL reports it)
--   {-1, counter} the proposal was not above the stored counter
-- With ARGV[5], a third element: 1 if the grant ARGV[5] was released (by
-- this run or an earlier run of this same request), else 0.
local from = ARGV[5]
local handed = 0
-- reply adds, for a handoff, whether the grant "from" was released.
local function reply(a, b)
  if from then
    return {a, b, handed}
  end
  return {a, b}
end
-- releasedBefore: did an earlier run of this request release "from" (its
-- reply lost, and go-redis re-sent it)? See release.lua's tombstones.
local function releasedBefore()
  local c = redis.call('GET', KEYS[2]) or ''
  return string.find(c .. ' ', ' ' .. from .. ' ', 1, true) and 1 or 0
end
-- GET, not MGET: a key of another type must fail (WRONGTYPE), not look free.
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
    if from then
      handed = releasedBefore()
    end
    return reply(1, tonumber(string.match(v, ':(%d+)')))
  end
  if not from or string.sub(v, 1, #from + 1) ~= from .. ':' then
    if from then
      handed = releasedBefore()
    end
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl >= 0 and string.sub(v, -1) ~= '*' then
      redis.call('APPEND', KEYS[1], '*')
    end
    return reply(0, pttl)
  end
  handed = 1
end
if tonumber(ARGV[2]) <= 0 or tonumber(ARGV[4]) <= 0 then
  return redis.error_reply('ERR redislock: TTL must be positive')
end
-- The counter holds "fence" and the tokens of recent releases (release.lua).
local c = redis.call('GET', KEYS[2]) or '0'
local released = ''
local sp = string.find(c, ' ', 1, true)
if sp then
  released = string.sub(c, sp)
  c = string.sub(c, 1, sp - 1)
end
if handed == 1 then
  -- The handed-over grant's release, remembered as release.lua does.
  released = released .. ' ' .. from
  if #released > 16 * (#from + 1) then
    released = string.sub(released, -8 * (#from + 1))
  end
end
local counter = tonumber(c) or 0
local fence = tonumber(ARGV[3])
if fence == 0 and counter > 0 then
  -- The counter started at the server clock in µs and grows by one per
  -- grant, far slower than the clock: it stays below the clock, so a fence
  -- minted from the clock after the counter is lost is still higher.
  fence = counter + 1
elseif fence == 0 then
  local t = redis.call('TIME')
  fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
elseif fence <= counter then
  return {-1, counter}
end
local f = string.format('%d', fence)
redis.call('SET', KEYS[2], f .. released, 'PX', ARGV[4])
-- A handoff keeps the mark of the waiters of other clients.
local mark = ''
if v and string.sub(v, -1) == '*' then
  mark = '*'
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. f .. mark, 'PX', ARGV[2])
return reply(1, fence)
