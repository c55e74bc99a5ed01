"""A worker's Redis outage is said once per server and outage, and said to be over once (no services)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from calsync.core.messaging.outage import MAX_WAIT, RedisOutage, back_off, redis_address
from calsync.core.redis.periodic import start_repeating
from tests.support import wait_until

OUTAGE_LOGGER = "calsync.core.messaging.outage"


def _messages(caplog: pytest.LogCaptureFixture, logger: str) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == logger]


def test_an_outage_is_said_once_per_server_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, OUTAGE_LOGGER)
    outage = RedisOutage()
    heartbeat, other = outage.of("redis://:secret@127.0.0.1:29203/0"), outage.of("redis://10.0.0.7:6380/0")
    heartbeat.answered()  # nothing was lost: nothing to say
    for _ in range(50):  # every consumer thread and round of the heartbeat
        outage.lost("127.0.0.1:29203", ConnectionError("Error 111 connecting to 127.0.0.1:29203"))
        heartbeat.lost(ConnectionError("refused"))
    other.lost(ConnectionError("refused"))
    heartbeat.answered()
    heartbeat.answered()

    said = _messages(caplog, OUTAGE_LOGGER)
    assert [level for level, _ in said] == [logging.WARNING, logging.WARNING, logging.INFO]
    assert "calsync stop" in said[0][1] and "same address" in said[0][1]
    fields = [getattr(r, "fields", {}) for r in caplog.records if r.name == OUTAGE_LOGGER]
    assert [f["redis"] for f in fields] == ["127.0.0.1:29203", "10.0.0.7:6380", "127.0.0.1:29203"]
    assert "secret" not in caplog.text
    other.lost(ConnectionError("still refused"))  # still the same outage: nothing more to say
    assert len(_messages(caplog, OUTAGE_LOGGER)) == 3


def test_the_wait_backs_off_to_a_ceiling_and_ends_at_shutdown() -> None:
    assert [back_off(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, MAX_WAIT, MAX_WAIT]
    assert back_off(10_000) == MAX_WAIT
    outage = RedisOutage()
    broker: Any = None
    outage.before_worker_shutdown(broker, broker)
    assert outage.wait(10) is False  # at once: the consumer thread can stop
    outage.after_worker_boot(broker, broker)
    assert redis_address("unix:///var/run/redis.sock") == "/var/run/redis.sock"
    assert redis_address("redis://localhost") == "localhost:6379"


def test_a_repeating_thread_logs_the_first_failure_of_a_run_and_its_end(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("tests.periodic")
    caplog.set_level(logging.INFO, "tests.periodic")
    rounds: list[int] = []

    def action() -> None:
        rounds.append(1)
        if 2 <= len(rounds) <= 30:
            raise ConnectionError("Redis down")

    stop = threading.Event()
    thread = start_repeating("calsync-test", stop, 0.001, action, log=log, failure="could not do it")
    try:
        wait_until(lambda: len(rounds) > 32, what="the thread to run past the failures")
    finally:
        stop.set()
        thread.join(timeout=5)
    said = _messages(caplog, "tests.periodic")
    assert said == [(logging.WARNING, "could not do it"), (logging.INFO, "calsync-test: works again")]
    assert [getattr(r, "fields", {}) for r in caplog.records][-1] == {"failed_rounds": 29}
