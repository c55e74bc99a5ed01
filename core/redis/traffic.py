"""Traffic state in Redis, shared by every worker: one script admits a provider call, one settles it.

Per account (hash ``traffic_account``): a token bucket, "blocked until" and a circuit breaker; its in-flight
calls (sorted set ``traffic_slots``, leases scored by expiry, so a killed worker's slot frees itself). Per
tenant: a token bucket. Per provider (hash ``traffic_provider``): a bucket, "blocked until" and a breaker.
Times are Redis server time in ms, so worker clocks do not matter.

``admit`` checks, in order: provider blocked, provider breaker, account blocked, account breaker, account
concurrency, the three buckets; the first that holds the call answers how long to wait, and nothing is
changed. Only an admitted call takes a slot, a token from each bucket and, for a half-open breaker, its one
probe. ``settle`` gives the slot and probe back and tells the breakers how the call ended: a success closes
them; a temporary failure counts: BREAKER_FAILURES in a row open the account's breaker (a failed probe
reopens it at once), while the provider's opens (half-open: reopens) only once the failures since the
provider's last success come from BREAKER_FAILURES distinct accounts and as many distinct events (the sets
``traffic_streak``, cleared by a success), so no one account or event holds the others; an account-only
failure (credentials rejected) counts for the account alone; anything else counts for nothing. A provider's
back-off hint sets "blocked until" for the account or the whole provider.

``settle`` also decides whether a temporary failure is excused (the job keeps its attempt): when a breaker
is not closed after it, when the provider's streak spans two accounts and two events or more (one account's
or one event's failures never excuse each other), or, once per attempt, when it is the job's own first
failure; at most BREAKER_FAILURES times per job and attempt (hash ``traffic_excused``); otherwise it is the
job's.

Both scripts run on the worker thread's own connection (core/redis/thread_connections.py), sent once
more on a new one if it was dropped. A success's settle is sent without waiting (``settle_later``): Redis
runs it before this thread's next command; if its answer is lost it may not have run, and then the slot
frees itself after the lease and the breakers' count is reset by the next success.
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
from calsync.core.redis.thread_connections import DROPPED, Arg, ThreadConnections
from calsync.core.redis.traffic_scripts import ADMIT, ADMIT_SHA, CIRCUITS, SETTLE, SETTLE_SHA

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
        self._circuits = client.register_script(CIRCUITS)
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
        # Re-sent once on a dropped connection, same token, "again" set: the script then frees that token's slot
        # first, so a lost answer never holds two slots (what else it may leave: docs/notes/traffic.md).
        answer = self._run(ADMIT_SHA, ADMIT, keys, [*args, 0], ("admitting", account_id), [*args, 1])
        admitted, wait_ms, reason, probes = answer
        held = cast("HoldReason", _text(reason)) if not admitted else None
        return Admission(bool(admitted), int(wait_ms) / 1000, held, token, int(probes))

    def settle(self, provider: str, account_id: str, admission: Admission, limits: Limits, ending: Ending,
               block: tuple[Scope, float] | None = None, job: tuple[str, int] | None = None, *,
               event: str | None = None) -> Settled:  # fmt: skip
        """Give the call's slot and probe back, tell the breakers how it ended, apply a back-off hint.

        ``job`` (its id and attempt) lets a temporary failure be excused as the provider's (docs/notes/traffic.md);
        ``event`` (tenant/entity) is what the call was about: the provider's breaker and the outage excuse need
        failures of several events (None: the call counts as an event of its own).
        Sent again once on a dropped connection: if the first one ran and only its answer was lost, a failure
        is counted twice (the breaker opens one failure early; the job's excuses run out one early).
        """
        keys, args = self._settle_call(provider, account_id, admission, limits, ending, block, job, event)
        answer = self._run(SETTLE_SHA, SETTLE, keys, args, ("settling", account_id))
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
        keys, args = self._settle_call(provider, account_id, admission, limits, "success", None, None, None)
        try:
            self._lines.send_later(("EVAL", SETTLE, len(keys), *keys, *args),  # EVAL: no NOSCRIPT to redo
                                   functools.partial(_settled_later, account_id))  # fmt: skip
        except DROPPED:
            self.settle(provider, account_id, admission, limits, "success")  # it never reached Redis: send it again

    def close(self) -> None:
        """Give back the threads' connections, if they are this store's own."""
        if self._own:
            self._lines.close()

    def _settle_call(self, provider: str, account_id: str, admission: Admission, limits: Limits, ending: Ending,
                     block: tuple[Scope, float] | None, job: tuple[str, int] | None, event: str | None,
                     ) -> tuple[list[str], list[Arg]]:  # fmt: skip
        k = self._keys
        job_id, attempt = job if job is not None else ("", 0)
        keys = [k.traffic_account(provider, account_id), k.traffic_slots(provider, account_id),
                k.traffic_provider(provider), k.traffic_open_accounts(provider),
                k.traffic_excused(job_id or "-"), k.traffic_streak(provider, "accounts"),
                k.traffic_streak(provider, "events")]  # fmt: skip
        scope, seconds = block if block is not None else ("account", 0.0)
        args: list[Arg] = [admission.token, ending, admission.probes, scope, _ms(seconds), limits.breaker_failures,
                           _ms(limits.breaker_open), account_id, job_id, attempt,
                           event or f"call:{admission.token}"]  # fmt: skip
        return keys, args

    def _run(self, sha: str, text: str, keys: Sequence[str], args: Sequence[Arg], doing: tuple[str, str],
             again: Sequence[Arg] | None = None) -> Any:  # fmt: skip
        # One script on this thread's connection, once more (with ``again``) on a new one if it was dropped.
        try:
            try:
                return self._lines.script(sha, text, keys, args)
            except DROPPED:
                return self._lines.script(sha, text, keys, args if again is None else again)
        except (redis.RedisError, OSError) as exc:
            verb, account_id = doing
            raise StoreUnavailable(f"Redis unreachable {verb} a call to {account_id}: {type(exc).__name__}") from exc

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
