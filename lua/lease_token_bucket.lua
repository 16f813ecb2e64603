-- name: lease_token_bucket
-- A lease of token-bucket units (limiter's lease mode): one call reserves up to `want` tokens
-- of the key's bucket for one instance, which then spends them without asking Redis again.
-- Same key and state as token_bucket.lua: a hash {u = units, t = ms}, one token = period units,
-- refill = limit units per ms.
--
-- The bucket is read as its deficit D: the units it lacks of full, counting a time t ahead of
-- now (a lease reserved for later) as debt, limit units per ms. A token bucket admits cost c
-- at time x exactly when D(x) + c * period <= cap, which is GCRA with the deficit as the TAT,
-- so leases keep the bucket's bound (at most B + L * d / T in any interval d) the way
-- lease_gcra.lua keeps GCRA's: a lease valid from its start s to s + lifetime takes its units
-- on top of a deficit of at least lifetime * limit (the refill no lease can use), so any unit
-- spent within the lease is one the bucket would have admitted at that moment.
--
-- A lease starts as soon as all `want` tokens fit, if that is within `horizon`; else as soon
-- as `need` fit; if not even those can start within `horizon`, nothing is reserved.
-- The unspent units of the instance's previous lease come back first, credited only when the
-- bucket is still exactly as that lease wrote it and only beyond lifetime * limit of deficit;
-- anything else is lost, which only ever admits less. Unlike token_bucket.lua, a clock that
-- reads earlier than the stored time sees the difference as debt, not as no time passing.
-- KEYS[1]: token_bucket.lua's string "units:ms" (ms later than now: reserved); its old hash
--          {u = units, t = ms} is read once and replaced, as there.
-- ARGV[1]: now in ms (client time), or "" for Redis's TIME (server time)
-- ARGV[2]: limit per period   ARGV[3]: period in ms   ARGV[4]: burst (capacity in tokens)
-- ARGV[5]: lease lifetime in ms   ARGV[6]: horizon in ms
-- ARGV[7]: want (tokens asked for)   ARGV[8]: need (the request's cost, at least 1, at most want)
-- ARGV[9]: tokens given back (0 for none)   ARGV[10], ARGV[11]: the u and t the previous lease wrote
-- returns: {granted (0 = denied), start_us (granted: from now until the lease starts; denied:
--   until asking again can succeed), written_u, written_t, credited, remaining, retry_after_ms,
--   reset_after_ms, now_ms}
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local limit = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local lifetime = tonumber(ARGV[5])
local horizon = tonumber(ARGV[6])
local want = tonumber(ARGV[7])
local need = tonumber(ARGV[8])
local give = tonumber(ARGV[9])
local given_u = tonumber(ARGV[10])
local given_t = tonumber(ARGV[11])

local function ceil_div(a, b)
  local q = math.floor(a / b)
  if q * b < a then q = q + 1 elseif (q - 1) * b >= a then q = q - 1 end
  return q
end

local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- State written by anyone else (NaN, inf, fractions, text) reads as absent, never as a number.
local function stored_int(v)
  local n = tonumber(v)
  if n and n >= 0 and n < 4503599627370496 and n == math.floor(n) then return n end
  return nil
end

local cap = burst * period
local units, ts
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
local same = give > 0 and units ~= nil and ts ~= nil and units == given_u and ts == given_t
if not units or not ts then
  units = cap
  ts = now
end
if units > cap then units = cap end

-- The deficit now. Compare with the time to refill first, so elapsed * limit never grows past
-- 2^53 however long the key sat idle.
local deficit
if now >= ts then
  local elapsed = now - ts
  if elapsed >= ceil_div(cap - units, limit) then
    deficit = 0
  else
    deficit = cap - units - elapsed * limit
  end
else
  deficit = (ts - now) * limit + cap - units
end

-- A deficit above cap (debt) is stored as a later time holding at most cap: that needs a whole
-- number of ms of refill that leaves between 0 and cap units of deficit.
local function ahead_of(d)
  if d <= cap then return 0 end
  local ahead = ceil_div(d - cap, limit)
  if d - ahead * limit < 0 then return nil end
  return ahead
end

local floor_units = lifetime * limit
local credited = 0
if same and deficit > floor_units then
  local c = math.min(give, floor_div(deficit - floor_units, period))
  -- A credit that leaves a deficit the hash cannot hold exactly is not taken (it would only
  -- happen when the whole bucket refills within a millisecond).
  if ahead_of(deficit - c * period) then
    credited = c
    deficit = deficit - c * period
  end
end

-- Writes the deficit as seen at time `at` (at >= now): the bucket holds cap - deficit at `at`.
local function write(d, at)
  redis.call('SET', KEYS[1], string.format('%d:%d', cap - d, at), 'PX', at - now + ceil_div(d, limit))
end

local function write_now(d)
  local ahead = ahead_of(d)
  write(d - ahead * limit, now + ahead)
end

local function remaining_of(d)
  if d < cap then return floor_div(cap - d, period) end
  return 0
end

-- The lease starts when all it wants fits, if that is within the horizon (so leases stay whole
-- however busy the key), else as soon as the request's own cost fits.
local function wait_for(units)
  if deficit + units * period > cap then return ceil_div(deficit + units * period - cap, limit) end
  return 0
end
local wait = wait_for(need)
if floor_units + want * period <= cap and wait_for(want) <= horizon then wait = wait_for(want) end
if wait > horizon then
  if credited > 0 then write_now(deficit) end
  return {0, (wait - horizon) * 1000, 0, 0, credited, remaining_of(deficit), wait, ceil_div(deficit, limit),
          now}
end
-- The deficit at the lease's start, never below what a lease must leave unused.
local at_start = deficit - wait * limit
if at_start < 0 then at_start = 0 end
if at_start < floor_units then at_start = floor_units end
local granted = floor_div(cap - at_start, period)
if granted > want then granted = want end
if granted < need then
  -- Only a lifetime longer than the burst allows gets here (the limiter refuses such a
  -- configuration): such a lease could never be spent within the bucket's bound.
  if credited > 0 then write_now(deficit) end
  return {0, 0, 0, 0, credited, remaining_of(deficit), 0, ceil_div(deficit, limit), now}
end
local written = at_start + granted * period
write(written, now + wait)
local now_deficit = written + wait * limit
return {granted, wait * 1000, cap - written, now + wait, credited, remaining_of(now_deficit), 0,
        wait + ceil_div(written, limit), now}
