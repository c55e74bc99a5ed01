"""The embedded default broker is a real, persistent redis-server shared by a data dir's processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import redis

from calsync.core.redis.embedded import EmbeddedRedis


def test_one_server_per_data_dir_reused_by_every_process_and_persistent(tmp_path: Path) -> None:
    embedded = EmbeddedRedis(tmp_path)
    try:
        url = embedded.ensure()
        assert url.startswith("redis://127.0.0.1:")
        assert json.loads((tmp_path / "redis" / "server.json").read_text())["url"] == url
        client = redis.Redis.from_url(url)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        client.rpush("calsync:calendar", "job-1")

        # Another process of the same data dir finds the same server instead of starting one.
        code = (
            "import pathlib; from calsync.core.redis.embedded import EmbeddedRedis; "
            f"print(EmbeddedRedis(pathlib.Path({str(tmp_path)!r})).ensure())"
        )
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert other.stdout.strip() == url

        assert embedded.stop() is True
        assert embedded.running_url() is None and not embedded.stop()
        # Restarted (on a new port), the append-only file brings the queue back.
        restarted = redis.Redis.from_url(embedded.ensure())
        assert restarted.lrange("calsync:calendar", 0, -1) == [b"job-1"]
    finally:
        embedded.stop()


def test_a_stale_record_is_replaced(tmp_path: Path) -> None:
    embedded = EmbeddedRedis(tmp_path)
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "server.json").write_text(json.dumps({"url": "redis://127.0.0.1:1/0"}))
    try:
        assert embedded.ensure() != "redis://127.0.0.1:1/0"
    finally:
        embedded.stop()
