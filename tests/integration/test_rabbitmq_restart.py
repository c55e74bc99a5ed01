"""A RabbitMQ node killed and restarted under load loses nothing and duplicates nothing (issue 33, item 4).

A private RabbitMQ node (its own ports, data and logs in the test's directory, so the machine's broker and the
tests using it are not touched) carries calsync's queues as quorum queues. Changes are submitted while a worker
syncs them; the node is SIGKILLed mid-way (no clean shutdown: what it had confirmed must be on disk) and started
again on the same data. Submissions during the outage commit and leave their targets pending, as the producer
promises; after the restart the worker reconnects by itself and one reconciler pass re-sends what the outage
held back. Then every change's latest version is at the provider, each created exactly once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from calsync.core.producer.reconcile import reconcile
from tests.conftest import missing
from tests.support import Pipeline, free_port, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.rabbitmq_only,
]

CHANGES = 60


class RabbitNode:
    """One RabbitMQ node of the test's own, started and SIGKILLed at will, its data kept across restarts."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port, self.dist_port = free_port(), free_port()
        self.name = f"cs{self.port}@localhost"
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the node and wait until it accepts AMQP connections."""
        (self.home / "enabled_plugins").write_text("[].\n")
        env = {
            **os.environ,
            "HOME": str(self.home),
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.home / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.home / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.home / "rabbitmq"),
            "RABBITMQ_CONF_ENV_FILE": str(self.home / "rabbitmq-env.conf"),
        }
        (self.home / "rabbitmq.conf").touch()
        (self.home / "rabbitmq-env.conf").touch()
        if os.geteuid() == 0:  # the server's wrapper runs it as the rabbitmq user
            shutil.chown(self.home, "rabbitmq", "rabbitmq")
            for path in self.home.rglob("*"):
                shutil.chown(path, "rabbitmq", "rabbitmq")
        log = (self.home / "server.out").open("ab")
        self.process = subprocess.Popen(["rabbitmq-server"], env=env, stdout=log, stderr=log, start_new_session=True)
        wait_until(self._accepts, timeout=60, what=f"RabbitMQ node {self.name} (log: {self.home / 'server.out'})")

    def kill(self) -> None:
        """SIGKILL the node and every process it started: a crash, not a shutdown (its wrapper switches user
        through ``su``, so they are not all in one process group)."""
        if self.process is None or self.process.poll() is not None:
            return
        started = psutil.Process(self.process.pid)
        for process in [*started.children(recursive=True), started]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        self.process.wait(timeout=30)
        wait_until(lambda: not self._accepts(), timeout=30, what="the killed node's port to close")

    def _accepts(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0


@pytest.fixture
def node() -> Iterator[RabbitNode]:
    # Not under pytest's tmp_path: run as root, the server's wrapper switches to the rabbitmq user, who cannot
    # enter pytest's private directories.
    if shutil.which("rabbitmq-server") is None:
        missing("rabbitmq", "rabbitmq-server (Debian package rabbitmq-server) is not on the PATH")
    home = Path(tempfile.mkdtemp(prefix="calsync-rabbitmq-"))
    started = RabbitNode(home)
    try:
        started.start()
        yield started
    finally:
        started.kill()
        shutil.rmtree(home, ignore_errors=True)


def _created(pipeline: Pipeline) -> Counter[str]:
    return Counter(call.entity_id for call in pipeline.provider.calls() if call.effect == "created")


def test_a_killed_and_restarted_node_loses_no_change_and_duplicates_no_effect(
    node: RabbitNode, settings_factory: Any
) -> None:
    pipeline = Pipeline(settings_factory(broker_url=node.url, rabbitmq_queue_type="quorum"))
    try:
        account = pipeline.account()
        entities = [f"evt-{n}" for n in range(CHANGES)]
        with pipeline.worker():
            for entity in entities[: CHANGES // 2]:
                pipeline.submit([account], entity_id=entity)
            wait_until(lambda: len(_created(pipeline)) >= CHANGES // 4, timeout=60, what="the first syncs")
            node.kill()
            during = [
                pipeline.submit([account], entity_id=entity) for entity in entities[CHANGES // 2 : CHANGES * 3 // 4]
            ]
            assert all(receipt.deferred_accounts == [account] for receipt in during)  # committed, enqueue failed
            restarted = time.monotonic()
            node.start()
            for entity in entities[CHANGES * 3 // 4 :]:
                pipeline.submit([account], entity_id=entity)
            # What the outage held back goes out with the next reconciler pass: the worker's housekeeping runs it;
            # one more here does not wait for the next (the same pass, and harmless twice).
            reconcile(pipeline.clients, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
            for entity in entities:
                pipeline.wait_target(entity, account, "synced", timeout=90)
            print(f"all {CHANGES} synced {time.monotonic() - restarted:.1f} s after the restart began")
        assert _created(pipeline) == Counter(entities)  # each change's event created once, none twice, none lost
    finally:
        pipeline.close()
