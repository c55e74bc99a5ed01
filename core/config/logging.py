"""Structured JSON logs on stdout, with job context attached and secrets scrubbed.

Every line logged while a job runs carries the job's fields (job_id, entity_id, tenant_id,
account_id, idempotency_key, trace_id, attempt) through a context variable, so adapters need not
pass them around. Secrets never reach a log line: every message goes through
:func:`calsync.core.model.redaction.redact`.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from calsync.core.model.redaction import redact

__all__ = ["JsonFormatter", "bind_job", "configure_logging", "job_context"]

_job_fields: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar("calsync_job", default=None)


@contextmanager
def job_context(fields: Mapping[str, Any]) -> Iterator[None]:
    """Attach job fields to every log line emitted inside the block."""
    token = _job_fields.set(fields)
    try:
        yield
    finally:
        _job_fields.reset(token)


def bind_job(fields: Mapping[str, Any] | None) -> None:
    """Attach (or with None, detach) job fields for the rest of this thread's current job."""
    _job_fields.set(fields)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, job fields and extra ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        job = _job_fields.get()
        if job:
            entry.update(job)
        extra = getattr(record, "fields", None)
        if isinstance(extra, Mapping):
            entry.update(extra)
        if record.exc_info:
            entry["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO", stream: Any = None) -> None:
    """Send every logger's records to stdout as JSON (idempotent; replaces other root handlers)."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # httpx writes an INFO line per request (the Graph adapter's and msal's): a second line per job, relayed
    # again by Dramatiq's parent process (docs/notes/performance.md, "The adapters' client libraries").
    for noisy in ("pika", "urllib3", "googleapiclient.discovery_cache", "exchangelib", "alembic", "httpx"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
