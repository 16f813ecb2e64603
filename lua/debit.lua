-- name: debit
-- Charges units to one key's state whether or not they fit: the part of a request's cost found
-- after it was admitted, beyond what it reserved (the tokens of a streamed response, known at its
-- end). What does not fit is owed, and later requests wait it out as they wait for units spent:
-- a window's count goes past its limit, a bucket's time moves on by the time its refill takes to
-- earn the debt, a TAT moves past the burst. A key owes at most one capacity (its limit, or its
-- burst for a bucket), so its state stays as bounded as admissions keep it: units beyond that
-- are not charged.
-- KEYS and ARGV: exactly the algorithm's own script's, with the units to charge in place of the
-- cost, then the algorithm's key suffix (fw, sw, sl, tb, gcra) as the last ARGV.
-- returns: the units charged
local algorithm = ARGV[#ARGV]
local now = tonumber(ARGV[1])
local client_time = now ~= nil
if not now then
  local t = redis.call('TIME')
  if algorithm == 'gcra' then
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  else
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
elseif algorithm == 'gcra' then
  now = now * 1000
end

local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

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

-- Only the algorithm's own debit is built: Lua makes a function afresh each time its definition
-- runs, and building all five was an eighth of a debit's instructions.
local run
if algorithm == 'fw' then
  -- ARGV: now, limit, window, units. The window the key counts in, as fixed_window.lua reads it
  -- and writes it on an admission.
  run = function()
    local limit = tonumber(ARGV[2])
    local window = tonumber(ARGV[3])
    local index = floor_div(now, window)
    local seen, count
    local state = redis.call('GET', KEYS[1])
    if state then
      local colon = string.find(state, ':', 1, true)
      if colon then
        seen = stored_int(string.sub(state, 1, colon - 1))
        count = stored_int(string.sub(state, colon + 1))
      end
    end
    if not seen or not count then seen, count = nil, 0 end
    if seen and seen > index then index = seen end
    if seen ~= index then count = 0 end
    local charged = math.min(tonumber(ARGV[4]), 2 * limit - count)
    if charged <= 0 then return 0 end
    local value = string.format('%d:%d', index, count + charged)
    local to_end = (index + 1) * window - now
    if count > 0 then
      redis.call('SET', KEYS[1], value, 'KEEPTTL')
    elseif client_time then
      redis.call('SET', KEYS[1], value, 'PX', to_end + window)
    else
      redis.call('SET', KEYS[1], value, 'PX', to_end)
    end
    return charged
  end
elseif algorithm == 'sw' then
  -- ARGV: now, limit, window, units. The current window's counter, until the weighted estimate
  -- is twice the limit.
  run = function()
    local limit = tonumber(ARGV[2])
    local w = tonumber(ARGV[3])
    local index = floor_div(now, w)
    local e = now - index * w
    local cur_key = KEYS[1] .. ':' .. string.format('%d', index)
    local prev_key = KEYS[1] .. ':' .. string.format('%d', index - 1)
    local counters = redis.call('MGET', cur_key, prev_key)
    local cur = stored_int(counters[1]) or 0
    local prev = stored_int(counters[2]) or 0
    local room = 2 * limit * w - prev * (w - e) - cur * w
    if room < w then return 0 end
    local charged = math.min(tonumber(ARGV[4]), floor_div(room, w))
    if cur == 0 then
      redis.call('SET', cur_key, charged, 'PX', 2 * w - e)
    else
      redis.call('INCRBY', cur_key, charged)
    end
    return charged
  end
elseif algorithm == 'sl' then
  -- ARGV: now, limit, window, units. New entries at the log's time, named as sliding_log.lua
  -- names an admission's.
  run = function()
    local limit = tonumber(ARGV[2])
    local w = tonumber(ARGV[3])
    local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
    local newest_at = tonumber(newest[2])
    local at = now
    if newest_at and newest_at > now then at = newest_at end
    local count = redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', at - w), '+inf')
    local charged = math.min(tonumber(ARGV[4]), 2 * limit - count)
    if charged <= 0 then return 0 end
    local after = 0
    if newest_at and newest_at >= at then after = redis.call('ZCOUNT', KEYS[1], at, '+inf') end
    local score = string.format('%d', at)
    if newest[2] and at >= w then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', at - w)) end
    for first = 1, charged, 1000 do
      local add = {}
      for i = first, math.min(charged, first + 999) do
        add[#add + 1] = score
        add[#add + 1] = score .. ':' .. string.format('%d', after + i)
      end
      redis.call('ZADD', KEYS[1], unpack(add))
    end
    redis.call('PEXPIRE', KEYS[1], at + w - now)
    return charged
  end
elseif algorithm == 'tb' then
  -- ARGV: now, limit, period, burst, units. Refilled to now first, as a request would be; what
  -- the bucket does not hold moves its time on.
  run = function()
    local limit = tonumber(ARGV[2])
    local period = tonumber(ARGV[3])
    local cap = tonumber(ARGV[4]) * period
    local units, ts
    -- As token_bucket.lua: a WRONGTYPE is its old hash {u, t} or someone else's key.
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
    if units > cap then units = cap end
    if now > ts then
      local elapsed = now - ts
      if elapsed >= ceil_div(cap - units, limit) then units = cap else units = units + elapsed * limit end
      ts = now
    end
    local room = units + cap - (ts - now) * limit
    if room < period then return 0 end
    local charged = math.min(tonumber(ARGV[5]), floor_div(room, period))
    local take = charged * period
    if take <= units then
      units = units - take
    else
      local short = take - units
      local wait = ceil_div(short, limit)
      ts = ts + wait
      -- What the refill earns past the debt within its last millisecond, at most a burst.
      units = math.min(cap, wait * limit - short)
    end
    redis.call('SET', KEYS[1], string.format('%d:%d', units, ts), 'PX', (ts - now) + ceil_div(cap - units, limit))
    return charged
  end
elseif algorithm == 'gcra' then
  -- ARGV: now, emission interval (us), burst, units. Time in microseconds.
  run = function()
    local interval = tonumber(ARGV[2])
    local tat = stored_int(redis.call('GET', KEYS[1]))
    if not tat or tat < now then tat = now end
    local room = now + 2 * tonumber(ARGV[3]) * interval - tat
    if room < interval then return 0 end
    local charged = math.min(tonumber(ARGV[4]), floor_div(room, interval))
    tat = tat + charged * interval
    redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', ceil_div(tat - now, 1000))
    return charged
  end
end

if not run then return redis.error_reply('debit: unknown algorithm ' .. tostring(algorithm)) end
if tonumber(ARGV[#ARGV - 1]) <= 0 then return 0 end
return run()