-- Settle one admitted call: its slot and probe back, the breakers told how it ended, a back-off hint applied,
-- and whether a temporary failure is excused (core/traffic/store.py; docs/notes/traffic.md).
-- KEYS: the account hash, its slots, the provider hash, the open accounts, the job's excuses, the accounts and
-- the events of the provider's failure streak.
-- ARGV: token, ending, probes, back-off scope and ms, breaker failures and open ms, account id, job id and
-- attempt, event (tenant/entity).
-- Returns {ms until the account's breaker may probe (0: closed), the same for the provider's, excuse: 0 none,
-- 1 circuit, 2 provider_streak, 3 first_failure}.
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
