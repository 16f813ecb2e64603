-- A bucket refilled whole at the start of each period, in the style of quota counters that
-- "reset to the limit" on a schedule: the state is the tokens left and the index of the
-- period they were counted in (floor(TIME / period)); each new period adds `limit`, up to
-- the burst.
-- FLAW: the script is periodic_refill_declared.lua's, but this subject file does not
-- declare that its time moves in steps of one period (no resolution_ms). A burst at the
-- end of one period and the refill at the start of the next admit burst + limit within a
-- millisecond, which a smooth token bucket never does; and between refills it denies what
-- a smooth bucket would already have refilled.
-- KEYS[1]: hash {tokens, period (the index the tokens were counted in)}
-- ARGV[1]: limit   ARGV[2]: period (ms)   ARGV[3]: burst   ARGV[4]: cost
-- returns: {allowed (1/0), tokens left, retry after (ms)}
redis.replicate_commands()
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = math.floor(now / period)
local to_next = (index + 1) * period - now

local state = redis.call('HMGET', KEYS[1], 'tokens', 'period')
local tokens = tonumber(state[1])
local counted = tonumber(state[2])
if tokens == nil or counted == nil then
  tokens = burst
  counted = index
end
if index > counted then
  tokens = math.min(burst, tokens + limit * (index - counted))
  counted = index
end
if tokens < cost then
  return {0, tokens, to_next}
end
tokens = tokens - cost
redis.call('HSET', KEYS[1], 'tokens', tokens, 'period', string.format('%d', counted))
-- Kept until the start of the period in which it is full again.
local periods = math.ceil((burst - tokens) / limit)
redis.call('PEXPIRE', KEYS[1], to_next + (periods - 1) * period)
return {1, tokens, 0}
