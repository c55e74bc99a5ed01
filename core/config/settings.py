"""The one place configuration enters calsync: environment variables prefixed ``CALSYNC_``.

Nothing else in the code base reads ``os.environ``; every process builds a :class:`Settings` with
:func:`load_settings`, which turns any invalid value into a :class:`ConfigurationError` naming the
variable, so a bad deployment fails at start-up instead of at the first job.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from calsync.core.config.coalesce import CoalesceSettings
from calsync.core.config.fairness import FairnessSettings
from calsync.core.config.housekeeping import HousekeepingSettings
from calsync.core.config.redis_url import REDIS_SCHEMES, is_sentinel_url, parse_sentinel_url
from calsync.core.console.settings import ConsoleSettings
from calsync.core.drift.settings import DriftSettings
from calsync.core.model.calendar import SendUpdates
from calsync.core.model.errors import ConfigurationError
from calsync.core.traffic.settings import TrafficSettings
from calsync.core.webhooks.settings import WebhookSettings

ENV_PREFIX = "CALSYNC_"

#: No single delay (a retry, a busy-lock wait) may exceed a day: a typo must not park a job for weeks.
MAX_DELAY_SECONDS = 86400.0


def _url(schemes: frozenset[str], wording: str) -> AfterValidator:
    """A URL setting's check: its scheme one of ``schemes`` (``wording`` lists them), a sentinel URL well-formed."""

    def check(url: str) -> str:
        if urlsplit(url).scheme not in schemes:
            raise ValueError(f"must start with {wording}")
        if is_sentinel_url(url):
            parse_sentinel_url(url)  # its ValueError says what is wrong
        return url

    return AfterValidator(check)


RedisUrl = Annotated[str, _url(REDIS_SCHEMES, "redis://, rediss://, unix:// or redis+sentinel://")]
BrokerUrl = Annotated[
    str, _url(REDIS_SCHEMES | {"amqp", "amqps"}, "redis://, rediss://, unix://, redis+sentinel://, amqp:// or amqps://")
]

BrokerKind = Literal["redis", "rabbitmq"]


def broker_kind(url: str) -> BrokerKind:
    """Which broker a URL names: the one place that tells RabbitMQ (AMQP) from Redis."""
    return "redis" if urlsplit(url).scheme in REDIS_SCHEMES else "rabbitmq"


def _default_data_dir() -> Path:
    # XDG base directory spec; read here because this module is the only one allowed to see the environment.
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "calsync"


