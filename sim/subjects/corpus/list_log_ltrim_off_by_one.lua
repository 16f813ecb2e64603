-- A sliding log in a list, in the style of the LPUSH / LTRIM / LINDEX limiters, checking
-- the oldest kept entry (LINDEX -1).
-- FLAW: LTRIM's end index is inclusive: "LTRIM key 0 limit" keeps limit + 1 entries. Once
-- the list is that long, LINDEX -1 is the (limit+1)-th newest admission, so a request is
-- admitted while `limit` others are still inside the window: limit + 1 per window.
-- KEYS[1]: the list
-- ARGV[1]: limit   ARGV[2]: window (ms)
-- returns: {allowed (1/0), retry after (ms)}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if redis.call('LLEN', KEYS[1]) >= limit then
  local oldest = tonumber(redis.call('LINDEX', KEYS[1], -1))
  if now - oldest < window then
    return {0, oldest + window - now}
  end
end
redis.call('LPUSH', KEYS[1], now)
redis.call('LTRIM', KEYS[1], 0, limit)
redis.call('PEXPIRE', KEYS[1], window)
return {1, 0}
