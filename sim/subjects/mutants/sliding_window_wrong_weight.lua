-- MUTANT of lua/sliding_window.lua: the previous window weighted by the elapsed time
-- name: sliding_window
-- Sliding-window counter: the previous window's count weighted by its remaining overlap
-- plus the current window's count. Compared scaled by the window length, so every value
-- is an integer below 2^50 and the arithmetic is exact in Lua's doubles.
-- KEYS[1]: the key stem "prefix:{user key}:sw"; window counters are KEYS[1] .. ":" .. index
-- ARGV[1]: now in ms (client time), or "" for Redis's TIME (server time)
-- ARGV[2]: limit per window   ARGV[3]: window in ms   ARGV[4]: cost (0 = peek)
-- returns: {allowed (1/0), remaining, retry_after_ms, reset_after_ms, now_ms (the clock it decided by)}
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local limit = tonumber(ARGV[2])
local w = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- State written by anyone else (NaN, inf, fractions, text) reads as absent, never as a number.
local function stored_int(v)
  local n = tonumber(v)
  if n and n >= 0 and n < 4503599627370496 and n == math.floor(n) then return n end
  return nil
end

local index = floor_div(now, w)
local e = now - index * w
local cur_key = KEYS[1] .. ':' .. string.format('%d', index)
local prev_key = KEYS[1] .. ':' .. string.format('%d', index - 1)
-- Both counters in one call (they share the stem's hash tag, so one slot). MGET reads a key of
-- another type as absent where GET would fail: such a key is replaced like any other garbage.
local counters = redis.call('MGET', cur_key, prev_key)
local cur = stored_int(counters[1]) or 0
local prev = stored_int(counters[2]) or 0

local function reset_after(c, p)
  if c > 0 then return 2 * w - e end
  if p > 0 then return w - e end
  return 0
end

-- BUG: the previous window weighted by the time elapsed in this one, not by what is left
local est = prev * e + cur * w
local budget = limit * w
if est + cost * w <= budget then
  if cost > 0 then
    if cur == 0 then
      -- The window's first units, with their expiry in the same call (as in fixed_window.lua):
      -- the counter is read as "previous" through the whole next window.
      redis.call('SET', cur_key, cost, 'PX', 2 * w - e)
    else
      redis.call('INCRBY', cur_key, cost)
    end
  end
  return {1, floor_div(budget - est - cost * w, w), 0, reset_after(cur + cost, prev), now}
end

local retry
if limit >= cur + cost then
  retry = (w - floor_div((limit - cur - cost) * w, prev)) - e
else
  retry = (w - e) + (w - floor_div((limit - cost) * w, cur))
end
local remaining = 0
if budget > est then remaining = floor_div(budget - est, w) end
return {0, remaining, retry, reset_after(cur, prev), now}
