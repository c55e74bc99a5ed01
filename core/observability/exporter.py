"""The queue exporter: ``calsync exporter`` serves queue, DLQ, target and worker gauges on ``/metrics``.

One replica per deployment (never computed in every worker: N identical series, and none at all
when workers are scaled to zero). Every scrape reads the sources afresh through
:class:`core.observability.readings.StatusReader`; the registry is private and in-memory, so the exporter is
unaffected by a ``PROMETHEUS_MULTIPROC_DIR`` it may inherit. A source that cannot be read drops its
series for that scrape and reports ``calsync_exporter_source_up{source} 0``; series a broker cannot
provide (RabbitMQ: delayed, in-flight, oldest age) are left out, never faked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from threading import Thread
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from calsync.core.observability.readings import SOURCES, Reading, StatusReader
from calsync.core.traffic import CIRCUIT_STATE_VALUES

if TYPE_CHECKING:
    from calsync.core.runtime import Runtime


def _gauge(name: str, documentation: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=labels)


class QueueCollector(Collector):
    """Turns one fresh reading per scrape into calsync_* gauges."""

    def __init__(self, reader: StatusReader) -> None:
        self.reader = reader

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        reading = self.reader.read()
        yield from _queue_metrics(reading)
        yield from _store_metrics(reading)
        yield from _circuit_metrics(reading)
        if reading.workers_active is not None:
            workers = _gauge("calsync_workers_active", "Worker processes with an unexpired heartbeat key.")
            workers.add_metric([], reading.workers_active)
            yield workers
        up = _gauge(
            "calsync_exporter_source_up",
            "Whether the exporter could read a source (broker, database, redis).",
            ["source"],
        )
        for source in SOURCES:
            up.add_metric([source], 1 if reading.source_up(source) else 0)
        yield up
        took = _gauge("calsync_exporter_scrape_duration_seconds", "Time the exporter took to read every source.")
        took.add_metric([], time.perf_counter() - started)
        yield took


def _queue_metrics(reading: Reading) -> Iterator[Metric]:
    if reading.queues is None:
        return
    ready = _gauge("calsync_queue_ready_messages", "Messages ready to run, not yet fetched by a worker.", ["queue"])
    delayed = _gauge(
        "calsync_queue_delayed_messages", "Delayed messages (retries, lock waits), including those held by workers.",
        ["queue"],
    )  # fmt: skip
    inflight = _gauge(
        "calsync_queue_inflight_messages", "Messages fetched by a worker and not yet acknowledged.", ["queue"]
    )
    oldest = _gauge(
        "calsync_queue_oldest_message_age_seconds",
        "Age of the message at the head of the ready list, since it became ready (0 when the list is empty).",
        ["queue"],
    )
    for queue in reading.queues:
        ready.add_metric([queue.queue], queue.ready)
        if queue.delayed is not None:
            delayed.add_metric([queue.queue], queue.delayed)
        if queue.inflight is not None:
            inflight.add_metric([queue.queue], queue.inflight)
        if queue.oldest_age_seconds is not None:
            oldest.add_metric([queue.queue], queue.oldest_age_seconds)
    yield from (family for family in (ready, delayed, inflight, oldest) if family.samples)


def _store_metrics(reading: Reading) -> Iterator[Metric]:
    store = reading.store
    if store is None:
        return
    open_ = _gauge("calsync_dead_letters_open", "Dead letters neither replayed nor discarded.", ["job_type"])
    for job_type, count in sorted(store.open_by_job_type().items()):
        open_.add_metric([job_type], count)
    yield open_
    oldest = _gauge(
        "calsync_dead_letter_oldest_age_seconds", "Age of the oldest open dead letter (0 when there is none)."
    )
    oldest.add_metric([], store.dead_letter_oldest_age_seconds)
    yield oldest
    by_status = _gauge("calsync_sync_targets", "Sync targets (event x account) by sync status.", ["status"])
    for status, count in store.targets.items():
        by_status.add_metric([status], count)
    yield by_status
    pending = _gauge(
        "calsync_sync_pending_oldest_age_seconds",
        "How long the most overdue pending target has been due (0 when none is overdue).",
    )
    pending.add_metric([], store.pending_oldest_age_seconds)
    yield pending
    disabled = _gauge("calsync_webhook_endpoints_disabled", "Webhook endpoints disabled, by who: auto (the breaker) "
                      "or operator.", ["by"])  # fmt: skip
    for by, count in sorted(store.webhook_endpoints_disabled.items()):
        disabled.add_metric([by], count)
    yield disabled
    deliveries = _gauge("calsync_webhook_deliveries", "Webhook deliveries (notification x endpoint) by status.",
                        ["status"])  # fmt: skip
    for status, count in store.webhook_deliveries.items():
        deliveries.add_metric([status], count)
    yield deliveries


def _circuit_metrics(reading: Reading) -> Iterator[Metric]:
    if reading.circuits is None:
        return
    state = _gauge(
        "calsync_circuit_state",
        "Circuit breaker state: 0 closed, 1 half-open (one probe at a time), 2 open. scope=provider: the provider's "
        "breaker; scope=account: the worst of its accounts' breakers.",
        ["provider", "scope"],
    )
    accounts = _gauge(
        "calsync_circuit_accounts_not_closed", "Accounts whose circuit breaker is open or half-open.", ["provider"]
    )
    blocked = _gauge(
        "calsync_provider_blocked_seconds",
        "Seconds every job of the provider is still held by a back-off the provider asked for (0: none).",
        ["provider"],
    )
    for circuit in reading.circuits:
        state.add_metric([circuit.provider, "provider"], CIRCUIT_STATE_VALUES[circuit.state])
        state.add_metric([circuit.provider, "account"], CIRCUIT_STATE_VALUES[circuit.accounts_state])
        accounts.add_metric([circuit.provider], circuit.accounts_open + circuit.accounts_half_open)
        blocked.add_metric([circuit.provider], circuit.blocked_for)
    yield from (state, accounts, blocked)


def exporter_registry(reader: StatusReader) -> CollectorRegistry:
    """A private registry holding only the exporter's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(reader))
    return registry


def serve(runtime: Runtime, *, host: str, port: int) -> tuple[WSGIServer, Thread]:
    """Start serving ``/metrics`` on a background thread; stop it with ``server.shutdown()``."""
    return start_http_server(port, addr=host, registry=exporter_registry(StatusReader(runtime)))
