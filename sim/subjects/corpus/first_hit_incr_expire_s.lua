-- A window from each key's first request, in the style of the cache-counter throttles of
-- web frameworks (Laravel's, Rails' Rack::Attack): INCRBY, and EXPIRE in whole seconds on
-- the first hit. Denied hits are counted too.
-- KEYS[1]: the counter
-- ARGV[1]: limit   ARGV[2]: window (ms; whole seconds are kept, rounded up)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining, retry after (ms)}
local limit = tonumber(ARGV[1])
local seconds = math.ceil(tonumber(ARGV[2]) / 1000)
local cost = tonumber(ARGV[3])
local current = redis.call('INCRBY', KEYS[1], cost)
if current == cost then
  redis.call('EXPIRE', KEYS[1], seconds)
end
if current > limit then
  -- The key is still there at its expiry millisecond; gone one ms after PTTL.
  return {0, 0, redis.call('PTTL', KEYS[1]) + 1}
end
return {1, limit - current, 0}
