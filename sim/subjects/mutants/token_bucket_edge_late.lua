-- MUTANT of lua/token_bucket.lua: every refill one millisecond too short
-- name: token_bucket
-- Token bucket in integer units: one token = period_ms units, refill = limit units per ms,
-- so fractional refill is never lost. The stored time only moves forward: a clock reading
-- earlier than the stored time neither refills nor drains the bucket.
-- KEYS[1]: a string "units:ms", the units and the time (ms) they were counted at. A hash
--          {u = units, t = ms}, as this script once wrote, is read once and replaced.
-- ARGV[1]: now in ms (client time), or "" for Redis's TIME (server time)
-- ARGV[2]: limit per period   ARGV[3]: period in ms   ARGV[4]: burst (capacity in tokens)
-- ARGV[5]: cost (0 = peek)
-- returns: {allowed (1/0), remaining tokens, retry_after_ms, reset_after_ms, now_ms (the clock it decided by)}
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local limit = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])

local function ceil_div(a, b)
  local q = math.floor(a / b)
  if q * b < a then q = q + 1 elseif (q - 1) * b >= a then q = q - 1 end
  return q
end

-- State written by anyone else (NaN, inf, fractions, text) reads as absent, never as a number.
local function stored_int(v)
  local n = tonumber(v)
  if n and n >= 0 and n < 4503599627370496 and n == math.floor(n) then return n end
  return nil
end

local cap = burst * period
local need = cost * period
local units, ts
-- pcall: a key of another type answers WRONGTYPE, which is either this script's old hash
-- (read it, and the SET below replaces it) or someone else's key (HMGET raises the error).
local state = redis.pcall('GET', KEYS[1])
if type(state) == 'string' then
  local colon = string.find(state, ':', 1, true)
  if colon then
    units = stored_int(string.sub(state, 1, colon - 1))
    ts = stored_int(string.sub(state, colon + 1))
  end
elseif type(state) == 'table' and state.err then
  local old = redis.call('HMGET', KEYS[1], 'u', 't')
  units = stored_int(old[1])
  ts = stored_int(old[2])
end
if not units or not ts then
  units = cap
  ts = now
end
-- A bucket written under a larger burst holds at most this burst.
if units > cap then units = cap end
if now > ts then
  -- Compare with the time to fill first, so elapsed * limit never grows past 2^53.
  -- BUG: one millisecond less refill on every call
  local elapsed = now - ts - 1
  if elapsed >= ceil_div(cap - units, limit) then
    units = cap
  else
    units = units + elapsed * limit
  end
  ts = now
end

-- Non-zero only when the clock reads earlier than the stored time: refill resumes from
-- the stored time, so waits (and the key's TTL) are counted from there.
local ahead = ts - now
local allowed = 0
local retry = 0
if units >= need then
  allowed = 1
  units = units - need
  if cost > 0 then
    redis.call('SET', KEYS[1], string.format('%d:%d', units, ts), 'PX', ahead + ceil_div(cap - units, limit))
  end
else
  retry = ahead + ceil_div(need - units, limit)
end
return {allowed, math.floor(units / period), retry, ahead + ceil_div(cap - units, limit), now}
