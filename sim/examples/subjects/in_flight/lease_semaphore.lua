-- A semaphore with leases: at most ARGV[1] holders of KEYS[1] at once, each named by its own
-- token, each slot given back by its holder or taken back when its lease ends, on Redis's clock.
-- KEYS[1]: the holders, a sorted set (member = token, score = end of the lease in ms)
-- ARGV[1]: the limit   ARGV[2]: the lease in ms   ARGV[3]: the holder's token
-- returns 1 when the holder holds a slot, 0 when every slot is taken
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
redis.call('PEXPIRE', KEYS[1], lease)
return 1
