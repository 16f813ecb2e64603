-- A textbook GCRA on Redis's TIME, its theoretical arrival time (TAT) kept as float seconds
-- since 2017-01-01, so the float resolves about a tenth of a microsecond; the TAT grows by one
-- emission interval per admitted unit, and its rounding adds up over many admissions.
-- Correct up to the rounding of its float arithmetic.
-- KEYS[1]: the TAT   ARGV[1]: limit per period   ARGV[2]: period (s)   ARGV[3]: burst
-- ARGV[4]: cost
-- returns: {allowed (1/0), retry after (s)}
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1483228800) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[2]) / tonumber(ARGV[1])
local tau = interval * tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local new_tat = tat + interval * cost
local allow_at = new_tat - tau
if now < allow_at then
  return {0, tostring(allow_at - now)}
end
redis.call('SET', KEYS[1], string.format('%.17g', new_tat), 'PX', math.ceil((new_tat - now) * 1000))
return {1, "0"}
