-- name: refund
-- Gives units back to one key's state, never beyond its quota: a request that should not have
-- counted (a sign-in that succeeded, a call the server failed). The newest units go first.
-- KEYS and ARGV: exactly the algorithm's own script's, with the units to give back in place of
-- the cost, then the algorithm's key suffix (fw, sw, sl, tb, gcra) as the last ARGV.
-- returns: 1 if anything was given back, 0 if the state had nothing to take (its full quota)
local algorithm = ARGV[#ARGV]
local now = tonumber(ARGV[1])
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

-- Takes up to n off a window counter: DECRBY keeps the key's TTL, and a counter at zero goes.
local function take(key, count, n)
  if n <= 0 then return end
  if n >= count then redis.call('DEL', key) else redis.call('DECRBY', key, n) end
end

local refund = {}

-- ARGV: now, limit, window, units. Only the window the key counts in now: its own, or a
-- later one it has seen (fixed_window.lua's "index:count").
function refund.fw()
  local units = tonumber(ARGV[4])
  local state = redis.call('GET', KEYS[1])
  local colon = state and string.find(state, ':', 1, true)
  if not colon then return 0 end
  local seen = stored_int(string.sub(state, 1, colon - 1))
  local count = stored_int(string.sub(state, colon + 1))
  if not seen or not count or count == 0 or seen < floor_div(now, tonumber(ARGV[3])) then return 0 end
  if units >= count then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], string.format('%d:%d', seen, count - units), 'KEEPTTL')
  end
  return 1
end

-- ARGV: now, limit, window, units. The current window first, then the previous one.
function refund.sw()
  local units = tonumber(ARGV[4])
  local index = floor_div(now, tonumber(ARGV[3]))
  local cur_key = KEYS[1] .. ':' .. string.format('%d', index)
  local prev_key = KEYS[1] .. ':' .. string.format('%d', index - 1)
  local cur = stored_int(redis.call('GET', cur_key)) or 0
  local prev = stored_int(redis.call('GET', prev_key)) or 0
  if cur + prev == 0 then return 0 end
  local from_cur = math.min(cur, units)
  take(cur_key, cur, from_cur)
  take(prev_key, prev, math.min(prev, units - from_cur))
  return 1
end

-- ARGV: now, limit, window, units. The log is written again with only the live entries it
-- keeps, each score's members renamed score:1, score:2, ...: sliding_log.lua names a new
-- member after the count of members scored at or after its score, and dropping the newest
-- members could leave an older name at that count, which the next admission would overwrite.
-- The log's time is the reading, or its newest entry's when the reading is behind it, as in
-- sliding_log.lua.
function refund.sl()
  local w = tonumber(ARGV[3])
  local units = tonumber(ARGV[4])
  local at = now
  local newest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
  if newest and newest > now then at = newest end
  local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', at - w), '+inf', 'WITHSCORES')
  local n = #live / 2
  if n == 0 then return 0 end
  redis.call('DEL', KEYS[1])
  local keep = n - units
  if keep <= 0 then return 1 end
  local add, at, seen = {}, nil, 0
  for i = 1, keep do
    local score = live[2 * i]
    if score == at then seen = seen + 1 else at, seen = score, 1 end
    add[#add + 1] = score
    add[#add + 1] = string.format('%d:%d', tonumber(score), seen)
    -- One ZADD per 1,000 members: unpack must stay within Lua's stack.
    if #add == 2000 or i == keep then
      redis.call('ZADD', KEYS[1], unpack(add))
      add = {}
    end
  end
  redis.call('PEXPIRE', KEYS[1], tonumber(live[2 * keep]) + w - now)
  return 1
end

-- ARGV: now, limit, period, burst, units. Refilled to now first, as a request would be.
function refund.tb()
  local limit = tonumber(ARGV[2])
  local period = tonumber(ARGV[3])
  local cap = tonumber(ARGV[4]) * period
  local back = tonumber(ARGV[5]) * period
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
  if not units or not ts then return 0 end
  if units > cap then units = cap end
  if now > ts then
    local elapsed = now - ts
    if elapsed >= ceil_div(cap - units, limit) then units = cap else units = units + elapsed * limit end
    ts = now
  end
  if units == cap then return 0 end
  -- A bucket whose time is ahead of now (a debt, or a clock behind another's) is paid back
  -- first: its time moves back by a millisecond per `limit` units, never before now.
  local paid = math.min(ts - now, floor_div(back, limit))
  ts = ts - paid
  back = back - paid * limit
  units = math.min(cap, units + back)
  local ttl = (ts - now) + ceil_div(cap - units, limit)
  if ttl > 0 then
    redis.call('SET', KEYS[1], string.format('%d:%d', units, ts), 'PX', ttl)
  else
    redis.call('DEL', KEYS[1])
  end
  return 1
end

-- ARGV: now, emission interval (us), burst, units. Time in microseconds.
function refund.gcra()
  local tat = stored_int(redis.call('GET', KEYS[1]))
  if not tat or tat <= now then return 0 end
  tat = math.max(now, tat - tonumber(ARGV[4]) * tonumber(ARGV[2]))
  if tat > now then
    redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', ceil_div(tat - now, 1000))
  else
    redis.call('DEL', KEYS[1])
  end
  return 1
end

local run = refund[algorithm]
if not run then return redis.error_reply('refund: unknown algorithm ' .. tostring(algorithm)) end
if tonumber(ARGV[#ARGV - 1]) <= 0 then return 0 end
return run()
