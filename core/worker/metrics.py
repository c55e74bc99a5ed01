"""calsync's worker metrics (names and labels are a contract: docs/METRICS.md documents each one).

Worker processes run in Prometheus' multiprocess mode: ``calsync worker`` sets
``PROMETHEUS_MULTIPROC_DIR`` and ``dramatiq_prom_db`` to ``METRICS_DIR`` (emptied at start) before
exec'ing Dramatiq, and Dramatiq's exposition server (``METRICS_PORT``, default 9191) serves these
metrics next to Dramatiq's own. prometheus_client decides between in-memory and multiprocess values
at its first import, so a worker started without the environment would silently serve nothing:
:func:`require_multiprocess` refuses to start such a worker. Other processes (tests, the CLI) get
ordinary in-memory values.

Labels are low-cardinality by construction: job type (actor name), provider (google, exchange,
memory, unknown), outcome, operation, status class, error class (a class name), DLQ reason, lock
result; never a tenant, entity, event, account or message id. Gauges name their multiprocess mode
explicitly; ``livemax`` drops a process' series when it exits gracefully and freezes it (stale)
when it is killed.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import socket
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, get_args

import dramatiq
from prometheus_client import Counter, Gauge, Histogram, values

from calsync.core.messaging.messages import JOB_TYPES
from calsync.core.model.calendar import ProviderName
from calsync.core.model.errors import ConfigurationError, PermanentError, TemporaryError, error_class_of, is_permanent
from calsync.core.model.payload import SYNC_JOB, Operation
from calsync.core.model.vocabulary import DeadLetterCause, Outcome
from calsync.core.worker.delivery import Delivery

if TYPE_CHECKING:
    from calsync.core.config.settings import Settings

log = logging.getLogger(__name__)

_JOB_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_PROVIDER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

JOBS = Counter(
    "calsync_jobs_total",
    "Job deliveries by how they ended: success, already_done, stale, retry_scheduled, lock_busy (target lock held), "
    "deferred (held by traffic control), dead_lettered.",
    ["job_type", "provider", "outcome"],
)
JOB_DURATION = Histogram(
    "calsync_job_duration_seconds",
    "Time from the start of a delivery to its ack or nack, whatever the outcome.",
    ["job_type", "provider"],
    buckets=_JOB_BUCKETS,
)
JOB_RETRIES = Counter(
    "calsync_job_retries_total",
    "Retries scheduled on the retry schedule, by the class of the error that caused them.",
    ["job_type", "provider", "error_class"],
)
PROVIDER_REQUESTS = Counter(
    "calsync_provider_requests_total",
    "Provider adapter calls by operation (create, update, delete) and status class (ok, temporary_error, "
    "permanent_error).",
    ["provider", "operation", "status_class"],
)
PROVIDER_DURATION = Histogram(
    "calsync_provider_request_duration_seconds",
    "Duration of provider adapter calls, successful or not.",
    ["provider", "operation"],
    buckets=_PROVIDER_BUCKETS,
)
LOCK_ACQUISITIONS = Counter(
    "calsync_lock_acquisitions_total",
    "Attempts to take a per-target lock: acquired, or busy (held by another delivery).",
    ["result"],
)
DEAD_LETTERS = Counter(
    "calsync_dead_letters_total",
    "Jobs dead-lettered, by the reason recorded in the durable DLQ.",
    ["job_type", "reason"],
)


def _per_process(name: str, documentation: str, label: str = "worker") -> Gauge:
    """A gauge with one series per live worker process: dropped when it exits gracefully, stale when killed."""
    return Gauge(name, documentation, [label], multiprocess_mode="livemax")


WORKER_HEARTBEAT = _per_process(
    "calsync_worker_heartbeat_timestamp_seconds",
    "Unix time of the last heartbeat of each live worker process; stops moving when the process is stuck or dead.",
)
WORKER_THREADS_ALIVE = _per_process(
    "calsync_worker_threads_alive",
    "Worker threads alive in each worker process; below calsync_worker_threads_configured the process is unhealthy.",
)
WORKER_THREADS_CONFIGURED = _per_process(
    "calsync_worker_threads_configured",
    "Worker threads each worker process was started with (--threads, CALSYNC_WORKER_THREADS).",
)
BUILD_INFO = _per_process(
    "calsync_build_info",
    "Always 1, labelled with the running calsync version (a gauge: Info does not work in multiprocess mode).",
    "version",
)


@functools.cache  # the code running is what was installed at start: read once, not at every heartbeat
def calsync_version() -> str:
    """The installed calsync version, the value of ``calsync_build_info{version}``."""
    try:
        return metadata.version("calsync")
    except metadata.PackageNotFoundError:
        return "unknown"


def worker_id() -> str:
    """This process as the ``worker`` label and heartbeat key know it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def status_class(exc: BaseException) -> str:
    """How a failed provider call ended, as the ``status_class`` label: the retry policy's own classification."""
    return "permanent_error" if is_permanent(exc) else "temporary_error"


