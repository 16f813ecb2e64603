-- A sliding log in a sorted set, in the style of the ZREMRANGEBYSCORE / ZCARD / ZADD
-- limiters: one member per admitted unit, scored by Redis's TIME in microseconds and named
-- by it (the "sec .. usec" string, plus the unit's number within the request).
-- KEYS[1]: the log
-- ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining, retry after (µs)}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2])
local window = window_ms * 1000
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- Entries at or before now - window have left the window (now - window, now].
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count + cost <= limit then
  for i = 1, cost do
    redis.call('ZADD', KEYS[1], now, t[1] .. t[2] .. '-' .. i)
  end
  redis.call('PEXPIRE', KEYS[1], window_ms)
  return {1, limit - count - cost, 0}
end
-- The oldest (count + cost - limit) entries must leave first.
local k = count + cost - limit
local entry = redis.call('ZRANGE', KEYS[1], k - 1, k - 1, 'WITHSCORES')
local retry = window
if entry[2] then
  retry = tonumber(entry[2]) + window - now
end
return {0, math.max(0, limit - count), retry}
