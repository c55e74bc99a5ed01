"""PromQL for the alerts and the dashboard, written once so that a panel shows exactly what an alert tests.

Every selector goes through :meth:`PromQL.sel`, which knows the metric contract: a misspelt metric, label or
label value fails at generation time instead of producing a rule that silently never fires.
"""

from __future__ import annotations

from collections.abc import Mapping

from .contract import FINISHED_OUTCOMES, GOOD_OUTCOMES, TARGET_LABELS, family_of
from .params import Params

Matcher = str | tuple[str, ...]  # a tuple matches any of its values


def indent(text: str, spaces: int = 2) -> str:
    """Indents every line of a sub-expression that is laid out over several lines."""
    return "\n".join(" " * spaces + line for line in text.split("\n"))


class PromQL:
    """Selectors and shared signals for one set of params; ``filters`` adds regex matchers to every selector."""

    def __init__(self, params: Params, *, filters: Mapping[str, str] | None = None) -> None:
        self.params = params
        self.filters = dict(filters or {})
        self._jobs = {"worker": params.worker_job, "exporter": params.exporter_job}

    # --- building blocks -----------------------------------------------------------------------
    def sel(self, series: str, **matchers: Matcher) -> str:
        """``series{job="…",…}``: the scrape job comes from the contract, matchers are checked against it."""
        metric = family_of(series)
        job = self._jobs.get(metric.source)
        if job is not None:
            matchers = {"job": job, **matchers}
        parts = []
        for label, value in matchers.items():
            if label not in metric.labels and label not in TARGET_LABELS:
                raise KeyError(f"{series} has no label {label!r}")
            values = value if isinstance(value, tuple) else (value,)
            allowed = metric.labels.get(label, ())
            if allowed and not set(values) <= set(allowed):
                raise ValueError(f"{series}{{{label}}} takes {allowed}, not {values}")
            parts.append(f'{label}=~"{"|".join(values)}"' if isinstance(value, tuple) else f'{label}="{value}"')
        parts += [f'{label}=~"{pattern}"' for label, pattern in self.filters.items()]
        return f"{series}{{{','.join(parts)}}}"

    def labels(self, *extra: str) -> str:
        """The grouping list: the deployment's scope labels, then ``extra``."""
        return ", ".join((*self.params.scope_labels, *extra))

    def agg(self, op: str, inner: str, *by: str) -> str:
        """``op by (scope…, by…) (inner)``."""
        return f"{op} by ({self.labels(*by)}) ({inner})"

    def sum(self, inner: str, *by: str) -> str:
        """``sum by (scope…, by…) (inner)``."""
        return self.agg("sum", inner, *by)

    def rate(self, series: str, window: str, *by: str, offset: str = "", **matchers: Matcher) -> str:
        """Per-second rate of a counter, summed by scope and ``by``."""
        shift = f" offset {offset}" if offset else ""
        return self.sum(f"rate({self.sel(series, **matchers)}[{window}]{shift})", *by)

    def increase(self, series: str, window: str, *by: str, **matchers: Matcher) -> str:
        """How much a counter grew over ``window``, summed by scope and ``by``."""
        return self.sum(f"increase({self.sel(series, **matchers)}[{window}])", *by)

    def or_zero(self, expr: str, like: str) -> str:
        """``expr``, and 0 where ``like`` has a series ``expr`` lacks (a counter never incremented yet, a gauge
        the broker cannot report)."""
        return f"(\n{indent(expr)}\n  or\n  0 * {like}\n)"

    def ratio(self, part: str, whole: str) -> str:
        """``part / whole`` where a missing ``part`` counts as 0."""
        return f"{self.or_zero(part, whole)}\n/\n{whole}"

    def quantile(self, q: float, histogram: str, window: str, *by: str) -> str:
        """Quantile ``q`` of a histogram over ``window``, per scope and ``by``."""
        buckets = self.sum(f"rate({self.sel(histogram + '_bucket')}[{window}])", *by, "le")
        return f"histogram_quantile({q}, {buckets})"

    # --- signals shared by alerts and panels ------------------------------------------------------
    def success_ratio(self, window: str, *by: str) -> str:
        """Finished attempts that did their job (success, already done, stale) out of all finished attempts."""
        return self.ratio(
            self.rate("calsync_jobs_total", window, *by, outcome=GOOD_OUTCOMES),
            self.rate("calsync_jobs_total", window, *by, outcome=FINISHED_OUTCOMES),
        )

    def retry_share(self, window: str, *by: str, offset: str = "") -> str:
        """Retries scheduled per finished attempt: unlike a plain retry rate, it does not rise with traffic."""
        return self.ratio(
            self.rate("calsync_job_retries_total", window, *by, offset=offset),
            self.rate("calsync_jobs_total", window, *by, offset=offset, outcome=FINISHED_OUTCOMES),
        )

    def finished_jobs(self, window: str, *by: str) -> str:
        """Finished attempts over ``window``: the traffic guard of the success-ratio alert."""
        return self.increase("calsync_jobs_total", window, *by, outcome=FINISHED_OUTCOMES)

    def new_dead_letters(self, window: str, *by: str) -> str:
        """Jobs dead-lettered over ``window``."""
        return self.increase("calsync_dead_letters_total", window, *by)

    def new_versions(self, window: str) -> str:
        """Versions running now that no worker ran in the ``window`` before the last ``window``: a deploy."""
        info = self.sel("calsync_build_info")
        running = self.agg("group", info, "version")
        before = self.agg("group", f"max_over_time({info}[{window}] offset {window})", "version")
        return f"{running}\nunless\n{before}"

    def heartbeat_age(self) -> str:
        """Seconds since each worker process last renewed its heartbeat."""
        return f"time() - {self.sel('calsync_worker_heartbeat_timestamp_seconds')}"

    def queued_messages(self) -> str:
        """Messages that need a worker: ready, delayed (only a worker moves due ones back) and in flight; the
        exporter leaves out delayed and in flight where the broker cannot count them (RabbitMQ)."""
        ready = self.sum(self.sel("calsync_queue_ready_messages"))
        others = [
            self.or_zero(self.sum(self.sel(f"calsync_queue_{kind}_messages")), ready)
            for kind in ("delayed", "inflight")
        ]
        return "\n+\n".join([ready, *others])

    def active_workers(self) -> str:
        """Worker processes whose heartbeat key is alive, as the exporter counts them."""
        return self.sum(self.sel("calsync_workers_active"))
