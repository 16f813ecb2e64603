-- GCRA on Redis's TIME with the TAT in integer ms, in the style of "virtual scheduling"
-- limiters that book every arrival on the schedule and then decide.
-- FLAW: the TAT is advanced and stored for denied requests too. A denied request consumes
-- an emission interval it was never given, so a client asking faster than the rate pushes
-- the TAT ever further ahead and is denied forever (lost capacity), and one that waits
-- the Retry-After it was given finds the TAT pushed one interval further (dishonest).
-- KEYS[1]: the TAT (epoch ms)
-- ARGV[1]: emission interval (ms)   ARGV[2]: burst   ARGV[3]: cost
-- returns: {allowed (1/0), retry after (ms)}
redis.replicate_commands()
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tolerance = burst * interval

local tat = tonumber(redis.call('GET', KEYS[1])) or now
local new_tat = math.max(tat, now) + cost * interval
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', new_tat - now)
if new_tat - now > tolerance then
  return {0, new_tat - tolerance - now}
end
return {1, 0}
