"""Traffic state in Redis, shared by every worker: one script admits a provider call, one settles it.

Per account (hash ``traffic_account``): a token bucket, "blocked until" and a circuit breaker; its in-flight
calls (sorted set ``traffic_slots``, leases scored by expiry, so a killed worker's slot frees itself). Per
tenant: a token bucket. Per provider (hash ``traffic_provider``): a bucket, "blocked until" and a breaker.
Times are Redis server time in ms, so worker clocks do not matter.

``admit`` checks, in order: provider blocked, provider breaker, account blocked, account breaker, account
concurrency, the three buckets; the first that holds the call answers how long to wait, and nothing is
changed. Only an admitted call takes a slot, a token from each bucket and, for a half-open breaker, its one
probe. ``settle`` gives the slot and probe back and tells the breakers how the call ended: a success closes
them; a temporary failure counts (N in a row open a breaker; a failed probe reopens it at once); an
account-only failure (credentials rejected) counts for the account alone; anything else counts for nothing.
A provider's back-off hint sets "blocked until" for the account or the whole provider.

``settle`` also decides whether a temporary failure is excused (the job keeps its attempt): the provider
hash remembers which job started its current failure streak and whether another job has failed since
(both cleared by a success). A failure is excused, at most BREAKER_FAILURES times per job and attempt
(hash ``traffic_excused``), when a breaker is not closed after it, when another job shares the streak,
or, once per attempt, when it is the job's own first failure; otherwise it is the job's.
"""

from __future__ import annotations

import functools
import itertools
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import redis

from calsync.core.model.errors import StoreUnavailable
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.thread_connections import DROPPED, Arg, ThreadConnections, script_sha

log = logging.getLogger(__name__)

Ending = Literal["success", "failure", "account_failure", "neutral"]
Scope = Literal["account", "provider"]
CircuitState = Literal["closed", "half_open", "open"]
#: ``calsync_circuit_state``'s value for each state.
CIRCUIT_STATE_VALUES: dict[CircuitState, int] = {"closed": 0, "half_open": 1, "open": 2}
#: What held a call back (the ``limit`` label of calsync_traffic_deferrals_total).
HoldReason = Literal[
    "provider_blocked", "provider_circuit", "account_blocked", "account_circuit", "concurrency",
    "account_rate", "tenant_rate", "provider_rate", "provider_streak", "first_failure",
]  # fmt: skip
#: Why a temporary failure was excused (held, no attempt used) instead of charged to its job.
Excuse = Literal["circuit", "provider_streak", "first_failure"]
_EXCUSES: dict[int, Excuse] = {1: "circuit", 2: "provider_streak", 3: "first_failure"}

_DAY_MS = 86_400_000

_ADMIT = """
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
  redis.call('ZREM', KEYS[2], ARGV[3])
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

_SETTLE = """
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
local function close(key, account)
  redis.call('HSET', key, 'fails', 0)
  if redis.call('HDEL', key, 'open_until') == 1 and account then redis.call('ZREM', KEYS[4], ARGV[8]) end
end
local function fail(key, account, probe)
  local fails = redis.call('HINCRBY', key, 'fails', 1)
  local open_until = tonumber(redis.call('HGET', key, 'open_until'))
  local is_open = open_until and open_until > now
  if probe or (fails >= threshold and not is_open) then
    local reopen = now + tonumber(ARGV[7])
    redis.call('HSET', key, 'open_until', reopen, 'fails', 0)
    if account then
      redis.call('ZADD', KEYS[4], reopen, ARGV[8])
      redis.call('PEXPIRE', KEYS[4], 86400000)
    end
  end
  redis.call('PEXPIRE', key, 86400000)
end
if kind == 'success' then
  close(KEYS[1], true)
  close(KEYS[3], false)
  redis.call('HDEL', KEYS[3], 'streak_job', 'shared')
elseif kind == 'failure' then
  fail(KEYS[1], true, probes >= 2)
  fail(KEYS[3], false, probes % 2 == 1)
elseif kind == 'account_failure' then
  fail(KEYS[1], true, probes >= 2)
end
local acct_open, prov_open = state(KEYS[1]), state(KEYS[3])
local excuse = 0
local job = ARGV[9]
if kind == 'failure' and job ~= '' then
  local first = redis.call('HGET', KEYS[3], 'streak_job')
  local shared = redis.call('HGET', KEYS[3], 'shared') == '1'
  if not first then
    redis.call('HSET', KEYS[3], 'streak_job', job)
  elseif first ~= job and not shared then
    redis.call('HSET', KEYS[3], 'shared', '1')
    shared = true
  end
  local used = tonumber(redis.call('HGET', KEYS[5], ARGV[10])) or 0
  if used < threshold then
    if acct_open > 0 or prov_open > 0 then excuse = 1
    elseif shared then excuse = 2
    elseif used == 0 then excuse = 3 end
  end
  if excuse > 0 then
    redis.call('HINCRBY', KEYS[5], ARGV[10], 1)
    redis.call('PEXPIRE', KEYS[5], 86400000)
  end
