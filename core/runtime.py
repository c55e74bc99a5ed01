"""Everything one calsync process talks to, built once from settings and handed to whoever needs it.

Producers, workers, the reconciler and the CLI all start from :meth:`Runtime.create`, so the URL
resolution (embedded Redis only with the embedded SQLite default or when asked for), the schema
check and client construction happen in one place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import cached_property

import dramatiq
import redis

from calsync.core.config.settings import Settings, broker_kind, load_settings
from calsync.core.messaging.broker import connect_broker
from calsync.core.model.errors import ConfigurationError
from calsync.core.model.vocabulary import Role
from calsync.core.redis.embedded import EmbeddedRedis
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.locks import LockManager
from calsync.core.redis.stats import JobStats
from calsync.core.store import migrate
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database

MiddlewareFactory = Callable[["Runtime"], Sequence[dramatiq.Middleware]]


def resolve_broker_url(settings: Settings, *, start_embedded: bool = True) -> str:
    """The configured broker, or this data dir's embedded Redis when that is allowed (fail closed otherwise).

    With ``start_embedded`` false (read-only commands) a stopped embedded Redis is not started: the
    URL then names a socket that does not exist, so reads fail as "Redis unavailable" and no daemon
    is left behind.
    """
    if settings.broker_url:
        return settings.broker_url
    if not settings.uses_embedded_redis:
        raise ConfigurationError(
            "CALSYNC_BROKER_URL is not set: a configured database needs a shared broker "
            "(set CALSYNC_EMBEDDED_REDIS=1 only for a single-machine set-up)"
        )
    embedded = EmbeddedRedis(settings.data_dir)
    if start_embedded:
        return embedded.ensure()
    return embedded.running_url() or embedded.stopped_url()


def resolve_redis_url(settings: Settings, broker_url: str) -> str:
    """Redis for locks, dedup and stats: its own setting, else the broker when that is Redis."""
    if settings.redis_url:
        return settings.redis_url
    if broker_kind(broker_url) == "redis":
        return broker_url
    raise ConfigurationError("CALSYNC_REDIS_URL is required when CALSYNC_BROKER_URL is not a Redis URL")


class Runtime:
    """Clients and services of one process; cheap parts are eager, the broker is built on first use."""

    def __init__(
        self,
        settings: Settings,
        *,
        role: Role = "cli",
        middleware: MiddlewareFactory | None = None,
        check_schema: bool = True,
        start_embedded: bool = True,
    ) -> None:
        self.settings = settings
        self.role = role
        self.broker_url = resolve_broker_url(settings, start_embedded=start_embedded)
        self.redis_url = resolve_redis_url(settings, self.broker_url)
        # A worker thread runs its per-job statements on a connection of its own (core/store/direct.py); the
        # pool serves the rest (retry and DLQ bookkeeping, lookups), which few threads need at once.
        pool_size = max(2, settings.worker_threads // 2) if role == "worker" else 5
        self.db = Database(settings.effective_database_url, pool_size=pool_size, pre_ping=role != "worker")
        if check_schema:
            if settings.database_url is None:
                migrate.migrate_to(self.db)  # the embedded SQLite default needs no manual step
            else:
                migrate.require_current(self.db)
        self.redis = redis.Redis.from_url(self.redis_url, health_check_interval=30)
        self.keys = RedisKeys(settings.redis_namespace)
        self.cipher = CredentialCipher(settings.cipher_keys)
        self.stats = JobStats(self.redis, self.keys, flush_every=1.0 if role == "worker" else None)
        self._middleware = middleware
        self._broker_lock = threading.Lock()
        self._broker: dramatiq.Broker | None = None

    @classmethod
    def create(cls, settings: Settings | None = None, **kwargs: object) -> Runtime:
        """A runtime from the environment's settings (or the given ones)."""
        return cls(settings or load_settings(), **kwargs)  # type: ignore[arg-type]

    @cached_property
    def locks(self) -> LockManager:
        """Per-target locks (workers only use them)."""
        return LockManager(self.redis, ttl_seconds=self.settings.lock_ttl)

    @property
    def broker(self) -> dramatiq.Broker:
        """The Dramatiq broker, built on first use: with the middleware the process was given (none for producers)."""
        if self._broker is None:
            with self._broker_lock:
                if self._broker is None:
                    stack = self._middleware(self) if self._middleware else ()
                    self._broker = connect_broker(self.broker_url, self.settings, stack)
        return self._broker

    def close(self) -> None:
        """Release connections and threads (tests, CLI exit)."""
        if self._broker is not None:
            self._broker.close()
        if "locks" in self.__dict__:
            self.locks.close()
        self.stats.close()
        self.redis.close()
        self.db.dispose()


_default: Runtime | None = None
_default_lock = threading.Lock()


def default_runtime() -> Runtime:
    """The process-wide producer runtime used by library calls that are not handed one."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Runtime(load_settings(), role="producer")
    return _default
