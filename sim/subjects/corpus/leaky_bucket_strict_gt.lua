-- A leaky bucket as a meter, on Redis's clock in milliseconds: one request per emission
-- interval, the time of the last admission kept in one key.
-- FLAW: it admits only when now > last + interval, strictly: a request exactly one interval
-- after the last admission, when the exact bucket has just refilled the unit it asks for,
-- is refused, so a client asking at exactly the rate gets half of it.
-- KEYS[1]: the last admission (ms)   ARGV[1]: interval (ms)
-- returns: {allowed (1/0), retry after (ms)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[1]))
if last == nil or now > last + interval then
  redis.call('SET', KEYS[1], now, 'PX', 2 * interval)
  return {1, 0}
end
return {0, last + interval - now + 1}
