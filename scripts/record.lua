-- record.lua: the lock key's value, decoded here and only here;
-- internal/script puts this on each line "-- record.lua" of a lock
-- script, where the script has just read a lock key's value into v (false
-- or nil: no key), and the function names where a script calls it, as
-- fence.lua's. It has no KEYS, ARGV or reply of its own, and decodes in
-- place rather than in a function: a function costs every run its closure.
-- internal/script's ParseValue decodes the same format in Go.
--
-- A lock key holds one of
--   grant     token ":" fence ":" rel ":" holder ";" ["*"]
--   released  "~:" fence ":" rel
-- fence is a fence as fence.lua's. rel is " id1 id2 ...": the latest
-- releases on this key, newest first, at most 8, each named by the first
-- 12 characters of its token (60 random bits); each write carries them on
-- (a release puts its own first and keeps the newest 7), so that a re-sent
-- release still finds its own (release.lua). The "*" is appended once an
-- attempt found the grant held: someone waits, and its release must wake
-- them (when Redis refuses the APPEND, out of memory, the attempt still
-- reports the lock held; its waiter then polls). A released record is
-- free; any other value (one this version did not write) counts as held by
-- someone else. Tokens never contain ':' or ' ' and are never "~": a value
-- holds the grant tok exactly when it begins with tok ":", the one test
-- that refresh.lua, ttl.lua and their multi and batch forms make inline.
--
-- It sets
--   tok    the grant's token, "~" for a released record; nil when v is
--          neither (absent, or not written by this version)
--   fence  its fence (a decimal string). A released record's is checked
--          (as fence.lua's valid does; else tok is nil); a grant's is as
--          its writer put it: a value with another token is held by
--          someone else whatever its fence says, and the script's own
--          grant holds the fence the script wrote
--   rel    its latest releases
--   mark   "*" when v is marked waited for, else "" (a released record
--          never is)
-- Plain searches find the parts: a pattern costs more than all of them.
local tok, fence, rel, mark
do
  local i = v and string.find(v, ':', 1, true)
  local j = i and string.find(v, ':', i + 1, true)
  if j then
    tok, fence = string.sub(v, 1, i - 1), string.sub(v, i + 1, j - 1)
    rel = string.sub(v, j + 1, (string.find(v, ':', j + 1, true) or 0) - 1)
    local hi = #fence == 19 and tonumber(string.sub(fence, 1, 10)) -- 2^63-1 by halves, each exact
    if tok == '~' and not (#fence < 20 and string.find(fence, '^[1-9]%d*$') and (not hi or hi < 9223372036 or hi == 9223372036 and tonumber(string.sub(fence, 11)) <= 854775807)) then
      tok = nil
    end
  end
  mark = v and tok ~= '~' and string.byte(v, -1) == 42 and '*' or ''
end
local function names(rel, tok) -- whether rel names tok's release (its 12 first characters)
  return string.find(rel .. ' ', ' ' .. string.sub(tok, 1, 12) .. ' ', 1, true)
end