end
return {acct_open, prov_open, excuse}
"""

_ADMIT_SHA, _SETTLE_SHA = script_sha(_ADMIT), script_sha(_SETTLE)

_CIRCUITS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prov = redis.call('HMGET', KEYS[1], 'blocked', 'open_until')
local open = redis.call('ZCOUNT', KEYS[2], now + 1, '+inf')
local half = redis.call('ZCOUNT', KEYS[2], now - 86400000, now)
local some = redis.call('ZRANGEBYSCORE', KEYS[2], now - 86400000, '+inf', 'LIMIT', 0, tonumber(ARGV[1]))
return {now, prov[1] or '', prov[2] or '', open, half, some}
"""


@dataclass(frozen=True)
class Limits:
    """What holds one provider's calls (0: that limit is off); ``governed`` False means no Redis work at all."""

    concurrency: int = 0
    account_rate: float = 0
    tenant_rate: float = 0
    provider_rate: float = 0
    burst: float = 2
    breaker_failures: int = 0
    breaker_open: float = 15
    retry_delay: float = 1
    lease: float = 60  # a slot or probe outlives the call; a killed worker's is freed after it

    @property
    def governed(self) -> bool:
        """Whether any limit or breaker applies to this provider."""
        return any((self.concurrency, self.account_rate, self.tenant_rate, self.provider_rate, self.breaker_failures))


@dataclass(frozen=True)
class Admission:
    """The admit script's answer: admitted (with a token and the probes it carries), or how long to wait and why."""

    admitted: bool
    wait: float
    reason: HoldReason | None
    token: str
    probes: int  # bit 1: the provider breaker's probe, bit 2: the account breaker's


@dataclass(frozen=True)
class Settled:
    """Seconds until each breaker may probe again after the call (0: closed), and why a failure was excused."""

    account_open: float
    provider_open: float
    excuse: Excuse | None = None  # None: a success, or a failure charged to the job (its retry schedule)


@dataclass(frozen=True)
class CircuitReading:
    """One provider's breakers and back-off at a moment (``calsync status``, ``calsync_circuit_state``)."""

    provider: str
    state: CircuitState
    blocked_for: float  # seconds the whole provider is still blocked
    accounts_open: int
    accounts_half_open: int
    some_accounts: tuple[str, ...]

    @property
    def accounts_state(self) -> CircuitState:
        """The worst state of the provider's account breakers."""
        return "open" if self.accounts_open else "half_open" if self.accounts_half_open else "closed"

    def as_json(self) -> dict[str, object]:
        """JSON-ready form for ``calsync status --json``."""
        return {"provider": self.provider, "state": self.state, "blocked_for_seconds": round(self.blocked_for, 3),
                "accounts_open": self.accounts_open, "accounts_half_open": self.accounts_half_open,
                "some_accounts": list(self.some_accounts)}  # fmt: skip


