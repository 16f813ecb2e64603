-- The lease semaphore with one bug: it counts the holders without first removing those whose
-- lease has ended, so it removes them only when the whole key expires. A dead holder's slot is
-- taken for as long as anyone keeps acquiring.
-- KEYS[1]: the holders   ARGV[1]: the limit   ARGV[2]: the lease in ms   ARGV[3]: the token
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
redis.call('PEXPIRE', KEYS[1], lease)
return 1
