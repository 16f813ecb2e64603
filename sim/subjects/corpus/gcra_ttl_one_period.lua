-- GCRA on Redis's TIME with the TAT in ms, in the style of GCRA helpers that give the TAT
-- key an expiry of one period in whole seconds ("EX period_ms / 1000").
-- FLAW: the TAT can run up to burst * interval = period * burst / limit ahead of now, but
-- the key lives only one period (EX floor(period / 1000), at least 1 s). When the burst
-- is larger than the limit (e.g. 10 per 1000 ms, burst 30) the key expires while its TAT
-- is still ahead, and the next request starts from a full burst again: over-admits.
-- KEYS[1]: the TAT (epoch ms)
-- ARGV[1]: period (ms)   ARGV[2]: limit   ARGV[3]: burst   ARGV[4]: cost
-- returns: {allowed (1/0), retry after (ms)}
redis.replicate_commands()
local period = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local emission = period / limit
local variance = emission * burst
local tat = tonumber(redis.call('GET', KEYS[1])) or now
local new_tat = math.max(tat, now) + emission * cost
local allow_at = new_tat - variance
if now < allow_at then
  return {0, math.ceil(allow_at - now)}
end
local expiry = math.max(1, math.floor(period / 1000))
redis.call('SET', KEYS[1], new_tat, 'EX', expiry)
return {1, 0}
