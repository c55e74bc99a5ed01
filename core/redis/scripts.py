"""Our Lua scripts: each in a ``.lua`` file beside the module that runs it, run through redis-py's ``Script``.

``Script`` sends EVALSHA and, when Redis forgot the script (a restart, SCRIPT FLUSH), loads it and sends it
again. A command whose connection dropped mid-way (a restart, an idle timeout) is sent once more here, on a
new connection (redis-py has disconnected the old one): whether the first send ran is unknown, so each
script's file says what running it twice does.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import Any

import redis

Arg = str | int | float


class LuaScript:
    """The script ``name`` of package ``package``, registered on ``client``."""

    def __init__(self, client: redis.Redis, package: str, name: str) -> None:
        self._script = client.register_script(resources.files(package).joinpath(name).read_text())

    def __call__(self, keys: Sequence[str], args: Sequence[Arg], client: redis.Redis | None = None) -> Any:
        """The script's answer (a pipeline: queued, answered by its ``execute``); Redis errors are raised."""
        try:
            return self._script(keys=keys, args=args, client=client)
        except redis.ConnectionError:
            return self._script(keys=keys, args=args, client=client)
