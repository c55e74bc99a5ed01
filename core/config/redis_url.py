"""The Redis URLs calsync accepts, read in this one place, and the one function that makes a client of one.

Two forms:

- redis-py's own, ``redis://``, ``rediss://`` (TLS) and ``unix://``: one server at a fixed address.
- ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db][?sentinel_password=...]``
  (``rediss+sentinel://``: TLS to the sentinels and the servers): the master Redis Sentinel names for
  ``service``. Sentinels default to port 26379 and ``db`` to 0; the user and password are the servers',
  ``sentinel_username`` / ``sentinel_password`` the sentinels' own (``requirepass`` in sentinel.conf).

A sentinel URL's client is redis-py's ``Sentinel.master_for``: its pool asks a sentinel for the master's
address each time it opens a connection and drops a connection that finds a demoted master, so after a
failover every client of the process (broker, locks, traffic, markers, stats, heartbeats) reconnects to the
promoted replica by itself. Redis Cluster is not accepted: Dramatiq's broker script touches keys it does
not declare (docs/DEPLOY.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.sentinel import Sentinel

SENTINEL_SCHEMES: Final = frozenset({"redis+sentinel", "rediss+sentinel"})
REDIS_SCHEMES: Final = frozenset({"redis", "rediss", "unix"}) | SENTINEL_SCHEMES
SENTINEL_PORT: Final = 26379
#: A sentinel that does not answer within this many seconds is skipped for the next one.
SENTINEL_TIMEOUT: Final = 2.0
SENTINEL_FORM: Final = "redis+sentinel://[password@]host:26379[,host2:26379...]/service[/db]"
_SENTINEL_OPTIONS: Final = ("sentinel_username", "sentinel_password")
_MEMBER = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<host>[^\s:\[\]@/,]+))(?::(?P<port>\d{1,5}))?")
_PATH = re.compile(r"/(?P<service>[A-Za-z0-9._-]+)(?:/(?P<db>\d{1,5}))?/?")


@dataclass(frozen=True)
class SentinelUrl:
    """What a ``redis+sentinel://`` URL says: where the sentinels are, which master, and the credentials."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    tls: bool = False


def is_sentinel_url(url: str) -> bool:
    """Whether ``url`` names a master through Redis Sentinel."""
    return urlsplit(url).scheme in SENTINEL_SCHEMES


def parse_sentinel_url(url: str) -> SentinelUrl:
    """The parts of a sentinel URL; ValueError saying what is wrong (never echoing the URL: it may hold a password)."""
    parts = urlsplit(url)
    userinfo, _, members = parts.netloc.rpartition("@")
    sentinels = tuple(_member(m) for m in members.split(","))
    path = _PATH.fullmatch(parts.path)
    if path is None:
        raise ValueError(f"must name the master after the sentinels, as in {SENTINEL_FORM}")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(_SENTINEL_OPTIONS))
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r} (a sentinel URL takes only {' and '.join(_SENTINEL_OPTIONS)})")
    username, has_password, password = userinfo.partition(":")
    options = {name: values[-1] or None for name, values in query.items()}  # parse_qs decoded them
    return SentinelUrl(
        sentinels,
        path["service"],
        int(path["db"] or 0),
        unquote(username) or None,
        unquote(password) if has_password else None,
        options.get("sentinel_username"),
        options.get("sentinel_password"),
        tls=parts.scheme == "rediss+sentinel",
    )


def _member(text: str) -> tuple[str, int]:
    found = _MEMBER.fullmatch(text)
    port = int(found["port"] or SENTINEL_PORT) if found else 0
    if found is None or not 0 < port < 65536:
        raise ValueError(f"each sentinel must be host or host:port (port 1-65535), as in {SENTINEL_FORM}")
    return found["ipv6"] or found["host"], port


def redis_address(url: str) -> str:
    """Where a Redis URL points, without its credentials: ``host:port``, the socket's path, or the sentinel master."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    if parts.scheme in SENTINEL_SCHEMES:
        where = parse_sentinel_url(url)
        return f"{where.service} via sentinel " + ",".join(f"{host}:{port}" for host, port in where.sentinels)
    return f"{parts.hostname}:{parts.port or 6379}"


def redis_client(url: str, **options: Any) -> redis.Redis:
    """A client of the Redis ``url`` names; ``options`` are redis-py's connection options (timeouts, health checks)."""
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **options)
    where = parse_sentinel_url(url)
    tls = {"ssl": True} if where.tls else {}
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(where.sentinels),
        sentinel_kwargs={
            "username": where.sentinel_username,
            "password": where.sentinel_password,
            "socket_timeout": SENTINEL_TIMEOUT,
            "socket_connect_timeout": SENTINEL_TIMEOUT,
            **tls,
        },
    )
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        where.service, db=where.db, username=where.username, password=where.password, **tls, **options
    )
    return client