class TrafficStore:
    """The two scripts and the readings, on one Redis namespace."""

    def __init__(self, client: redis.Redis, keys: RedisKeys, connections: ThreadConnections | None = None) -> None:
        self._client = client
        self._keys = keys
        # admit and settle go on the worker threads' own connections (core/redis/thread_connections.py): the
        # lock manager's in a worker (actors/declare.py), so a job's commands share one connection.
        self._own = connections is None
        self._lines = connections if connections is not None else ThreadConnections(client)
        self._circuits = client.register_script(_CIRCUITS)
        self._nonce = secrets.token_hex(6)
        self._serial = itertools.count(1)

    def admit(self, provider: str, account_id: str, tenant_id: str, limits: Limits, concurrency: int) -> Admission:
        """One atomic check of every limit for a call to ``account_id``; an admitted call holds a slot until settled."""
        k = self._keys
        token = f"{self._nonce}:{next(self._serial)}"
        keys = [k.traffic_account(provider, account_id), k.traffic_slots(provider, account_id),
                k.traffic_tenant(tenant_id), k.traffic_provider(provider)]  # fmt: skip
        rates = (limits.account_rate, limits.tenant_rate, limits.provider_rate, limits.burst)
        breakers = 1 if limits.breaker_failures else 0
        args: list[Arg] = [concurrency, _ms(limits.lease), token, *rates, breakers, _ms(limits.retry_delay)]
        # Sent again once on a dropped connection, with the same token: the script first frees that token's
        # slot, so an admit whose answer was lost never holds two slots nor is held by its own. What it may
        # leave: a token taken twice from each bucket, and a breaker's probe, which frees itself after the lease.
        answer = self._run(_ADMIT_SHA, _ADMIT, keys, args, f"admitting a call to {account_id}")
        admitted, wait_ms, reason, probes = answer
        held = cast("HoldReason", _text(reason)) if not admitted else None
        return Admission(bool(admitted), int(wait_ms) / 1000, held, token, int(probes))

    def settle(self, provider: str, account_id: str, admission: Admission, limits: Limits, ending: Ending,
               block: tuple[Scope, float] | None = None, job: tuple[str, int] | None = None) -> Settled:  # fmt: skip
        """Give the call's slot and probe back, tell the breakers how it ended, apply a back-off hint.

        ``job`` (its id and attempt) lets a temporary failure be excused as the provider's (docs/notes/traffic.md).
        Sent again once on a dropped connection: if the first one ran and only its answer was lost, a failure
        is counted twice (the breaker opens one failure early; the job's excuses run out one early).
        """
        keys, args = self._settle_call(provider, account_id, admission, limits, ending, block, job)
        answer = self._run(_SETTLE_SHA, _SETTLE, keys, args, f"settling a call to {account_id}")
        account_ms, provider_ms, excuse = answer
        return Settled(int(account_ms) / 1000, int(provider_ms) / 1000, _EXCUSES.get(int(excuse)))

    def settle_later(self, provider: str, account_id: str, admission: Admission, limits: Limits) -> None:
        """Settle a successful call without waiting for the answer (read before this thread's next command).

        A success's answer is unused, so its settle costs no round trip of its own. Redis runs it before
        anything this thread sends next; another thread's admit may overtake it, and is then held once for
        TRAFFIC_RETRY_DELAY. If its answer is lost, it may not have run: the slot then frees itself after
        the lease, and the breakers close with the next success. A call carrying a breaker's probe is
        settled waiting (:meth:`settle`): its success is what closes the breaker for everyone.
        """
        if admission.probes:
            self.settle(provider, account_id, admission, limits, "success")
            return
        keys, args = self._settle_call(provider, account_id, admission, limits, "success", None, None)
        try:
            self._lines.send_later(("EVAL", _SETTLE, len(keys), *keys, *args),  # EVAL: no NOSCRIPT to redo
                                   functools.partial(_settled_later, account_id))  # fmt: skip
        except DROPPED:
            self.settle(provider, account_id, admission, limits, "success")  # it never reached Redis: send it again

    def close(self) -> None:
        """Give back the threads' connections, if they are this store's own."""
        if self._own:
            self._lines.close()

    def _settle_call(self, provider: str, account_id: str, admission: Admission, limits: Limits, ending: Ending,
                     block: tuple[Scope, float] | None, job: tuple[str, int] | None,
                     ) -> tuple[list[str], list[Arg]]:  # fmt: skip
        k = self._keys
        job_id, attempt = job if job is not None else ("", 0)
        keys = [k.traffic_account(provider, account_id), k.traffic_slots(provider, account_id),
                k.traffic_provider(provider), k.traffic_open_accounts(provider),
                k.traffic_excused(job_id or "-")]  # fmt: skip
        scope, seconds = block if block is not None else ("account", 0.0)
        args: list[Arg] = [admission.token, ending, admission.probes, scope, _ms(seconds), limits.breaker_failures,
                           _ms(limits.breaker_open), account_id, job_id, attempt]  # fmt: skip
        return keys, args

    def _run(self, sha: str, text: str, keys: Sequence[str], args: Sequence[Arg], doing: str) -> Any:
        # One script on this thread's connection, once more on a new one if it was dropped; StoreUnavailable else.
        try:
            try:
                return self._lines.script(sha, text, keys, args)
            except DROPPED:
                return self._lines.script(sha, text, keys, args)
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(f"Redis unreachable {doing}: {type(exc).__name__}") from exc

    def circuits(self, provider: str, *, listed: int = 5) -> CircuitReading:
        """The provider's breaker, back-off and how many of its accounts' breakers are open or half-open."""
        keys = [self._keys.traffic_provider(provider), self._keys.traffic_open_accounts(provider)]
        now, blocked, open_until, open_, half, some = self._circuits(keys=keys, args=[listed])
        now_ms = int(now)
        blocked_for = max(0, int(blocked or 0) - now_ms) / 1000 if _text(blocked) else 0.0
        state: CircuitState = "closed"
        if _text(open_until):
            state = "open" if int(open_until) > now_ms else "half_open"
        return CircuitReading(provider, state, blocked_for, int(open_), int(half), tuple(_text(a) for a in some))


def _settled_later(account_id: str, answer: Any) -> None:
    if isinstance(answer, Exception):
        fields = {"account_id": account_id, "error": type(answer).__name__}
        log.warning("a successful call's settle, sent without waiting, got no answer; if it did not run, its "
                    "slot frees itself after the lease", extra={"fields": fields})  # fmt: skip


def _ms(seconds: float) -> int:
    return max(0, int(seconds * 1000))


def _text(value: bytes | str | int | None) -> str:
    if isinstance(value, bytes):
        return value.decode()
    return "" if value is None else str(value)
