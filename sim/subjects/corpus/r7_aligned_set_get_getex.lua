-- An aligned fixed window in two keys that persist across windows (the window's number and
-- its count), in the style of counters that "roll" instead of naming a key per window:
-- SET ... GET (6.2+) swaps in the current window's number and returns the stored one in one
-- step, so a new window is noticed and its count reset; GETEX ... PXAT (6.2+) reads the
-- count and pins its expiry to the window's end in the same command.
-- KEYS[1]: the current window's number   KEYS[2]: its count
-- ARGV[1]: limit   ARGV[2]: window (ms)   ARGV[3]: cost
-- returns: {allowed (1/0), remaining, retry after (ms)}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = math.floor(now / window)
local ends = (index + 1) * window
local label = string.format('%d', index)

local was = redis.call('SET', KEYS[1], label, 'PXAT', ends, 'GET')
local count
if was ~= label then
  count = 0
  redis.call('SET', KEYS[2], 0, 'PXAT', ends)
else
  count = tonumber(redis.call('GETEX', KEYS[2], 'PXAT', ends)) or 0
end
if count + cost > limit then
  return {0, math.max(0, limit - count), ends - now}
end
-- INCRBY keeps the expiry the key already has.
redis.call('INCRBY', KEYS[2], cost)
return {1, limit - count - cost, 0}
