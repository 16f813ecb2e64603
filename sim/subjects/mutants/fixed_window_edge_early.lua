-- MUTANT of lua/fixed_window.lua: every window boundary one millisecond early
-- name: fixed_window
-- The HLD card's atomic INCR + EXPIRE counter (docs/ORIGINS.md): one counter per key, of the
-- aligned window it counts in.
-- KEYS[1]: the counter, a string "index:count": the window's index in periods, and the units
--          admitted in it
-- ARGV[1]: now in ms (client time), or "" to read Redis's TIME (server time)
-- ARGV[2]: limit per window   ARGV[3]: window in ms   ARGV[4]: cost (0 = peek)
-- returns: {allowed (1/0), remaining, retry_after_ms, reset_after_ms, now_ms (the clock it decided by)}
-- A denied request is not counted: the counter is read first and written only on admission,
-- so it always equals what was admitted in its window.
-- The key counts in the latest window it has seen: a reading behind it (a caller whose clock
-- is behind another's, or Redis's clock stepped back) counts in that window, not its own, so
-- no window is opened twice. Fed the callers' clocks, the key outlives its window by one
-- period on the opener's clock: a caller behind it still reads the window, and one that finds
-- the key gone counts where nothing was counted (whatever was admitted in the next window
-- would have replaced it). On Redis's own clock it goes at the window's end.
local now = tonumber(ARGV[1])
local client_time = now ~= nil
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- BUG: the windows' edges one millisecond early
  now = now + 1
end
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

-- State written by anyone else (NaN, inf, fractions, text) reads as absent, never as a number.
local function stored_int(v)
  local n = tonumber(v)
  if n and n >= 0 and n < 4503599627370496 and n == math.floor(n) then return n end
  return nil
end

local index = math.floor(now / window)
if index * window > now then index = index - 1 end
local seen, count
local state = redis.call('GET', KEYS[1])
if state then
  local colon = string.find(state, ':', 1, true)
  if colon then
    seen = stored_int(string.sub(state, 1, colon - 1))
    count = stored_int(string.sub(state, colon + 1))
  end
end
if not seen or not count then seen, count = nil, 0 end
if seen and seen > index then index = seen end
if seen ~= index then count = 0 end
local to_end = (index + 1) * window - now

if count + cost <= limit then
  local after = count + cost
  if cost > 0 then
    local value = string.format('%d:%d', index, after)
    if count > 0 then
      redis.call('SET', KEYS[1], value, 'KEEPTTL')
    elseif client_time then
      redis.call('SET', KEYS[1], value, 'PX', to_end + window)
    else
      redis.call('SET', KEYS[1], value, 'PX', to_end)
    end
  end
  local reset = 0
  if after > 0 then reset = to_end end
  return {1, limit - after, 0, reset, now}
end
local remaining = limit - count
if remaining < 0 then remaining = 0 end
return {0, remaining, to_end, to_end, now}
