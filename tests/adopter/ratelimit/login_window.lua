-- The adopter's own limiter script: a fixed window aligned to multiples of the period, on
-- Redis's clock, one counter per window; the counter is read first and raised only when the
-- request fits, so it holds exactly what was admitted.
-- KEYS[1]: the counters' stem   ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: cost
-- returns: {allowed (1/0), ms until the window ends}
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = math.floor(now / window)
local to_end = (index + 1) * window - now
local key = KEYS[1] .. ':' .. string.format('%d', index)
local count = tonumber(redis.call('GET', key) or '0')
if count + cost > limit then
  return {0, to_end}
end
redis.call('INCRBY', key, cost)
redis.call('PEXPIRE', key, to_end)
return {1, to_end}
