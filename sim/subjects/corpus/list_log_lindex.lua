-- A sliding log in a list, in the style of the LPUSH / LTRIM / LINDEX limiters: keep the
-- newest `limit` admission times (Redis's TIME, ms), newest first; admit while fewer than
-- `limit` are kept or the limit-th newest has left the window.
-- KEYS[1]: the list
-- ARGV[1]: limit   ARGV[2]: window (ms)
-- returns: {allowed (1/0), retry after (ms)}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if redis.call('LLEN', KEYS[1]) >= limit then
  local oldest = tonumber(redis.call('LINDEX', KEYS[1], limit - 1))
  if now - oldest < window then
    return {0, oldest + window - now}
  end
end
redis.call('LPUSH', KEYS[1], now)
redis.call('LTRIM', KEYS[1], 0, limit - 1)
redis.call('PEXPIRE', KEYS[1], window)
return {1, 0}
