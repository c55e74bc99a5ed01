"""Traffic control around each provider call: one admission script before it, one settle script after it.

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

A governed call costs two waited round trips (admit, settle). A provider without any limit or breaker (the
memory provider, by default) is not governed: no Redis call; its requests are counted all the same.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Final, get_args

from calsync.core.model.calendar import Account, ProviderName
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
from calsync.core.model.payload import JobPayload
from calsync.core.model.provider_io import RequestsSent
from calsync.core.traffic.settings import Limits
from calsync.core.traffic.store import Admission, Ending, HoldReason, Scope, Settled, TrafficStore

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


def account_concurrency(account: Account, limits: Limits) -> int:
    """The account's own ``max_concurrency`` option (a whole number of 1 or more: checked when the account is added,
    providers/registry.py), else its provider's limit."""
    return int(account.options.get(CONCURRENCY_OPTION) or limits.concurrency)


def ending_of(exc: BaseException) -> Ending:
    """What a failed call tells the breakers: throttles and refusals say nothing about the provider's health."""
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


def export_deferral_zeros() -> None:
    """Every (provider, limit) series of calsync_traffic_deferrals_total at 0, when a worker process boots: a series
    that first appears with its first hold hides that hold from ``increase()`` (core/worker/metrics.py)."""
    from calsync.core.traffic.metrics import TRAFFIC_DEFERRALS

    for provider in get_args(ProviderName):
        for reason in get_args(HoldReason):
            TRAFFIC_DEFERRALS.labels(provider, reason)


def _hold(account: Account, reason: HoldReason, wait: float, after: str = "") -> Held:
    from calsync.core.traffic.metrics import TRAFFIC_DEFERRALS  # prometheus_client: not for every command

    TRAFFIC_DEFERRALS.labels(account.provider, reason).inc()
    return _HELD[reason](f"{account.provider} account {account.id}: {reason}{after}", retry_after=wait)


class TrafficGate:
    """Admits provider calls against the shared limits; shared by every worker thread of a process."""

    def __init__(self, store: TrafficStore | None, limits: Mapping[str, Limits]) -> None:
        self._store = store
        self._limits = dict(limits) if store is not None else {}

    @contextlib.contextmanager
    def call(self, account: Account, payload: JobPayload | None, sent: RequestsSent) -> Iterator[None]:
        """Run the block as one admitted call to ``account``'s provider, or raise Held without running it.

        ``payload``: the job the call is for (None: no job, nothing excused); the requests the block sends are
        counted into ``sent`` (the delivery's).
        """
        limits = self._limits.get(account.provider)
        if limits is None or self._store is None:
            with sent:
                yield
            return
        concurrency = account_concurrency(account, limits)
        admission = self._store.admit(account.provider, account.id, account.tenant_id, limits, concurrency)
        if admission.reason is not None:
            raise _hold(account, admission.reason, admission.wait)
        try:
            with sent:
                yield
        except BaseException as exc:
            # None sent: it failed in calsync's own code before any request went out, not the provider's failure.
            ending, block = (ending_of(exc), block_of(exc)) if sent.count else ("neutral", None)
            settled = self._settle(account, limits, admission, ending, block, payload)
            if settled is not None and settled.excuse is not None and isinstance(exc, Exception):
                wait = max(settled.account_open, settled.provider_open, limits.retry_delay)
                circuit: HoldReason = "provider_circuit" if settled.provider_open else "account_circuit"
                reason: HoldReason = settled.excuse if settled.excuse != "circuit" else circuit
                raise _hold(account, reason, wait, f" after {exc}") from exc
            raise
        self._settle(account, limits, admission, "success")

    def _settle(
        self,
        account: Account,
        limits: Limits,
        admission: Admission,
        ending: Ending,
        block: tuple[Scope, float] | None = None,
        payload: JobPayload | None = None,
    ) -> Settled | None:
        assert self._store is not None  # only a governed call is settled
        job = (payload.job_id, payload.attempt) if payload is not None else None  # no job known: nothing excused
        event = f"{payload.tenant_id}/{payload.entity_id}" if payload is not None else None
        try:
            return self._store.settle(account.provider, account.id, admission, limits, ending, block, job, event=event)
        except Exception:
            log.warning("could not settle a provider call; its slot frees itself after the lease", exc_info=True)
            return None
