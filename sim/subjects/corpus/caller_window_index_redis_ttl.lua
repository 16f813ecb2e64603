-- A fixed window named by the caller: the key carries the window's number, computed from the
-- caller's clock; INCR counts every request, and the first one sets the key to expire one
-- period later, on Redis's clock.
-- FLAW: the window is named by one clock and ended by another. A caller whose clock is
-- behind the one that opened the window still names it after Redis has dropped its key,
-- and opens it again with a fresh count. Correct while all clocks agree.
-- KEYS[1]: the window's counter   ARGV[1]: limit   ARGV[2]: period (ms)
-- returns: 1 allowed, 0 denied
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if n > tonumber(ARGV[1]) then
  return 0
end
return 1