def lock_attempt(*, acquired: bool) -> None:
    """Count one attempt to take a per-target lock (every delivery of a sync job with a valid payload makes one)."""
    LOCK_ACQUISITIONS.labels("acquired" if acquired else "busy").inc()


@contextlib.contextmanager
def provider_request(provider: str, operation: str) -> Iterator[None]:
    """Count and time one provider adapter call (the one place every provider call goes through)."""
    with PROVIDER_DURATION.labels(provider, operation).time():
        try:
            yield
        except BaseException as exc:
            PROVIDER_REQUESTS.labels(provider, operation, status_class(exc)).inc()
            raise
        PROVIDER_REQUESTS.labels(provider, operation, "ok").inc()


def require_multiprocess(settings: Settings) -> None:
    """Refuse to run a worker whose metrics would silently stay in memory (invisible on METRICS_PORT)."""
    from dramatiq.middleware import prometheus

    if values.ValueClass is values.MutexValue:
        raise ConfigurationError(
            "prometheus_client was imported without PROMETHEUS_MULTIPROC_DIR, so no metric would reach the "
            "exposition port: start workers with `calsync worker`, which sets it before anything is imported"
        )
    if Path(prometheus.DB_PATH).resolve() != settings.effective_metrics_dir.resolve():
        raise ConfigurationError(
            f"dramatiq_prom_db ({prometheus.DB_PATH}) is not CALSYNC_METRICS_DIR "
            f"({settings.effective_metrics_dir}): start workers with `calsync worker`"
        )


def zeros(metric: Counter, *labels: Iterable[str]) -> None:
    """Create the series of ``metric`` for every combination of ``labels``' values, at 0."""
    for combination in itertools.product(*labels):
        metric.labels(*combination)


def export_zeros() -> None:
    """Create every known series of the counters alerts and panels read, at 0, when a worker process boots.

    A counter series that first appears with its first increment hides that increment from ``increase()`` and
    ``rate()`` (Prometheus' first sample already holds it): a burst of 12 dead letters in a new pod would never
    fire CalsyncDeadLettersGrowingFast. Known: the actors of ``JOB_TYPES`` (sync jobs with each provider or
    ``unknown``, the others ``unknown``), every outcome, the retried error classes (``TemporaryError``'s and
    Dramatiq's ``TimeLimitExceeded``), the dead-letter reasons of ``PermanentError`` and of ``DeadLetterCause``;
    traffic control's holds, webhook delivery attempts and drift findings by their features' own vocabularies.
    Reasons and classes outside these (a foreign exception) still appear with their first increment.
    """
    providers = (*get_args(ProviderName), "unknown")
    pairs = [(SYNC_JOB, p) for p in providers] + [(job, "unknown") for job in JOB_TYPES if job != SYNC_JOB]
    errors = {c.__name__ for c in TemporaryError.with_subclasses()} | {"TimeLimitExceeded"}
    reasons = {c.reason for c in PermanentError.with_subclasses()}
    reasons |= {cause.reason(None) for cause in DeadLetterCause if cause is not DeadLetterCause.QUARANTINED}
    for job_type, provider in pairs:
        zeros(JOBS, [job_type], [provider], Outcome)
        zeros(JOB_RETRIES, [job_type], [provider], errors)
    zeros(DEAD_LETTERS, JOB_TYPES, reasons)
    zeros(PROVIDER_REQUESTS, providers, get_args(Operation), ("ok", "temporary_error", "permanent_error"))
    zeros(LOCK_ACQUISITIONS, ("acquired", "busy"))
    # Imported here: the webhooks' deliverer loads httpx, which only a worker process needs.
    from calsync.core.drift.metrics import export_drift_zeros
    from calsync.core.traffic import export_deferral_zeros
    from calsync.core.webhooks import export_delivery_zeros

    export_deferral_zeros()
    export_delivery_zeros()
    export_drift_zeros()


class WorkerMetrics(dramatiq.Middleware):
    """Labels the process with its calsync version and creates the counters' known series at 0; the deliveries'
    ends are counted by :func:`count_job`, lock attempts and provider calls by the job."""

    def after_process_boot(self, broker: dramatiq.Broker) -> None:
        BUILD_INFO.labels(calsync_version()).set(1)
        export_zeros()


def count_job(delivery: Delivery, outcome: Outcome, duration: float) -> None:
    """One delivery ended with ``outcome`` after ``duration`` seconds (told by JobLifecycle). Its provider is the
    account's when the job read its state (``unknown`` for a payload it could not read)."""
    try:
        JOBS.labels(delivery.actor, delivery.provider, outcome).inc()
        JOB_DURATION.labels(delivery.actor, delivery.provider).observe(duration)
        if outcome is Outcome.RETRY_SCHEDULED:
            error_class = error_class_of(delivery.error) if delivery.error is not None else "unknown"
            JOB_RETRIES.labels(delivery.actor, delivery.provider, error_class).inc()
        elif outcome is Outcome.DEAD_LETTERED:
            DEAD_LETTERS.labels(delivery.actor, delivery.dead_lettered_because()).inc()
    except Exception:
        log.warning("could not record job metrics", exc_info=True)