class Settings(  # the mixins: one module of fields per area (core/config/)
    CoalesceSettings,
    HousekeepingSettings,
    WebhookSettings,
    FairnessSettings,
    TrafficSettings,
    DriftSettings,
    ConsoleSettings,
    BaseSettings,
):
    """Every knob of calsync, read from ``CALSYNC_*`` variables (and nothing else)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    # --- where things live -------------------------------------------------------------------
    data_dir: Path = Field(default_factory=_default_data_dir)
    broker_url: BrokerUrl | None = None
    redis_url: RedisUrl | None = None
    database_url: str | None = None
    redis_namespace: str = Field(default="calsync", pattern=r"^[A-Za-z0-9_.-]+$")
    queue: str = Field(default="calendar", pattern=r"^[A-Za-z0-9_-]+$")
    secret_key: SecretStr | None = None
    # Newest first: the first key encrypts, every key decrypts (key rotation, docs/RUNBOOK.md).
    secret_keys: Annotated[tuple[SecretStr, ...], NoDecode] = ()
    # The private redis-server of the data dir even though a database is configured (never on a cluster).
    embedded_redis: bool = False

    # --- retry policy ------------------------------------------------------------------------
    retry_schedule: Annotated[tuple[float, ...], NoDecode] = (10, 30, 120, 300, 900)
    retry_jitter: float = Field(default=0.2, ge=0, lt=1)

    # --- timeouts and TTLs (seconds) ---------------------------------------------------------
    provider_timeout: float = Field(default=10, gt=0)
    job_time_limit: float = Field(default=45, gt=0)
    lock_ttl: float = Field(default=60, gt=0)
    lock_retry_delay: float = Field(default=2, gt=0, le=MAX_DELAY_SECONDS)
    lock_max_waits: int = Field(default=30, ge=1)
    # Trust the target lock's handover, so a job reads its state once (docs/notes/locks.md, "One read per job");
    # false while workers of a release before it still run: every worker writes handovers, none trusts them.
    lock_handover: bool = True
    idempotency_ttl: int = Field(default=86400, gt=0)
    dedup_ttl: int = Field(default=300, gt=0)
    # How long a request key (HTTP Idempotency-Key, intake request id) returns the first receipt.
    request_key_ttl: int = Field(default=86400, gt=0)
    reconcile_after: float = Field(default=600, gt=0)

    # --- broker crash recovery: a SIGKILLed worker's messages return within ~heartbeat + a few s
    broker_heartbeat_timeout: float = Field(default=20, gt=0)

    # --- worker process shape ----------------------------------------------------------------
    worker_processes: int = Field(default=1, ge=1)
    worker_threads: int = Field(default=8, ge=1)
    worker_shutdown_timeout: float = Field(default=60, gt=0)

    # --- providers ---------------------------------------------------------------------------
    default_send_updates: SendUpdates = "none"
    google_api_endpoint: str | None = None

    # --- observability (docs/METRICS.md) -------------------------------------------------------
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    metrics_dir: Path | None = None
    metrics_host: str = "0.0.0.0"
    metrics_port: int = Field(default=9191, ge=1, le=65535)
    heartbeat_dir: Path | None = None
    heartbeat_interval: float = Field(default=3, gt=0)
    heartbeat_ttl: float = Field(default=15, gt=0)
    exporter_host: str = "0.0.0.0"
    exporter_port: int = Field(default=9192, ge=1, le=65535)
    # --- graph (issue 13) ---
    graph_api_endpoint: str = "https://graph.microsoft.com/v1.0/"
    graph_ca_file: Path | None = None
    graph_mailbox_concurrency: int = Field(default=4, ge=1)
    graph_slot_wait: ClassVar[float] = 2  # internal: seconds a request waits for a mailbox slot, then the job defers

    # --- protocol: the intake actor's queue (workers consume it next to QUEUE) ---------------
    intake_queue: str = Field(default="intake", pattern=r"^[A-Za-z0-9_-]+$")

    # --- poison-proof consumption ---
    # A delivery larger than this is quarantined unread (its first 64 KiB are kept in the DLQ record).
    max_message_bytes: int = Field(default=1024 * 1024, ge=1024)
    # RabbitMQ only: how calsync declares its queues (core/messaging/rabbitmq_consumer.py).
    rabbitmq_queue_type: Literal["classic", "quorum"] = "classic"

    # --- HTTP intake (calsync serve, docs/PROTOCOL.md) ------------------------------------
    api_host: str = "0.0.0.0"
    api_port: int = Field(default=8080, ge=1, le=65535)
    api_workers: int = Field(default=1, ge=1)
    # Larger request bodies are refused with 413 before they are parsed.
    api_max_body_bytes: int = Field(default=1_048_576, ge=1024)
    # A key that authenticated is trusted this long without a database read: a revoked key is refused at most
    # this many seconds later (0: every request reads the database).
    api_key_cache_seconds: float = Field(default=5, ge=0)

    # --- the test suite's profile (docs/TESTING.md): "test" scales internal timings down; never in production
    profile: Literal["production", "test"] = "production"

    @field_validator("retry_schedule", "secret_keys", "webhook_retry_schedule", mode="before")
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(p.strip() for p in value.split(",") if p.strip())
        return value

    @field_validator("retry_schedule")
    @classmethod
    def _check_schedule(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value:
            raise ValueError("must list at least one delay in seconds, e.g. 10,30,120")
        if any(v <= 0 for v in value):
            raise ValueError("every delay must be a positive number of seconds")
        too_long = [v for v in value if v > MAX_DELAY_SECONDS]
        if too_long:
            raise ValueError(f"every delay must be at most {MAX_DELAY_SECONDS:g} seconds (24 h), got {too_long[0]:.0f}")
        return value

    @field_validator("secret_key", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("secret_key", "secret_keys")
    @classmethod
    def _check_keys(cls, value: Any) -> Any:
        from cryptography.fernet import Fernet  # only when a key is set: not every command loads cryptography

        keys = value if isinstance(value, tuple) else (value,) if value is not None else ()
        for position, key in enumerate(keys, start=1):
            try:
                Fernet(key.get_secret_value())  # its ValueError: not 32 url-safe base64-encoded bytes
            except ValueError:
                where = f"key {position} " if isinstance(value, tuple) else ""
                raise ValueError(
                    f"{where}must be 32 url-safe base64-encoded bytes (`calsync secret-key` makes one)"
                ) from None
        return value

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite", "postgresql")):
            raise ValueError("must be a sqlite:/// or postgresql+psycopg:// URL")
        return value

    @model_validator(mode="after")
    def _check_time_budget(self) -> Settings:
        # The lock must outlive the job and the job must outlive one provider call, or the guards overlap.
        for inner, outer in (("provider_timeout", "job_time_limit"), ("job_time_limit", "lock_ttl")):
            short, long = getattr(self, inner), getattr(self, outer)
            if not short < long:
                raise ValueError(
                    f"CALSYNC_{outer.upper()} must be greater than CALSYNC_{inner.upper()} ({long} <= {short})"
                )
        # A crashed worker's job comes back after the broker heartbeat timeout and then waits for the dead
        # owner's lock at most LOCK_MAX_WAITS deferrals; the lock must be free by then (docs/notes/locks.md).
        wait_budget = self.lock_max_waits * self.lock_retry_delay * (1 - self.retry_jitter)
        if not self.lock_ttl <= self.broker_heartbeat_timeout + wait_budget:
            raise ValueError(
                "CALSYNC_LOCK_TTL must not exceed CALSYNC_BROKER_HEARTBEAT_TIMEOUT + CALSYNC_LOCK_MAX_WAITS x "
                "CALSYNC_LOCK_RETRY_DELAY x (1 - CALSYNC_RETRY_JITTER), or a crashed worker's job gives up "
                f"before its lock expires ({self.lock_ttl} > {self.broker_heartbeat_timeout} + "
                f"{self.lock_max_waits} x {self.lock_retry_delay} x (1 - {self.retry_jitter}) = "
                f"{self.broker_heartbeat_timeout + wait_budget:g})"
            )
        # One late beat (a GC pause, a slow Redis) must not make a live worker look dead.
        if not 2 * self.heartbeat_interval <= self.heartbeat_ttl:
            raise ValueError(
                "CALSYNC_HEARTBEAT_TTL must be at least twice CALSYNC_HEARTBEAT_INTERVAL "
                f"({self.heartbeat_ttl} < 2 x {self.heartbeat_interval})"
            )
        if self.secret_key and self.secret_keys and self.secret_key not in self.secret_keys:
            raise ValueError(
                "CALSYNC_SECRET_KEY is set but not among CALSYNC_SECRET_KEYS: "
                "list it there (after the new key) and unset it"
            )
        return self

    @property
    def uses_embedded_redis(self) -> bool:
        """True when no broker is configured and the embedded one is allowed (embedded SQLite, or asked for)."""
        return self.broker_url is None and (self.database_url is None or self.embedded_redis)

    @property
    def cipher_keys(self) -> tuple[str, ...]:
        """The credential keys, newest first: ``SECRET_KEYS``, else the single ``SECRET_KEY``."""
        keys = self.secret_keys or ((self.secret_key,) if self.secret_key else ())
        return tuple(key.get_secret_value() for key in keys)

    @property
    def effective_database_url(self) -> str:
        """The configured database, or a SQLite file in the data directory."""
        return self.database_url or f"sqlite:///{self.data_dir / 'calsync.sqlite3'}"

    @property
    def effective_memory_provider_path(self) -> Path:
        """Where the memory provider keeps its calendars so every process of a data dir shares them."""
        return self.data_dir / "memory-provider.sqlite3"

    @property
    def broker_maintenance_chance(self) -> float:
        """The chance that a fetch runs the broker's crash recovery (the test profile recovers sooner)."""
        return 0.5 if self.profile == "test" else 0.1

    @property
    def webhook_directory_ttl(self) -> float:
        """How long a worker caches which tenants have endpoints for which event types (a new endpoint gets
        notifications within it); the test profile reads them for every job."""
        return 0 if self.profile == "test" else 5

    @property
    def effective_metrics_dir(self) -> Path:
        """Where worker processes write their Prometheus multiprocess files (emptied at worker start)."""
        return self.metrics_dir or self.data_dir / "prometheus"

    @property
    def effective_heartbeat_dir(self) -> Path:
        """Where each worker process touches its heartbeat file (checked by the liveness probe)."""
        return self.heartbeat_dir or self.data_dir / "heartbeats"

    def as_environment(self) -> dict[str, str]:
        """The settings as ``CALSYNC_*`` variables, to hand the exact same configuration to a child process."""
        values = self.model_dump().items()
        return {ENV_PREFIX + name.upper(): _variable(value) for name, value in values if value not in (None, ())}


