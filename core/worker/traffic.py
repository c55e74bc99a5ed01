"""Traffic control around each provider call: one admission script before it, one settle script after it.

Both run on the worker thread's own Redis connection (core/redis/thread_connections.py). A success's
settle is sent without waiting: its answer is unused, and Redis runs it before this thread's next
command; should it be lost, the slot frees itself after the lease. A failure's settle waits: its
answer decides whether the failure is excused.

A call over a limit, to a blocked account or provider, or behind an open circuit breaker raises a
:class:`~core.model.errors.Held` (a deferral: re-enqueued after the wait the script answered, no attempt
used, never dead-lettered for it). After the call, its ending feeds the breakers and a back-off hint the
provider gave ("Retry-After", EWS ``BackOffMilliseconds``) holds every job of the account, or of the whole
provider for a :class:`~core.model.errors.ProviderThrottled`. A temporary failure the settle script excuses
(a breaker not closed after it, another job failing in the same streak, or the job's first failure of the
attempt; at most BREAKER_FAILURES per attempt) is itself held: the outage, not the job, failed, so it keeps
its attempt (docs/notes/traffic.md, "Which failures use an attempt").

A call that failed before any request went out (the gate counts them, core/model/provider_io.py) failed in
calsync's own code: it settles as neutral, so it never counts toward a breaker nor is excused as an outage.

A provider without any limit or breaker (the memory provider, by default) is not governed: no Redis call; its
requests are counted all the same.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Final

from calsync.core.config.settings import Settings
from calsync.core.model.calendar import Account
from calsync.core.model.errors import (
    AuthRevoked,
    BackingOff,
    CircuitOpen,
    ConcurrencyLimited,
    Held,
    OutageSuspected,
    OverRate,
    PermanentError,
    ProviderThrottled,
    RateLimited,
    TemporaryError,
)
from calsync.core.model.provider_io import RequestsSent
from calsync.core.redis.traffic import Admission, Ending, HoldReason, Limits, Scope, Settled, TrafficStore
from calsync.core.worker.delivery import current_delivery
from calsync.core.worker.metrics import traffic_deferral

log = logging.getLogger(__name__)

#: The account option that overrides its provider's concurrency limit.
CONCURRENCY_OPTION: Final = "max_concurrency"

_HELD: Final[dict[HoldReason, type[Held]]] = {
    "provider_blocked": BackingOff,
    "account_blocked": BackingOff,
    "provider_circuit": CircuitOpen,
    "account_circuit": CircuitOpen,
    "concurrency": ConcurrencyLimited,
    "account_rate": OverRate,
    "tenant_rate": OverRate,
    "provider_rate": OverRate,
    "provider_streak": OutageSuspected,
    "first_failure": OutageSuspected,
}


def provider_limits(settings: Settings) -> dict[str, Limits]:
    """Every provider's limits from the settings (a provider with none is left out: not governed)."""
    limits = {}
    for name in settings.account_concurrency:
        provider = Limits(
            concurrency=settings.account_concurrency.get(name, 0),
            account_rate=settings.account_rate.get(name, 0),
            tenant_rate=settings.tenant_rate,
            provider_rate=settings.provider_rate.get(name, 0),
            burst=settings.traffic_burst,
            breaker_failures=settings.breaker_failures.get(name, 0),
            breaker_open=settings.breaker_open_seconds,
            retry_delay=settings.traffic_retry_delay,
            lease=settings.job_time_limit + 5,
        )
        if provider.governed:
            limits[name] = provider
    return limits


def account_concurrency(account: Account, limits: Limits) -> int:
    """The account's own ``max_concurrency`` option when it has a valid one, else its provider's limit."""
    own = account.options.get(CONCURRENCY_OPTION)
    return own if isinstance(own, int) and not isinstance(own, bool) and own >= 1 else limits.concurrency


def ending_of(exc: BaseException | None) -> Ending:
    """What a call's ending tells the breakers: throttles and refusals say nothing about the provider's health."""
    if exc is None:
        return "success"
    if isinstance(exc, AuthRevoked):
        return "account_failure"  # one account's credentials: never the provider-wide breaker
    if isinstance(exc, Held | RateLimited | PermanentError):
        return "neutral"
    return "failure"


def block_of(exc: BaseException) -> tuple[Scope, float] | None:
    """The back-off a failure asks of every job: the whole provider for ProviderThrottled, else the account."""
    hint = exc.retry_after if isinstance(exc, TemporaryError | Held) else None
    if not hint:
        return None
    return ("provider" if isinstance(exc, ProviderThrottled) else "account"), hint


class TrafficGate:
    """Admits provider calls against the shared limits; shared by every worker thread of a process."""

    def __init__(self, store: TrafficStore | None, limits: Mapping[str, Limits]) -> None:
        self._store = store
        self._limits = dict(limits) if store is not None else {}

    @contextlib.contextmanager
    def call(self, account: Account) -> Iterator[None]:
        """Run the block as one admitted call to ``account``'s provider, or raise Held without running it.

        The requests the block sends are counted into the current delivery's ``provider_requests``.
        """
        delivery = current_delivery()
        sent = delivery.provider_requests if delivery is not None else RequestsSent()
        limits = self._limits.get(account.provider)
        if limits is None:
            with sent:
                yield
            return
        assert self._store is not None
        admission = self._store.admit(
            account.provider, account.id, account.tenant_id, limits, account_concurrency(account, limits)
        )
        if admission.reason is not None:
            traffic_deferral(account.provider, admission.reason)
            held = _HELD[admission.reason]
            raise held(f"{account.provider} account {account.id}: {admission.reason}", retry_after=admission.wait)
        try:
            with sent:
                yield
        except BaseException as exc:
            if sent.count:
                self._failed(account, limits, admission, exc)
            else:  # failed in calsync's own code before any request went out: not the provider's failure
                self._settle(account, limits, admission, None, neutral=True)
            raise
        self._settle(account, limits, admission, None)

    def _failed(self, account: Account, limits: Limits, admission: Admission, exc: BaseException) -> None:
        settled = self._settle(account, limits, admission, exc)
        if settled is None or settled.excuse is None or not isinstance(exc, Exception):
            return
        wait = max(settled.account_open, settled.provider_open, limits.retry_delay)
        reason: HoldReason = settled.excuse if settled.excuse != "circuit" else (
            "provider_circuit" if settled.provider_open else "account_circuit")  # fmt: skip
        traffic_deferral(account.provider, reason)
        raise _HELD[reason](f"{account.provider} account {account.id}: {reason} after {exc}", retry_after=wait) from exc

    def _settle(
        self, account: Account, limits: Limits, admission: Admission, exc: BaseException | None, *,
        neutral: bool = False,
    ) -> Settled | None:  # fmt: skip
        assert self._store is not None
        try:
            if neutral:
                return self._store.settle(account.provider, account.id, admission, limits, "neutral")
            if exc is None:  # a success's answer is unused: settled without waiting
                self._store.settle_later(account.provider, account.id, admission, limits)
                return None
            delivery = current_delivery()
            payload = delivery.payload if delivery is not None else None
            job = (payload.job_id, payload.attempt) if payload is not None else None  # no job known: nothing excused
            event = f"{payload.tenant_id}/{payload.entity_id}" if payload is not None else None
            return self._store.settle(account.provider, account.id, admission, limits, ending_of(exc), block_of(exc),
                                      job, event=event)  # fmt: skip
        except Exception:
            log.warning("could not settle a provider call; its slot frees itself after the lease", exc_info=True)
            return None
