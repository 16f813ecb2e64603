-- A window from each key's first request written with Redis 7.0's expiry commands:
-- PEXPIRE ... NX gives the counter its expiry only if it has none (so there is no
-- first-hit test to get wrong, and a counter can never be left without one), and
-- PEXPIRETIME (7.0) says when the window ends, as an epoch time in ms.
-- KEYS[1]: the counter
-- ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining, epoch ms from which the next window can open}
local limit = tonumber(ARGV[1])
local cost = tonumber(ARGV[3])
local count = redis.call('INCRBY', KEYS[1], cost)
redis.call('PEXPIRE', KEYS[1], ARGV[2], 'NX')
-- Redis still holds the key at its expiry millisecond; it is gone the ms after.
local over_at = redis.call('PEXPIRETIME', KEYS[1]) + 1
if count > limit then
  return {0, 0, over_at}
end
return {1, limit - count, over_at}