def _variable(value: Any) -> str:
    """A setting's value as its variable holds it: a secret's value; the items of a list (retry delays, networks) or of
    the per-provider values (core/traffic/settings.py) comma-separated."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, tuple):
        return ",".join(map(_variable, value))
    if isinstance(value, dict):
        return ",".join(f"{key}={item}" for key, item in value.items())
    return str(value)


def setting_names() -> list[str]:
    """Every ``CALSYNC_*`` variable calsync reads."""
    return sorted(ENV_PREFIX + name.upper() for name in Settings.model_fields)


def check_unknown_variables() -> None:
    """Refuse ``CALSYNC_*`` variables that are no setting: a misspelt one would otherwise be ignored."""
    known = set(setting_names())
    unknown = sorted(n for n in os.environ if n.upper().startswith(ENV_PREFIX) and n.upper() not in known)
    if not unknown:
        return
    problems = []
    for name in unknown:
        close = difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.6)
        problems.append(f"{name} (did you mean {close[0]}?)" if close else name)
    raise ConfigurationError("unknown variable " + ", ".join(problems) + "; see the settings table in README.md")


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment (plus overrides), naming the variable behind any bad value."""
    check_unknown_variables()
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigurationError("invalid configuration: " + "; ".join(map(_problem, exc.errors()))) from None


