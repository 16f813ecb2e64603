-- name: lease_gcra
-- A lease of GCRA units (limiter's lease mode): one call reserves up to `want` units of the
-- key's budget for one instance, which then spends them without asking Redis again. Same key
-- and state as gcra.lua: one string holding the theoretical arrival time (TAT) in microseconds.
--
-- Why the cluster still keeps GCRA's bound (at most B + d/T in any interval d): a lease is
-- valid from its start s until s + lifetime, and every unit it holds is given a GCRA slot (its
-- place in the TAT) after s + lifetime and no later than s + tau. Whenever within the lease a
-- unit is spent, its slot is one GCRA would have given a request admitted at that moment, so
-- every admitted unit has its own slot, as under GCRA itself. The slots between now and
-- now + lifetime, which a lease cannot use, are what leasing costs when the key is idle.
--
-- The unspent units of the instance's previous lease come back first. They are credited only
-- when that lease's slots still end the queue (nothing was reserved after them) and only the
-- slots after now + lifetime, which no lease can have used: a give-back that comes too late
-- or finds the queue moved on is lost, which only ever admits less.
--
-- A lease starts as soon as all `want` units fit, if that is within `horizon`; else as soon
-- as `need` units fit. When not even those can start within `horizon`, nothing is reserved
-- (the instance asks again after start_us).
-- KEYS[1]: the TAT key
-- ARGV[1]: now in ms (client time), or "" for Redis's TIME in microseconds (server time)
-- ARGV[2]: emission interval in microseconds   ARGV[3]: burst
-- ARGV[4]: lease lifetime in microseconds   ARGV[5]: horizon in microseconds
-- ARGV[6]: want (units asked for)   ARGV[7]: need (the request's cost, at least 1, at most want)
-- ARGV[8]: units given back (0 for none)   ARGV[9]: the TAT the previous lease wrote
-- returns: {granted (0 = denied), start_us (granted: from now until the lease starts; denied:
--   until asking again can succeed), written_tat, 0, credited, remaining, retry_after_ms,
--   reset_after_ms, now_ms}
local now = tonumber(ARGV[1])
if now then
  now = now * 1000
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local lifetime = tonumber(ARGV[4])
local horizon = tonumber(ARGV[5])
local want = tonumber(ARGV[6])
local need = tonumber(ARGV[7])
local give = tonumber(ARGV[8])
local given_tat = tonumber(ARGV[9])

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

local tau = burst * interval
local stored = stored_int(redis.call('GET', KEYS[1]))
local tat = stored
if not tat or tat < now then tat = now end

local credited = 0
if give > 0 and stored and stored == given_tat and tat > now + lifetime then
  credited = math.min(give, floor_div(tat - now - lifetime, interval))
  tat = tat - credited * interval
end

local function remaining_at(t)
  if now + tau > t then return floor_div(now + tau - t, interval) end
  return 0
end

-- The lease starts when all it wants fits, if that is within the horizon (so leases stay whole
-- however busy the key), else as soon as the request's own cost fits.
local function start_for(units)
  local s = tat + units * interval - tau
  if s < now then s = now end
  return s
end
local start = start_for(need)
if lifetime + want * interval <= tau and start_for(want) - now <= horizon then start = start_for(want) end
if start - now > horizon then
  if credited > 0 then
    redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', ceil_div(tat - now, 1000))
  end
  return {0, start - now - horizon, 0, 0, credited, remaining_at(tat), ceil_div(start - now, 1000),
          ceil_div(tat - now, 1000), math.floor(now / 1000)}
end
local base = start + lifetime
if tat > base then base = tat end
local granted = floor_div(start + tau - base, interval)
if granted > want then granted = want end
if granted < need then
  -- Only a lifetime longer than the burst allows gets here (the limiter refuses such a
  -- configuration): such a lease could never be spent within GCRA's bound.
  if credited > 0 then
    redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', ceil_div(tat - now, 1000))
  end
  return {0, 0, 0, 0, credited, remaining_at(tat), 0, ceil_div(tat - now, 1000), math.floor(now / 1000)}
end
local written = base + granted * interval
redis.call('SET', KEYS[1], string.format('%d', written), 'PX', ceil_div(written - now, 1000))
return {granted, start - now, written, 0, credited, remaining_at(written), 0, ceil_div(written - now, 1000),
        math.floor(now / 1000)}
