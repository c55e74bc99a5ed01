"""Structured JSON logs on stdout, with job context attached and secrets scrubbed.

Every line logged while a job runs carries the job's fields (job_id, entity_id, tenant_id,
account_id, idempotency_key, trace_id, attempt) through a context variable, so adapters need not
pass them around. Secrets never reach a log line, a DLQ record or an error message: credentials are
registered when decrypted and masked wherever they appear, and token-shaped strings are masked by
pattern as a second line of defence.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

MASK = "***"

_job_fields: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar("calsync_job", default=None)
_secrets: set[str] = set()
_secrets_lock = threading.Lock()
_secrets_snapshot: tuple[str, ...] = ()

_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\bya29\.[A-Za-z0-9._-]+"),
    re.compile(
        r"(?i)([\"']?(?:access_token|refresh_token|id_token|client_secret|password|private_key|assertion)[\"']?"
        r"\s*[:=]\s*[\"']?)[^\"'&\s,}]+"
    ),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"(?i)(authorization:\s*basic\s+)[A-Za-z0-9+/=]+"),
]


def register_secrets(values: Any) -> None:
    """Remember every string in a credentials structure so it is masked wherever it later appears."""
    global _secrets_snapshot
    found = set(_walk_strings(values))
    if not found - _secrets:
        return
    with _secrets_lock:
        _secrets.update(found)
        # Longest first, so a secret containing another is masked whole.
        _secrets_snapshot = tuple(sorted(_secrets, key=len, reverse=True))


def _walk_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if len(value) >= 6:
            yield value
            for line in value.splitlines():
                if len(line.strip()) >= 16:
                    yield line.strip()
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _walk_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _walk_strings(item)


def redact(text: str) -> str:
    """The text with registered secrets and token-shaped strings masked."""
    for secret in _secrets_snapshot:
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + MASK, text)
    return text


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
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("pika", "urllib3", "googleapiclient.discovery_cache", "exchangelib", "alembic"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
