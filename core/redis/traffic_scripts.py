"""The traffic store's Lua: admit a call, settle it, read the breakers (core/redis/traffic.py says what they decide).

All three use Redis server time. ``ADMIT``'s KEYS: the account hash, its slots, the tenant hash, the
provider hash; ARGV: concurrency, lease ms, token, the account, tenant and provider rates, burst,
breakers on, retry ms, and "again" (1 when re-sent after a lost answer: the token's own slot is freed
first). ``SETTLE``'s KEYS: the account hash, its slots, the provider hash, the open accounts, the job's
excuses, the accounts and the events of the provider's failure streak; ARGV: token, ending, probes,
back-off scope and ms, breaker failures and open ms, account id, job id and attempt, event (tenant/entity).
"""

from __future__ import annotations

from calsync.core.redis.thread_connections import script_sha

ADMIT = """
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
  if ARGV[10] == '1' then redis.call('ZREM', KEYS[2], ARGV[3]) end
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
"""

SETTLE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[2], ARGV[1])
local probes = tonumber(ARGV[3])
if probes % 2 == 1 then redis.call('HDEL', KEYS[3], 'probe') end
if probes >= 2 then redis.call('HDEL', KEYS[1], 'probe') end
local block_ms = tonumber(ARGV[5])
if block_ms > 0 then
  local key = KEYS[1]
  if ARGV[4] == 'provider' then key = KEYS[3] end
  local till = now + block_ms
  local was = tonumber(redis.call('HGET', key, 'blocked'))
  if not was or was < till then redis.call('HSET', key, 'blocked', till) end
  redis.call('PEXPIRE', key, math.max(86400000, block_ms * 2))
end
local threshold = tonumber(ARGV[6])
local kind = ARGV[2]
local function state(key)
  local open_until = tonumber(redis.call('HGET', key, 'open_until'))
  if open_until then return math.max(1, open_until - now) end
  return 0
end
if threshold <= 0 then return {0, 0, 0} end
local day = 86400000
local function trip(key, account, probe, count)
  local open_until = tonumber(redis.call('HGET', key, 'open_until'))
  local is_open = open_until and open_until > now
  local opens = probe or (count >= threshold and not is_open)
  if opens then
    local reopen = now + tonumber(ARGV[7])
    redis.call('HSET', key, 'open_until', reopen, 'fails', 0)
    if account then
      redis.call('ZADD', KEYS[4], reopen, ARGV[8])
      redis.call('PEXPIRE', KEYS[4], day)
    end
  end
  redis.call('PEXPIRE', key, day)
  return opens
end
local spread = 0
if kind == 'success' then
  redis.call('HSET', KEYS[1], 'fails', 0)
  if redis.call('HDEL', KEYS[1], 'open_until') == 1 then redis.call('ZREM', KEYS[4], ARGV[8]) end
  if redis.call('HDEL', KEYS[3], 'open_until', 'streak') > 0 then redis.call('DEL', KEYS[6], KEYS[7]) end
elseif kind == 'failure' or kind == 'account_failure' then
  trip(KEYS[1], true, probes >= 2, redis.call('HINCRBY', KEYS[1], 'fails', 1))
end
if kind == 'failure' then
  redis.call('SADD', KEYS[6], ARGV[8])
  redis.call('SADD', KEYS[7], ARGV[11])
  redis.call('PEXPIRE', KEYS[6], day)
  redis.call('PEXPIRE', KEYS[7], day)
  redis.call('HSET', KEYS[3], 'streak', 1)
  spread = math.min(redis.call('SCARD', KEYS[6]), redis.call('SCARD', KEYS[7]))
  if trip(KEYS[3], false, false, spread) then
    redis.call('DEL', KEYS[6], KEYS[7])
    redis.call('HDEL', KEYS[3], 'streak')
  end
end
local acct_open, prov_open = state(KEYS[1]), state(KEYS[3])
local excuse = 0
if kind == 'failure' and ARGV[9] ~= '' then
  local used = tonumber(redis.call('HGET', KEYS[5], ARGV[10])) or 0
  if used < threshold then
    if acct_open > 0 or prov_open > 0 then excuse = 1
    elseif spread >= 2 then excuse = 2
    elseif used == 0 then excuse = 3 end
  end
  if excuse > 0 then
    redis.call('HINCRBY', KEYS[5], ARGV[10], 1)
    redis.call('PEXPIRE', KEYS[5], day)
  end
end
return {acct_open, prov_open, excuse}
"""

ADMIT_SHA, SETTLE_SHA = script_sha(ADMIT), script_sha(SETTLE)

CIRCUITS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prov = redis.call('HMGET', KEYS[1], 'blocked', 'open_until')
local open = redis.call('ZCOUNT', KEYS[2], now + 1, '+inf')
local half = redis.call('ZCOUNT', KEYS[2], now - 86400000, now)
local some = redis.call('ZRANGEBYSCORE', KEYS[2], now - 86400000, '+inf', 'LIMIT', 0, tonumber(ARGV[1]))
return {now, prov[1] or '', prov[2] or '', open, half, some}
"""
