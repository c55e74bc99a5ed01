"""The overview: the pipeline at a glance, refreshed live, and the pause switch (issue 32 items 3, 4 and 6).

``GET /overview`` is the whole page, ``GET /overview/live`` only its ``#overview`` region (what
``static/overview.js`` swaps in every 2 s; without JavaScript a ``<noscript>`` refresh reloads the page).
``POST /overview/pause`` and ``/overview/resume`` flip the pause switch (core/redis/pause.py, what ``calsync pause``
and ``calsync resume`` do) as the signed-in operator, each writing one audit row (``pipeline.pause``,
``pipeline.resume``; ``count`` 0 when the switch was already as asked).

What one reading costs. It is :class:`StateReader`'s reading (what ``calsync status`` and the exporter read, not a
query of its own), the pause switch and the sparklines' counters. Measured by benchmarks/console.py at 1,000,000
events (3,000,000 targets) and 100,000 dead letters, EXPLAIN ANALYZE of each statement (docs/notes/console.md):

- PostgreSQL, one read transaction, each statement an index range of the outstanding rows, never of the history
  (tests/store/test_query_plans.py fails if one of them reads a growing table whole), execution times at 1 M:
  open dead letters by (job type, reason), 0.2 ms, and the oldest open one, 0.04 ms: ``ix_dead_letters_status_failed``
  (status, failed_at), the 500 open ones; pending and failed targets by status, 0.1-0.4 ms, and the most overdue
  pending one, 0.05 ms: ``ix_event_targets_status_due`` (status, due_at), index only, the 360 outstanding entries;
  disabled webhook endpoints, 0.02 ms (a sequential scan of ``webhook_endpoints``: a row per endpoint, not per
  delivery); outstanding deliveries by status, 0.05 ms: ``ix_webhook_deliveries_status_next``, index only, 15
  entries; while drift sweeps are on, the overdue sweeps, 0.02 ms (``ix_drift_state_next``), and the least recent
  sweep, 6.3 ms at 10,000 accounts: sequential scans of ``drift_state`` and the accounts, a row per account (not
  per event; drift's ``oldest_sweep``, the exporter's cost as well).
- Redis: one Lua call per queue (5), one per provider with a breaker (3), the workers' set and one MGET, one GET of
  the pause switch, and one pipelined round trip of :data:`SPARK_MINUTES` HGETALLs for the sparklines.

Apart from the sweep age, the statements execute in under 1 ms together; what a reading costs is its ~20 round
trips (8 to PostgreSQL, 12 to Redis): 10 ms in process and 15 ms p50 / 33 ms p99 over HTTP, signed in, on 2 vCPUs
at a load average of 2.4 (19 / 61 ms at 7; 72 / 276 ms at 10-15). The sparklines read the per-minute
job outcome counters workers already keep (core/redis/stats.py, a hash per minute, expiring after a day): a fixed
cost of :data:`SPARK_MINUTES` small hashes however long the history, shared by every serve process, nothing written
by the console. A source that cannot be read is named in the ``#stale`` banner (e.g. "Redis unreachable") while the
others are still shown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import redis
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from calsync.core.config.settings import Settings
from calsync.core.console.auth import Acting, SignedIn
from calsync.core.console.pages.filters import free_text
from calsync.core.console.services import Console, ConsoleServices
from calsync.core.console.templating import redirect, render
from calsync.core.messaging.lanes import lanes_of
from calsync.core.model.vocabulary import Outcome
from calsync.core.observability.pipeline_state import PipelineState
from calsync.core.producer import pause as pipeline_pause
from calsync.core.redis.pause import PauseState

router = APIRouter()

SPARK_MINUTES = 30  # minutes shown by the sparklines, one point each
REFRESH_SECONDS = 2  # what overview.js waits between readings (never less: issue 32 item 4)
# Jobs that ended (whatever the ending), and attempts that failed: the throughput and failure-rate sparklines.
ENDED = frozenset({Outcome.SUCCESS, Outcome.ALREADY_DONE, Outcome.STALE, Outcome.DEAD_LETTERED})
FAILED = frozenset({Outcome.RETRY_SCHEDULED, Outcome.DEAD_LETTERED})
SOURCE_NAMES = {"broker": "The broker", "database": "PostgreSQL", "redis": "Redis"}
DONE = {  # what a post-redirect-get shows (?done=…): fixed messages, never text taken from the URL
    "paused": "Processing paused: workers finish their current jobs and take no new ones.",
    "already-paused": "Processing was already paused; the earlier pause (its time, author and reason) stands.",
    "resumed": "Processing resumed.",
    "not-paused": "Processing was not paused; nothing changed.",
}


@dataclass(frozen=True)
class Spark:
    """One sparkline: a value per minute, oldest first, drawn as an SVG polyline of ``WIDTH`` x ``HEIGHT``."""

    WIDTH = 160
    HEIGHT = 32

    values: tuple[float, ...]

    @property
    def last(self) -> float:
        """The current minute's value."""
        return self.values[-1] if self.values else 0.0

    @property
    def peak(self) -> float:
        """The highest value shown."""
        return max(self.values, default=0.0)

    def points(self) -> str:
        """The polyline's points: the peak at the top, 0 at the bottom (a flat line at the bottom when all are 0)."""
        step = self.WIDTH / max(1, len(self.values) - 1)
        peak, top = self.peak, self.HEIGHT - 2
        return " ".join(f"{i * step:.1f},{self.HEIGHT - 1 - (v / peak if peak else 0.0) * top:.1f}"
                        for i, v in enumerate(self.values))  # fmt: skip


