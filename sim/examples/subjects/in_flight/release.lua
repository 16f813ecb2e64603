-- Gives a holder's slot back: removes its token, and nobody else's.
-- KEYS[1]: the holders   ARGV[1]: the holder's token
return redis.call('ZREM', KEYS[1], ARGV[1])
