"""The embedded default broker is a real, persistent redis-server shared by a data dir's processes, always
at the same address."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import redis

from calsync.core.redis.embedded import EmbeddedRedis, home_port


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
        # Restarted at the same address: a client made before the stop finds it, and the append-only file
        # brings the queue back.
        assert embedded.ensure() == url
        assert client.lrange("calsync:calendar", 0, -1) == [b"job-1"]
    finally:
        embedded.stop()


def test_without_its_record_a_data_dir_gets_the_same_port_again(tmp_path: Path) -> None:
    embedded = EmbeddedRedis(tmp_path)
    try:
        url = embedded.ensure()
        embedded.stop()
        embedded.record.unlink()
        assert embedded.ensure() == url == f"redis://127.0.0.1:{home_port(tmp_path / 'redis')}/0"
    finally:
        embedded.stop()


def test_a_server_of_another_data_dir_on_the_recorded_port_is_never_taken_for_ours(tmp_path: Path) -> None:
    ours, theirs = EmbeddedRedis(tmp_path / "ours"), EmbeddedRedis(tmp_path / "theirs")
    try:
        foreign = theirs.ensure()
        ours.directory.mkdir(parents=True)
        ours.record.write_text(json.dumps({"url": foreign}))  # e.g. ours stopped and theirs took the port
        assert ours.running_url() is None
        url = ours.ensure()
        assert url != foreign
        assert redis.Redis.from_url(url).config_get("dir")["dir"] == str((tmp_path / "ours" / "redis").resolve())
        assert ours.stop() and theirs.running_url() == foreign  # stopping ours leaves theirs alone
    finally:
        ours.stop()
        theirs.stop()


def test_a_data_dir_whose_port_another_program_holds_moves_to_the_next_free_one(tmp_path: Path) -> None:
    embedded = EmbeddedRedis(tmp_path)
    home = home_port(tmp_path / "redis")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", home))
        holder.listen()
        try:
            port = urlsplit(embedded.ensure()).port
            # One of the ports after it in the range (20000-31999, wrapping round): the next free one.
            assert port is not None and 20000 <= port < 32000 and 0 < (port - home) % 12000 < 10
        finally:
            embedded.stop()