def sparks(minutes: Sequence[Counter[str]]) -> tuple[Spark, Spark]:
    """Jobs ended per minute, and the share of attempts that failed (retried or dead-lettered) per minute."""
    ended = [sum(n for outcome, n in minute.items() if outcome in ENDED) for minute in minutes]
    failed = [sum(n for outcome, n in minute.items() if outcome in FAILED) for minute in minutes]
    attempts = [e + minute[Outcome.RETRY_SCHEDULED] for e, minute in zip(ended, minutes, strict=True)]
    rates = [f / a if a else 0.0 for f, a in zip(failed, attempts, strict=True)]
    return Spark(tuple(float(e) for e in ended)), Spark(tuple(rates))


def queue_roles(settings: Settings) -> dict[str, str]:
    """What each consumed queue carries (the two lanes of sync jobs, intake, webhooks, drift sweeps)."""
    lanes = lanes_of(settings)
    carried = [(lanes.normal, "sync jobs, normal lane"), (lanes.bulk, "sync jobs, bulk lane"),
               (settings.intake_queue, "intake"), (settings.webhook_queue, "webhook deliveries"),
               (settings.effective_drift_queue, "drift sweeps")]  # fmt: skip
    roles: dict[str, list[str]] = {}
    for queue, role in carried:
        roles.setdefault(queue, []).append(role)
    return {queue: "; ".join(each) for queue, each in roles.items()}


@dataclass(frozen=True)
class Overview:
    """One reading: the pipeline's state, the pause switch and the sparklines (None where Redis could not be read)."""

    state: PipelineState
    paused: PauseState | None
    pause_known: bool
    throughput: Spark | None
    failure_rate: Spark | None
    roles: dict[str, str]

    @property
    def down(self) -> list[str]:
        """Each source that could not be read, named for a person: "Redis unreachable (ConnectionError: …)"."""
        return [
            f"{SOURCE_NAMES.get(source, source)} unreachable ({error})" for source, error in self.state.errors.items()
        ]

    @property
    def holding(self) -> int:
        """Worker processes holding for the pause."""
        return sum(1 for worker in self.state.workers or () if worker.paused)


def read_overview(console: ConsoleServices) -> Overview:
    """Read the state once, then the pause switch and the counters unless Redis already failed the reading."""
    state = console.state.read()
    roles = queue_roles(console.state.settings)
    if "redis" not in state.errors:  # a second wait on a Redis that is gone would only slow the page
        try:
            paused = console.pause.state()
            throughput, failure_rate = sparks(console.stats.per_minute(minutes=SPARK_MINUTES, now=state.at))
            return Overview(state, paused, True, throughput, failure_rate, roles)
        except redis.RedisError as exc:
            state.errors["redis"] = f"{type(exc).__name__}: {exc}"
    return Overview(state, None, False, None, None, roles)


@router.get("/overview", name="overview")
def overview_page(request: Request, console: Console, operator: SignedIn) -> Response:
    """The whole page: the pause controls (operators only) and the live region."""
    done = DONE.get(request.query_params.get("done", ""))
    context = {"title": "Overview", "o": read_overview(console), "done": done, "refresh": REFRESH_SECONDS}
    return render(request, "overview.html", context)


@router.get("/overview/live", name="overview_live")
def overview_live(request: Request, console: Console, operator: SignedIn) -> Response:
    """Only the ``#overview`` region, as a fresh reading (what overview.js swaps in)."""
    return render(request, "overview_region.html", {"o": read_overview(console), "refresh": REFRESH_SECONDS})


@router.post("/overview/pause", name="pause")
def pause(
    request: Request, console: Console, operator: Acting, reason: Annotated[str, Form(max_length=500)] = ""
) -> RedirectResponse:
    """Pause processing as this operator, with the reason given (the first pause wins), audited. A reason with a
    control character is refused before the switch moves (the audit row could not hold a NUL)."""
    why = free_text("reason", reason)
    try:
        _state, created = pipeline_pause.pause(console.api.db, console.pause, actor=operator.name, reason=why)
    except redis.RedisError as exc:
        raise HTTPException(503, f"Redis unreachable: processing was not paused ({type(exc).__name__})") from exc
    return redirect(request.url_for("overview"), done="paused" if created else "already-paused")


@router.post("/overview/resume", name="resume")
def resume(request: Request, console: Console, operator: Acting) -> RedirectResponse:
    """Resume processing; the audit row keeps who had paused it and why."""
    try:
        was = pipeline_pause.resume(console.api.db, console.pause, actor=operator.name)
    except redis.RedisError as exc:
        raise HTTPException(503, f"Redis unreachable: processing was not resumed ({type(exc).__name__})") from exc
    return redirect(request.url_for("overview"), done="resumed" if was is not None else "not-paused")
