-- A sliding-window counter in the style of Cloudflare's two-counter approximation: this
-- window's count plus the previous window's count weighted by the share of it the sliding
-- window still covers. Windows are aligned, one counter per window named by its index
-- from Redis's TIME; the comparison is scaled by the window length so it stays in integers.
-- KEYS[1]: the counters' stem; window i's counter is stem .. ':' .. i
-- ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = math.floor(now / w)
local elapsed = now - index * w
local cur_key = KEYS[1] .. ':' .. string.format('%d', index)
local prev_key = KEYS[1] .. ':' .. string.format('%d', index - 1)
local cur = tonumber(redis.call('GET', cur_key)) or 0
local prev = tonumber(redis.call('GET', prev_key)) or 0

-- prev * (w - elapsed) / w + cur + cost <= limit, times w.
local used = prev * (w - elapsed) + cur * w
if used + cost * w > limit * w then
  return {0, math.max(0, math.floor((limit * w - used) / w))}
end
local n = redis.call('INCRBY', cur_key, cost)
if n == cost then
  -- Read as the previous window's count through the whole next window.
  redis.call('PEXPIRE', cur_key, 2 * w - elapsed)
end
return {1, math.floor((limit * w - used - cost * w) / w)}
