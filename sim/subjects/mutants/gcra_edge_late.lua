-- MUTANT of lua/gcra.lua: a request denied until one microsecond after it conforms
-- name: gcra
-- GCRA: one string key holding the theoretical arrival time (TAT) in microseconds, like
-- redis-cell. Admit when the new TAT is at most burst * interval ahead of now.
-- KEYS[1]: the TAT key
-- ARGV[1]: now in ms (client time), or "" for Redis's TIME in microseconds (server time)
-- ARGV[2]: emission interval in microseconds   ARGV[3]: burst   ARGV[4]: cost (0 = peek)
-- returns: {allowed (1/0), remaining, retry_after_ms, reset_after_ms, now_ms (the clock it decided by)}
local now = tonumber(ARGV[1])
if now then
  now = now * 1000
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local function ceil_div(a, b)
  local q = math.floor(a / b)
  if q * b < a then q = q + 1 elseif (q - 1) * b >= a then q = q - 1 end
  return q
end

-- State written by anyone else (NaN, inf, fractions, text) reads as absent, never as a number.
local function stored_int(v)
  local n = tonumber(v)
  if n and n >= 0 and n < 4503599627370496 and n == math.floor(n) then return n end
  return nil
end

local tau = burst * interval
local tat = stored_int(redis.call('GET', KEYS[1]))
if not tat or tat < now then tat = now end
local new_tat = tat + cost * interval
-- BUG: one microsecond of tolerance too few
if new_tat <= now + tau - 1 then
  if cost > 0 then
    redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', ceil_div(new_tat - now, 1000))
  end
  return {1, math.floor((now + tau - new_tat) / interval), 0, ceil_div(new_tat - now, 1000), math.floor(now / 1000)}
end
local remaining = 0
if now + tau > tat then remaining = math.floor((now + tau - tat) / interval) end
return {0, remaining, ceil_div(new_tat - tau - now, 1000), ceil_div(tat - now, 1000), math.floor(now / 1000)}
