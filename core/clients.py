"""The clients a process shares, and the steps every composition root starts with.

Every composition root (``calsync serve``, a CLI command, the Python API, and ``build_worker`` in
actors/worker.py, which then adds its middleware to the broker) starts with :func:`connect`, which calls
these in order: the broker's address (which may start the embedded Redis), the database (whose schema is
checked or, on the embedded default, migrated), Redis. Each is a function, so the I/O is where a reader
sees it; :class:`Clients` is the frozen result.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import dramatiq
import redis

from calsync.core.config.redis_url import redis_client
from calsync.core.config.settings import Settings, broker_kind, load_settings
from calsync.core.messaging.broker import connect_broker
from calsync.core.model.errors import ConfigurationError
from calsync.core.redis.embedded import EmbeddedRedis
from calsync.core.redis.keys import RedisKeys
from calsync.core.store import migrate
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database


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


def open_database(settings: Settings, *, pool_size: int = 5, pre_ping: bool = True) -> Database:
    """The database with its schema at the head: migrated on the embedded SQLite default, else checked.

    The embedded default needs no manual step; a configured database is migrated by the operator
    (``calsync migrate``), and a process refuses to run on a schema that is not current.
    """
    db = Database(settings.effective_database_url, pool_size=pool_size, pre_ping=pre_ping)
    try:
        if settings.database_url is None:
            migrate.migrate_to(db)
        else:
            migrate.require_current(db)
    except BaseException:
        db.dispose()
        raise
    return db


def open_redis(url: str) -> redis.Redis:
    """A client of the Redis at ``url``; idle connections are checked before reuse every 30 s."""
    return redis_client(url, health_check_interval=30)


@dataclass(frozen=True)
class Clients:
    """What a producer-side process talks to: the database, Redis (and its key names), the credentials' cipher,
    the broker (without a worker's middleware). The process that built it closes it."""

    settings: Settings
    broker_url: str
    redis_url: str
    db: Database
    redis: redis.Redis
    keys: RedisKeys
    cipher: CredentialCipher
    broker: dramatiq.Broker

    def close(self) -> None:
        """Release connections (tests, CLI exit, ``serve`` shutdown)."""
        self.broker.close()
        self.redis.close()
        self.db.dispose()


def connect(settings: Settings, *, start_embedded: bool = True, pool_size: int = 5, pre_ping: bool = True) -> Clients:
    """The composition root of ``calsync serve``, a CLI command and the Python API, top to bottom, and the start of a
    worker's (which adds its middleware to the broker); ``pool_size`` and ``pre_ping``: :func:`open_database`'s."""
    broker_url = resolve_broker_url(settings, start_embedded=start_embedded)
    redis_url = resolve_redis_url(settings, broker_url)
    db = open_database(settings, pool_size=pool_size, pre_ping=pre_ping)
    client = open_redis(redis_url)
    keys = RedisKeys(settings.redis_namespace)
    cipher = CredentialCipher(settings.cipher_keys)
    broker = connect_broker(broker_url, settings, ())
    return Clients(settings, broker_url, redis_url, db, client, keys, cipher, broker)


_default: Clients | None = None
_default_lock = threading.Lock()


def default_clients() -> Clients:
    """The clients ``calsync.submit_change`` uses when it is not handed any: built from the environment once."""
    global _default
    with _default_lock:
        if _default is None:
            _default = connect(load_settings())
        return _default
