-- One provider's breaker, back-off and open account breakers (core/traffic/store.py, ``circuits``).
-- KEYS: the provider hash, its open accounts; ARGV: how many accounts to list.
-- Returns {now ms, blocked until, open until, accounts open, accounts half-open, some accounts}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prov = redis.call('HMGET', KEYS[1], 'blocked', 'open_until')
local open = redis.call('ZCOUNT', KEYS[2], now + 1, '+inf')
local half = redis.call('ZCOUNT', KEYS[2], now - 86400000, now)
local some = redis.call('ZRANGEBYSCORE', KEYS[2], now - 86400000, '+inf', 'LIMIT', 0, tonumber(ARGV[1]))
return {now, prov[1] or '', prov[2] or '', open, half, some}
