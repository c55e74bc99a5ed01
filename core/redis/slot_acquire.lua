-- Take one of a key's slots (core/redis/limiter.py). KEYS: the slots; ARGV: the limit, the lease in ms, the
-- holder's token. Returns 1 when the token holds a slot: also when sent again after a lost answer
-- (core/redis/scripts.py), which finds the slot its first send took.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
if redis.call('ZSCORE', KEYS[1], ARGV[3]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
  return 1
end
return 0
