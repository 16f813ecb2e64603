-- A fixed window that starts at its first request, in the style of express-rate-limit's and
-- Laravel's Redis stores: INCRBY the counter, give it its expiry on the first hit, compare.
-- One script, so no client can die between the INCRBY and the PEXPIRE.
-- KEYS[1]: the counter
-- ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining, ms until the window ends}
-- Redis keeps a key through the last millisecond of its TTL and drops it after, so the window
-- ends one millisecond after what PTTL says is left: a client told to wait PTTL would come
-- back inside it.
local limit = tonumber(ARGV[1])
local cost = tonumber(ARGV[3])
local count = redis.call('INCRBY', KEYS[1], cost)
if count == cost then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local ttl = redis.call('PTTL', KEYS[1]) + 1
if count > limit then
  return {0, 0, ttl}
end
return {1, limit - count, ttl}
