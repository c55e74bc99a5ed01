"""A run's own place in a shared Redis and a shared PostgreSQL, removed when the run ends.

A benchmark or a chaos run may be pointed at servers it does not own (a staging deployment's): everything
it writes then lives under a key namespace of its own (:func:`namespace`, deleted by :func:`remove_keys`), in
queues of its own name (on RabbitMQ, deleted by :func:`remove_queues`) and in a schema of its own
(:func:`private_schema`, dropped afterwards), so it never touches anyone else's data.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pika
import psycopg
from sqlalchemy.engine import make_url

from calsync.core.config.redis_url import redis_client


def namespace(label: str) -> str:
    """A fresh key namespace: ``label`` and eight random hex digits."""
    return f"{label}-{uuid.uuid4().hex[:8]}"


def remove_keys(url: str, prefix: str) -> int:
    """Delete every key under ``prefix:`` (a run's namespace) and return how many there were."""
    client = redis_client(url)  # any URL form calsync takes, redis+sentinel:// included
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
        return len(keys)
    finally:
        client.close()


def rabbitmq_queues(*queues: str) -> list[str]:
    """Every RabbitMQ queue calsync declares for ``queues``: each, its bulk and drift lanes, and Dramatiq's delay
    (``.DQ``) and dead-letter (``.XQ``) queues of all three."""
    lanes = [lane for queue in queues for lane in (queue, f"{queue}-bulk", f"{queue}-drift")]
    return [f"{lane}{suffix}" for lane in lanes for suffix in ("", ".DQ", ".XQ")]


def remove_queues(url: str, names: list[str]) -> None:
    """Delete the RabbitMQ queues ``names`` (a run's own) at the broker of ``url``; one that does not exist is fine."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        for name in names:
            channel.queue_delete(name)
    finally:
        connection.close()


def libpq_url(url: str) -> str:
    """A PostgreSQL URL in libpq's own form (``postgresql://``), from it or from SQLAlchemy's (``+psycopg``)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def schema_of(url: str) -> str | None:
    """The schema a :func:`private_schema` URL searches (None for any other URL)."""
    options = make_url(url).query.get("options")
    text = options if isinstance(options, str) else ""
    return text.removeprefix("-csearch_path=") if text.startswith("-csearch_path=") else None


@contextlib.contextmanager
def private_schema(url: str, prefix: str, *, application_name: str | None = None) -> Iterator[str]:
    """calsync's database URL for a fresh schema ``<prefix>_<hex>`` of the PostgreSQL at ``url``, dropped with
    everything in it afterwards; ``application_name`` names its connections in ``pg_stat_activity``."""
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = libpq_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    query = {"options": f"-csearch_path={schema}"}
    if application_name is not None:
        query["application_name"] = application_name
    private = make_url(url).set(drivername="postgresql+psycopg").update_query_dict(query)
    try:
        yield private.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
