-- A window from each key's first request with INCRBY + EXPIRE (whole seconds), in the style
-- of stores that report "available in N seconds" from TTL.
-- FLAW: the Retry-After is TTL, which Redis rounds to the NEAREST second: with under 500 ms
-- of the window left it says 0, with 1400 ms left it says 1. A client that waits what it
-- was told arrives while the window is still full and is denied again. (The limiting
-- itself is correct.)
-- KEYS[1]: the counter
-- ARGV[1]: limit   ARGV[2]: window (ms; whole seconds, rounded up)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining, retry after (s)}
local limit = tonumber(ARGV[1])
local seconds = math.ceil(tonumber(ARGV[2]) / 1000)
local cost = tonumber(ARGV[3])
local current = redis.call('INCRBY', KEYS[1], cost)
if current == cost then
  redis.call('EXPIRE', KEYS[1], seconds)
end
if current > limit then
  return {0, 0, redis.call('TTL', KEYS[1])}
end
return {1, limit - current, 0}
