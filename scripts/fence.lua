-- fence.lua: the fence functions of the scripts that mint, compare or
-- check fences; internal/script puts those a script names on its line
-- "-- fence.lua" (or "-- record.lua"), else in front. It has no KEYS, ARGV
-- or reply of its own.
-- Fences are decimal integers in (0, 2^63) without leading zeros, compared
-- and incremented as strings: Lua numbers are doubles, exact only up to
-- 2^53, and fences minted elsewhere (nanosecond clocks, database
-- sequences) go beyond; the server clock in µs passes 2^53 in 2255.
local function below(a, b) -- fences a < b
  if #a ~= #b then
    return #a < #b
  end
  local x, y = tonumber(a), tonumber(b) -- exact below 2^53; rounded above, never below
  if x < 9007199254740992 and y < 9007199254740992 then
    return x < y
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return false
end
local function valid(f) -- f if it is a fence, else nil
  if f and #f <= 19 and string.find(f, '^[1-9]%d*$') then
    local hi = #f == 19 and tonumber(string.sub(f, 1, 10)) -- 2^63-1 by halves, each exact
    if not hi or hi < 9223372036 or hi == 9223372036 and tonumber(string.sub(f, 11)) <= 854775807 then
      return f
    end
  end
end
local function out(f) -- f as a reply: a Lua number while exact
  local n = tonumber(f) -- rounded above 2^53, never below
  if n < 9007199254740992 then
    return n
  end
  return f
end
local function inc(f) -- the fence after f, nil after 2^63-1: none is left; and it as a Lua number while exact
  local n = tonumber(f) -- exact below 2^53; rounded above, never below
  if n < 9007199254740991 then
    return string.format('%d', n + 1), n + 1
  elseif f == '9223372036854775807' then
    return nil
  end
  local i = #f -- the digits after the last that is not a 9 become 0s
  while string.byte(f, i) == 57 do
    i = i - 1
  end
  if i == 0 then
    return '1' .. string.rep('0', #f)
  end
  return string.sub(f, 1, i - 1) .. string.char(string.byte(f, i) + 1) .. string.rep('0', #f - i)
end
local function clock() -- the server time in µs: the first fence of a key with no memory
  -- Grants come far slower than one per µs, so a key's fences stay below
  -- the clock, and a fence minted from it after the key was lost or
  -- expired is still above every earlier one.
  local t = redis.call('TIME')
  return t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
end
local function spent() -- the error of a key whose last fence is 2^63-1
  return redis.error_reply('ERR redislock: no fence is left on this key: its last fence is 9223372036854775807')
end
