"""Traffic state in Redis, shared by every worker: one script admits a provider call, one settles it.

Per account (hash ``traffic_account``): a token bucket, "blocked until" and a circuit breaker; its in-flight
calls (sorted set ``traffic_slots``, leases scored by expiry, so a killed worker's slot frees itself). Per
tenant: a token bucket. Per provider (hash ``traffic_provider``): a bucket, "blocked until" and a breaker.
Times are Redis server time in ms, so worker clocks do not matter.

``admit`` (``admit.lua``) checks, in order: provider blocked, provider breaker, account blocked, account
breaker, account concurrency, the three buckets; the first that holds the call answers how long to wait, and
nothing is changed. Only an admitted call takes a slot, a token from each bucket and, for a half-open breaker,
its one probe. ``settle`` (``settle.lua``) gives the slot and probe back and tells the breakers how the call
ended: a success closes them; a temporary failure counts: BREAKER_FAILURES in a row open the account's breaker
(a failed probe reopens it at once), while the provider's opens (half-open: reopens) only once the failures
since the provider's last success come from BREAKER_FAILURES distinct accounts and as many distinct events
(the sets ``traffic_streak``, cleared by a success), so no one account or event holds the others; an
account-only failure (credentials rejected) counts for the account alone; anything else counts for nothing.
A provider's back-off hint sets "blocked until" for the account or the whole provider.

``settle`` also decides whether a temporary failure is excused (the job keeps its attempt): when a breaker
is not closed after it, when the provider's streak spans two accounts and two events or more (one account's
or one event's failures never excuse each other), or, once per attempt, when it is the job's own first
failure; at most BREAKER_FAILURES times per job and attempt (hash ``traffic_excused``); otherwise it is the
job's.

Both are one waited round trip through redis-py's ``Script``, sent once more after a dropped connection
(core/redis/scripts.py): an admit sent twice frees its own first slot, a failure's settle sent twice may count
the failure twice (the breaker opens one failure early; the job's excuses run out one early).
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

import redis

from calsync.core.model.errors import StoreUnavailable
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.scripts import LuaScript
from calsync.core.traffic.settings import Limits

Ending = Literal["success", "failure", "account_failure", "neutral"]
Scope = Literal["account", "provider"]
CircuitState = Literal["closed", "half_open", "open"]
#: ``calsync_circuit_state``'s value for each state.
CIRCUIT_STATE_VALUES: dict[CircuitState, int] = {"closed": 0, "half_open": 1, "open": 2}
#: What held a call back (the ``limit`` label of calsync_traffic_deferrals_total).
HoldReason = Literal[
    "provider_blocked",
    "provider_circuit",
    "account_blocked",
    "account_circuit",
    "concurrency",
    "account_rate",
    "tenant_rate",
    "provider_rate",
    "provider_streak",
    "first_failure",
]
#: Why a temporary failure was excused (held, no attempt used) instead of charged to its job.
Excuse = Literal["circuit", "provider_streak", "first_failure"]
_EXCUSES: dict[int, Excuse] = {1: "circuit", 2: "provider_streak", 3: "first_failure"}
_HALF_OPEN_MS = 86_400_000  # how long after it opened for its time an account breaker reads half-open (circuits.lua)


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
    blocked_for_seconds: float  # seconds (whole milliseconds) the whole provider is still blocked
    accounts_open: int
    accounts_half_open: int
    some_accounts: tuple[str, ...]

    @property
    def accounts_state(self) -> CircuitState:
        """The worst state of the provider's account breakers."""
        return "open" if self.accounts_open else "half_open" if self.accounts_half_open else "closed"


