-- MUTANT of lua/fixed_window.lua: every window boundary one millisecond late
-- name: fixed_window
-- The HLD card's atomic INCR + EXPIRE counter (docs/ORIGINS.md), one key per aligned window.
-- KEYS[1]: the key stem "prefix:{user key}:fw"; the window's key is KEYS[1] .. ":" .. index
--          (same hash tag, so the same Redis Cluster slot as the declared key).
-- ARGV[1]: now in ms (client time), or "" to read Redis's TIME (server time)
-- ARGV[2]: limit per window   ARGV[3]: window in ms   ARGV[4]: cost (0 = peek)
-- returns: {allowed (1/0), remaining, retry_after_ms, reset_after_ms, now_ms (the clock it decided by)}
-- A denied request is not counted: the counter is read first and incremented only on
-- admission, so it always equals what was admitted in the window.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- BUG: the windows' edges one millisecond late
  now = now - 1
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
local to_end = window - (now - index * window)
local key = KEYS[1] .. ':' .. string.format('%d', index)

local count = stored_int(redis.call('GET', key)) or 0
if count + cost <= limit then
  if cost > 0 then
    if count == 0 then
      -- The window's first units: one SET with its expiry instead of INCRBY then PEXPIRE
      -- (each redis.call costs Redis about a microsecond of conversions), and a value someone
      -- else left there, which reads as absent, is replaced rather than counted on.
      redis.call('SET', key, cost, 'PX', to_end)
    else
      redis.call('INCRBY', key, cost)
    end
  end
  local after = count + cost
  local reset = 0
  if after > 0 then reset = to_end end
  return {1, limit - after, 0, reset, now}
end
local remaining = limit - count
if remaining < 0 then remaining = 0 end
return {0, remaining, to_end, to_end, now}
