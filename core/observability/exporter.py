"""The queue exporter: ``calsync exporter`` serves queue, DLQ, target and worker gauges on ``/metrics``.

One replica per deployment (never computed in every worker: N identical series, and none at all
when workers are scaled to zero). Every scrape reads the sources afresh through
:class:`core.observability.pipeline_state.StateReader`; the registry is private and in-memory, so the exporter is
unaffected by a ``PROMETHEUS_MULTIPROC_DIR`` it may inherit. A source that cannot be read drops its
series for that scrape and reports ``calsync_exporter_source_up{source} 0``; series a broker cannot
provide (RabbitMQ: delayed, in-flight, oldest age) are left out, never faked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from threading import Thread
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from calsync.core.clients import Clients
from calsync.core.observability.pipeline_state import SOURCES, PipelineState, StateReader
from calsync.core.traffic import CIRCUIT_STATE_VALUES

#: Every gauge's help text, in the order of the exposition (its labels are its samples', below).
GAUGES: dict[str, str] = {
    "calsync_queue_ready_messages": "Messages ready to run, not yet fetched by a worker.",
    "calsync_queue_delayed_messages": "Delayed messages (retries, lock waits), including those held by workers.",
    "calsync_queue_inflight_messages": "Messages fetched by a worker and not yet acknowledged.",
    "calsync_queue_oldest_message_age_seconds": (
        "Age of the message at the head of the ready list, since it became ready (0 when the list is empty)."
    ),
    "calsync_dead_letters_open": "Dead letters neither replayed nor discarded.",
    "calsync_dead_letter_oldest_age_seconds": "Age of the oldest open dead letter (0 when there is none).",
    "calsync_sync_targets": "Outstanding sync targets (event x account): pending or failed.",
    "calsync_sync_pending_oldest_age_seconds": (
        "How long the most overdue pending target has been due (0 when none is overdue)."
    ),
    "calsync_webhook_endpoints_disabled": "Webhook endpoints disabled, by who: auto (the breaker) or operator.",
    "calsync_webhook_deliveries": "Outstanding webhook deliveries (notification x endpoint): pending or failed.",
    "calsync_circuit_state": (
        "Circuit breaker state: 0 closed, 1 half-open (one probe at a time), 2 open. scope=provider: the provider's "
        "breaker; scope=account: the worst of its accounts' breakers."
    ),
    "calsync_circuit_accounts_not_closed": "Accounts whose circuit breaker is open or half-open.",
    "calsync_provider_blocked_seconds": (
        "Seconds every job of the provider is still held by a back-off the provider asked for (0: none)."
    ),
    "calsync_drift_sweep_age_seconds": (
        "Seconds since the least recently swept account was last swept, among those sweeps are owed to (0: none yet)."
    ),
    "calsync_drift_sweeps_overdue": (
        "Accounts whose drift sweep is due for more than CALSYNC_DRIFT_INTERVAL and no worker has claimed it."
    ),
    "calsync_workers_active": "Worker processes with an unexpired heartbeat key.",
    "calsync_exporter_source_up": "Whether the exporter could read a source (broker, database, redis).",
    "calsync_exporter_scrape_duration_seconds": "Time the exporter took to read every source.",
}
Sample = tuple[str, dict[str, str], float | None]  # name, labels, value (None: a value the source cannot give)


class QueueCollector(Collector):
    """Turns one fresh state per scrape into calsync_* gauges."""

    def __init__(self, reader: StateReader) -> None:
        self.reader = reader

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        state = self.reader.read()
        samples = [*_samples(state), ("calsync_exporter_scrape_duration_seconds", {}, time.perf_counter() - started)]
        for name, documentation in GAUGES.items():
            # A source not read, or values the broker cannot give, make no series.
            found = [(labels, value) for sample, labels, value in samples if sample == name and value is not None]
            if found:
                family = GaugeMetricFamily(name, documentation, labels=list(found[0][0]))
                for labels, value in found:
                    family.add_metric(list(labels.values()), value)
                yield family


def _samples(state: PipelineState) -> Iterator[Sample]:
    for q in state.queues or []:
        yield "calsync_queue_ready_messages", {"queue": q.queue}, q.ready
        yield "calsync_queue_delayed_messages", {"queue": q.queue}, q.delayed
        yield "calsync_queue_inflight_messages", {"queue": q.queue}, q.inflight
        yield "calsync_queue_oldest_message_age_seconds", {"queue": q.queue}, q.oldest_age_seconds
    if (store := state.store) is not None:
        yield from _by_label("calsync_dead_letters_open", "job_type", store.dead_letters.open_by_job_type)
        yield "calsync_dead_letter_oldest_age_seconds", {}, store.dead_letters.oldest_age_seconds
        yield from _by_label("calsync_sync_targets", "status", store.targets.by_status)
        yield "calsync_sync_pending_oldest_age_seconds", {}, store.targets.pending_oldest_age_seconds
        yield from _by_label("calsync_webhook_endpoints_disabled", "by", store.webhooks.endpoints_disabled)
        yield from _by_label("calsync_webhook_deliveries", "status", store.webhooks.deliveries)
        yield "calsync_drift_sweep_age_seconds", {}, store.drift.sweep_age_seconds
        yield "calsync_drift_sweeps_overdue", {}, store.drift.sweeps_overdue
    for c in state.circuits or []:
        for scope, circuit in (("provider", c.state), ("account", c.accounts_state)):
            yield "calsync_circuit_state", {"provider": c.provider, "scope": scope}, CIRCUIT_STATE_VALUES[circuit]
        yield "calsync_circuit_accounts_not_closed", {"provider": c.provider}, c.accounts_open + c.accounts_half_open
        yield "calsync_provider_blocked_seconds", {"provider": c.provider}, c.blocked_for_seconds
    if state.workers_active is not None:
        yield "calsync_workers_active", {}, state.workers_active
    yield from (("calsync_exporter_source_up", {"source": s}, int(s not in state.errors)) for s in SOURCES)


def _by_label(name: str, label: str, counts: dict[str, int]) -> Iterator[Sample]:
    return ((name, {label: value}, n) for value, n in sorted(counts.items()))


def exporter_registry(reader: StateReader) -> CollectorRegistry:
    """A private registry holding only the exporter's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(reader))
    return registry


def serve(clients: Clients, *, host: str, port: int) -> tuple[WSGIServer, Thread]:
    """Start serving ``/metrics`` on a background thread; stop it with ``server.shutdown()``."""
    return start_http_server(port, addr=host, registry=exporter_registry(StateReader(clients)))