class TrafficStore:
    """The two scripts and the readings, on one Redis namespace."""

    def __init__(self, client: redis.Redis, keys: RedisKeys) -> None:
        self._keys = keys
        self._client = client
        self._admit = LuaScript(client, __package__, "admit.lua")
        self._settle = LuaScript(client, __package__, "settle.lua")
        self._circuits = LuaScript(client, __package__, "circuits.lua")
        self._nonce = secrets.token_hex(6)
        self._serial = itertools.count(1)

    def admit(self, provider: str, account_id: str, tenant_id: str, limits: Limits, concurrency: int) -> Admission:
        """One atomic check of every limit for a call to ``account_id``; an admitted call holds a slot until settled."""
        k = self._keys
        token = f"{self._nonce}:{next(self._serial)}"
        keys = [
            k.traffic_account(provider, account_id),
            k.traffic_slots(provider, account_id),
            k.traffic_tenant(tenant_id),
            k.traffic_provider(provider),
        ]
        rates = (limits.account_rate, limits.tenant_rate, limits.provider_rate, limits.burst)
        breakers = 1 if limits.breaker_failures else 0
        args: list[str | float] = [concurrency, _ms(limits.lease), token, *rates, breakers, _ms(limits.retry_delay)]
        try:
            admitted, wait_ms, reason, probes = self._admit(keys, args)
        except redis.RedisError as exc:
            raise StoreUnavailable(f"Redis unreachable admitting a call to {account_id}: {type(exc).__name__}") from exc
        held = cast("HoldReason", reason.decode()) if not admitted else None
        return Admission(bool(admitted), int(wait_ms) / 1000, held, token, int(probes))

    def settle(
        self,
        provider: str,
        account_id: str,
        admission: Admission,
        limits: Limits,
        ending: Ending,
        block: tuple[Scope, float] | None = None,
        job: tuple[str, int] | None = None,
        *,
        event: str | None = None,
    ) -> Settled:
        """Give the call's slot and probe back, tell the breakers how it ended, apply a back-off hint.

        ``job`` (its id and attempt) lets a temporary failure be excused as the provider's (docs/notes/traffic.md);
        ``event`` (tenant/entity) is what the call was about: the provider's breaker and the outage excuse need
        failures of several events (None: the call counts as an event of its own).
        """
        k = self._keys
        job_id, attempt = job if job is not None else ("", 0)
        keys = [
            k.traffic_account(provider, account_id),
            k.traffic_slots(provider, account_id),
            k.traffic_provider(provider),
            k.traffic_open_accounts(provider),
            k.traffic_excused(job_id or "-"),
            k.traffic_streak(provider, "accounts"),
            k.traffic_streak(provider, "events"),
        ]
        # ARGV in settle.lua's groups: the call, its back-off, the breakers, whose call it was and what about.
        call = (admission.token, ending, admission.probes)
        scope, seconds = block if block is not None else ("account", 0.0)
        breakers = (limits.breaker_failures, _ms(limits.breaker_open))
        about = event or f"call:{admission.token}"  # no event known: the call is an event of its own
        args: list[str | int] = [*call, scope, _ms(seconds), *breakers, account_id, job_id, attempt, about]
        try:
            account_ms, provider_ms, excuse = self._settle(keys, args)
        except redis.RedisError as exc:
            raise StoreUnavailable(f"Redis unreachable settling a call to {account_id}: {type(exc).__name__}") from exc
        return Settled(int(account_ms) / 1000, int(provider_ms) / 1000, _EXCUSES.get(int(excuse)))

    def circuits(self, provider: str, *, listed: int = 5) -> CircuitReading:
        """The provider's breaker, back-off and how many of its accounts' breakers are open or half-open."""
        keys = [self._keys.traffic_provider(provider), self._keys.traffic_open_accounts(provider)]
        now, blocked, open_until, open_, half, some = self._circuits(keys, [listed])
        now_ms = int(now)
        blocked_for = max(0, int(blocked) - now_ms) / 1000 if blocked else 0.0
        state: CircuitState = "closed" if not open_until else "open" if int(open_until) > now_ms else "half_open"
        return CircuitReading(provider, state, blocked_for, int(open_), int(half), tuple(a.decode() for a in some))

    def account_circuits(self, provider: str, account_ids: Sequence[str]) -> dict[str, CircuitState]:
        """Each of ``account_ids``' breaker (accounts of ``provider``), in one round trip: open until its score in the
        provider's open accounts, half-open for a day after it (as ``circuits.lua`` counts), closed when absent."""
        if not account_ids:
            return {}
        pipe = self._client.pipeline(transaction=False)
        pipe.time()
        pipe.zmscore(self._keys.traffic_open_accounts(provider), list(account_ids))
        (seconds, micros), scores = pipe.execute()
        now_ms = seconds * 1000 + micros // 1000
        return {account_id: _state(score, now_ms) for account_id, score in zip(account_ids, scores, strict=True)}


def _state(open_until: float | None, now_ms: int) -> CircuitState:
    if open_until is None or open_until < now_ms - _HALF_OPEN_MS:
        return "closed"
    return "open" if open_until > now_ms else "half_open"


def _ms(seconds: float) -> int:
    return max(0, int(seconds * 1000))
