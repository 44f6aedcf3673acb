-- fence.lua: the fence functions that obtain.lua, join.lua, fair_obtain.lua,
-- multi_obtain.lua, fenced_set.lua, record_delete.lua and release.lua
-- share; internal/script puts it in front of each, or on its line
-- "-- fence.lua". It has no KEYS, ARGV or reply of its own.
-- Fences are decimal integers in (0, 2^63) without leading zeros, compared
-- and incremented as strings: Lua numbers are doubles, exact only up to
-- 2^53, and fences minted elsewhere (nanosecond clocks, database
-- sequences) go beyond.
local function below(a, b) -- fences a < b
  if #a ~= #b then
    return #a < #b
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
  if f and #f <= 19 and string.find(f, '^[1-9]%d*$') and (#f < 19 or not below('9223372036854775807', f)) then
    return f
  end
end
local function out(f) -- f as a reply: a Lua number while exact
  if #f < 16 or #f == 16 and not below('9007199254740992', f) then
    return tonumber(f)
  end
  return f
end
local function inc(f) -- f + 1: the digits after the last that is not a 9 become 0s
  local i = #f
  while string.byte(f, i) == 57 do
    i = i - 1
  end
  if i == 0 then
    return '1' .. string.rep('0', #f)
  end
  return string.sub(f, 1, i - 1) .. string.char(string.byte(f, i) + 1) .. string.rep('0', #f - i)
end
