-- Admit one provider call, or answer how long to wait and why (core/traffic/store.py says what it checks).
-- KEYS: the account hash, its slots, the tenant hash, the provider hash.
-- ARGV: concurrency, lease ms, token, the account, tenant and provider rates, burst, breakers on (1/0), retry ms.
-- Returns {admitted 1/0, wait ms, hold reason, probes (bit 1: the provider breaker's, bit 2: the account's)}.
-- Redis server time throughout. Sent again after a lost answer (core/redis/scripts.py), the
-- token's own slot is freed first, so it never holds two; it may take one token too many from each bucket.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local acct = redis.call('HMGET', KEYS[1], 'blocked', 'open_until', 'probe', 'tokens', 'ts')
local prov = redis.call('HMGET', KEYS[4], 'blocked', 'open_until', 'probe', 'tokens', 'ts')
local retry = tonumber(ARGV[9])
local breakers = ARGV[8] == '1'
local probes = 0
local function blocked(s)
  local b = tonumber(s[1])
  if b and b > now then return b - now end
  return nil
end
local function breaker(s, bit)
  local open_until = tonumber(s[2])
  if not breakers or not open_until then return nil end
  if now < open_until then return open_until - now end
  local probe = tonumber(s[3])
  if probe and probe > now then return retry end
  probes = probes + bit
  return nil
end
local wait = blocked(prov)
if wait then return {0, wait, 'provider_blocked', 0} end
wait = breaker(prov, 1)
if wait then return {0, wait, 'provider_circuit', 0} end
wait = blocked(acct)
if wait then return {0, wait, 'account_blocked', 0} end
wait = breaker(acct, 2)
if wait then return {0, wait, 'account_circuit', 0} end
local limit = tonumber(ARGV[1])
if limit > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('ZREM', KEYS[2], ARGV[3]) -- sent again after a lost answer: never held by its own first slot
  if redis.call('ZCARD', KEYS[2]) >= limit then return {0, retry, 'concurrency', 0} end
end
local burst = tonumber(ARGV[7])
local buckets = {}
local worst, worst_reason = 0, ''
local function take(key, tokens, ts, rate, reason)
  if rate <= 0 then return end
  local cap = math.max(1, rate * burst)
  local have = tonumber(tokens) or cap
  local since = tonumber(ts) or now
  have = math.min(cap, have + math.max(0, now - since) / 1000 * rate)
  if have < 1 then
    local need = math.ceil((1 - have) / rate * 1000)
    if need > worst then worst, worst_reason = need, reason end
  end
  buckets[#buckets + 1] = {key, have - 1}
end
take(KEYS[1], acct[4], acct[5], tonumber(ARGV[4]), 'account_rate')
if tonumber(ARGV[5]) > 0 then
  local ten = redis.call('HMGET', KEYS[3], 'tokens', 'ts')
  take(KEYS[3], ten[1], ten[2], tonumber(ARGV[5]), 'tenant_rate')
end
take(KEYS[4], prov[4], prov[5], tonumber(ARGV[6]), 'provider_rate')
if worst > 0 then return {0, worst, worst_reason, 0} end
for _, b in ipairs(buckets) do
  redis.call('HSET', b[1], 'tokens', b[2], 'ts', now)
  redis.call('PEXPIRE', b[1], 86400000)
end
local lease = tonumber(ARGV[2])
if limit > 0 then
  redis.call('ZADD', KEYS[2], now + lease, ARGV[3])
  redis.call('PEXPIRE', KEYS[2], lease * 2)
end
if probes % 2 == 1 then redis.call('HSET', KEYS[4], 'probe', now + lease) end
if probes >= 2 then redis.call('HSET', KEYS[1], 'probe', now + lease) end
return {1, 0, '', probes}
