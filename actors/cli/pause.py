"""``calsync pause`` / ``calsync resume``: stop and restart job processing in every worker, producers untouched.

Only Redis is needed (not the database), so the switch works during a database incident too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

from calsync.actors.cli.shell import CliState, pass_state, print_json, user_at_host
from calsync.core.clients import open_redis, resolve_broker_url, resolve_redis_url
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.pause import PauseSwitch


@contextmanager
def _switch(state: CliState) -> Iterator[PauseSwitch]:
    settings = state.settings
    url = resolve_redis_url(settings, resolve_broker_url(settings))
    with open_redis(url) as client:
        yield PauseSwitch(client, RedisKeys(settings.redis_namespace))


@click.command("pause")
@click.option("--reason", help="Why (shown by `calsync status`).")
@pass_state
def pause(state: CliState, reason: str | None) -> None:
    """Stop handing jobs to workers: running jobs finish, queued ones wait (no attempt used) until `calsync resume`."""
    with _switch(state) as switch:
        current, created = switch.pause(user_at_host(), reason)
    print_json({"paused": True, "already_paused": not created, **current.as_json()})


@click.command("resume")
@pass_state
def resume(state: CliState) -> None:
    """Let workers take jobs again (within about a second)."""
    with _switch(state) as switch:
        previous = switch.resume()
    doc: dict[str, object] = {"paused": False, "was_paused": previous is not None}
    if previous is not None:
        held = round(max(0.0, time.time() - previous.since))
        doc.update(paused_since=previous.as_json()["since"], paused_seconds=held)
    print_json(doc)
