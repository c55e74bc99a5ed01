-- Take a lock, or take it over from a dead owner (core/redis/locks.py; docs/notes/locks.md).
-- KEYS: the lock, this process' heartbeat key ('' outside a worker: a plain lock, never taken over, as for an
-- operator's cancel), then (when it keeps one) the lock's handover.
-- ARGV: the token's unique part, the TTL in ms, the handover's TTL in s.
-- Returns {token, 1 when taken over from a dead owner else 0, what the handover said before it was set to
-- 'unknown' ('' when none was kept)}, without the third with no handover; nil when a live owner holds it.
-- Sent again after a lost answer (core/redis/scripts.py), it finds its own token: taken.
local owner = ''
if KEYS[2] and redis.call('exists', KEYS[2]) == 1 then owner = KEYS[2] end
local token = owner .. '|' .. ARGV[1]
local over = 0
if not redis.call('set', KEYS[1], token, 'NX', 'PX', ARGV[2]) then
  local current = redis.call('get', KEYS[1]) or ''
  if current ~= token then
    local holder = string.match(current, '^(.*)|')
    if not KEYS[2] or KEYS[2] == '' or holder == nil or holder == '' or redis.call('exists', holder) == 1 then return nil end
    redis.call('set', KEYS[1], token, 'PX', ARGV[2])
    over = 1
  end
end
if not KEYS[3] then return {token, over} end
-- SET ... GET (Redis 6.2+, docs/DEPLOY.md): the old value and the new one in one command.
local left = redis.call('set', KEYS[3], 'unknown', 'EX', ARGV[3], 'GET') or ''
return {token, over, left}