_WORDING = {
    "float_parsing": "must be a number, got {input!r}",
    "float_type": "must be a number, got {input!r}",
    "int_parsing": "must be a whole number, got {input!r}",
    "int_type": "must be a whole number, got {input!r}",
    "int_from_float": "must be a whole number, got {input!r}",
    "bool_parsing": "must be 1 or 0 (true or false), got {input!r}",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "literal_error": "must be one of {expected}",
    "string_pattern_mismatch": "may only contain letters, digits and {allowed}",
}


def _problem(err: Any) -> str:
    """One validation error in our words: the variable, then what is wrong (no pydantic phrasing)."""
    ctx = dict(err.get("ctx") or {})
    if err["type"] == "value_error" and "error" in ctx:
        message = str(ctx["error"])
    elif err["type"] in _WORDING:
        allowed = "._-" if "." in str(ctx.get("pattern", "")) else "_-"
        message = _WORDING[err["type"]].format(input=err.get("input"), allowed=allowed, **ctx)
    else:
        message = err["msg"].lower()
    field = str(err["loc"][0]) if err["loc"] else ""
    return f"{ENV_PREFIX}{field.upper()}: {message}" if field else message


def child_environment(settings: Settings) -> dict[str, str]:
    """A copy of this process's environment with the settings pinned, for worker/emulator subprocesses."""
    return {**os.environ, **settings.as_environment()}


def worker_environment(settings: Settings) -> dict[str, str]:
    """The variables Dramatiq and prometheus_client read at import time, for the worker's environment.

    They must be in the environment before the worker imports anything: prometheus_client picks
    in-memory or multiprocess values at its first import (docs/notes/dramatiq.md §metrics), and Dramatiq
    its consumers' poll, so how late a due coalesced edit, retry or lock wait is released.
    """
    directory = str(settings.effective_metrics_dir)
    return {
        "PROMETHEUS_MULTIPROC_DIR": directory,
        "prometheus_multiproc_dir": directory,  # the legacy name, overridden in case it is inherited
        "dramatiq_prom_db": directory,
        "dramatiq_prom_host": settings.metrics_host,
        "dramatiq_prom_port": str(settings.metrics_port),
        "dramatiq_worker_timeout": str(round(settings.worker_poll_interval * 1000)),  # milliseconds
    }
