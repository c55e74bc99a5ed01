"""The coalesce window: a burst's first edit is enqueued at once, the later ones a window later, per target."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from calsync.core.messaging.messages import intake_message
from calsync.core.model.intake import IntakeMessage
from calsync.core.producer.dedup import Claim, Claimed, Mark, RedisMarkers
from calsync.core.redis.keys import RedisKeys
from tests.spies import EnqueueSpy, Sent
from tests.support import Pipeline, change, wait_until

LONG = 30.0  # a window no test outlives: every edit after the first finds its target coalescing


@pytest.fixture
def coalescing(settings_factory: Any) -> Iterator[Any]:
    """Builds a pipeline with the given coalescing settings."""
    built: list[Pipeline] = []

    def build(window: float, max_wait: float = 60.0) -> Pipeline:
        built.append(Pipeline(settings_factory(coalesce_window=window, coalesce_max_wait=max_wait)))
        return built[-1]

    yield build
    for pipeline in built:
        pipeline.close()


def _coalesce_key(pipeline: Pipeline, entity: str, account: str) -> str:
    return pipeline.clients.keys.coalesce("tenant-1", entity, account)


def _created(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> tuple[EnqueueSpy, str, str]:
    """A spy on the broker, then an event created in one account: (spy, entity, account)."""
    account = pipeline.account()
    spy = EnqueueSpy(pipeline.broker, monkeypatch)
    return spy, pipeline.submit([account], title="v1").entity_id, account


def test_the_first_edit_goes_out_at_once_and_the_next_ones_a_window_later(
    coalescing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = coalescing(LONG)
    spy, entity, account = _created(pipeline, monkeypatch)
    for n in range(2, 5):
        pipeline.submit(None, entity_id=entity, title=f"v{n}")
    assert [(s.payload.target_version, s.delay) for s in spy.sent] == [(1, None), (2, 30_000), (3, 30_000),
                                                                       (4, 30_000)]  # fmt: skip
    assert 0 < pipeline.clients.redis.pttl(_coalesce_key(pipeline, entity, account)) <= 30_000


def test_a_window_of_zero_enqueues_every_edit_at_once_and_writes_no_coalesce_key(
    coalescing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = coalescing(0)
    spy, entity, account = _created(pipeline, monkeypatch)
    pipeline.submit(None, entity_id=entity, title="v2")
    assert [s.delay for s in spy.sent] == [None, None]
    assert pipeline.clients.redis.exists(_coalesce_key(pipeline, entity, account)) == 0


def test_once_the_coalesce_key_expires_the_next_edit_goes_out_at_once(
    coalescing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = coalescing(0.2)
    spy, entity, account = _created(pipeline, monkeypatch)
    key = _coalesce_key(pipeline, entity, account)
    wait_until(lambda: pipeline.clients.redis.exists(key) == 0, what="the coalesce marker to expire")
    pipeline.submit(None, entity_id=entity, title="v2")
    assert [s.delay for s in spy.sent] == [None, None]


def test_every_edit_refreshes_the_window(coalescing: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = coalescing(LONG)
    _spy, entity, account = _created(pipeline, monkeypatch)
    key = _coalesce_key(pipeline, entity, account)
    opened = pipeline.clients.redis.get(key)
    pipeline.clients.redis.pexpire(key, 5_000)  # as if most of the window had passed
    pipeline.submit(None, entity_id=entity, title="v2")
    assert pipeline.clients.redis.pttl(key) > 5_000 and pipeline.clients.redis.get(key) == opened


def test_a_target_held_for_the_longest_wait_goes_out_at_once_and_opens_a_new_window(
    coalescing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = coalescing(LONG, max_wait=LONG)
    rt = pipeline.clients
    spy, entity, account = _created(pipeline, monkeypatch)
    key = _coalesce_key(pipeline, entity, account)
    seconds, micros = rt.redis.time()
    long_ago = seconds * 1000 + micros // 1000 - 30_001  # the window opened just over COALESCE_MAX_WAIT ago
    rt.redis.set(key, long_ago, px=10_000)
    pipeline.submit(None, entity_id=entity, title="v2")  # held long enough: at once
    pipeline.submit(None, entity_id=entity, title="v3")  # the new window holds this one
    assert [s.delay for s in spy.sent] == [None, None, 30_000]
    assert int(rt.redis.get(key) or 0) > long_ago


def test_each_target_coalesces_on_its_own(coalescing: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = coalescing(LONG)
    a, b, c = (pipeline.account(account_id=f"acc-{n}") for n in "abc")
    spy = EnqueueSpy(pipeline.broker, monkeypatch)
    entity = pipeline.submit([a, b], title="v1").entity_id
    pipeline.submit([a, b, c], entity_id=entity, title="v2")  # c is new to the event: its first edit
    other = pipeline.submit([a], title="another event").entity_id  # another event of the same account
    delays = {(s.payload.entity_id, s.payload.account_id, s.payload.target_version): s.delay for s in spy.sent}
    assert delays == {
        (entity, a, 1): None, (entity, b, 1): None,
        (entity, a, 2): 30_000, (entity, b, 2): 30_000, (entity, c, 2): None,
        (other, a, 1): None,
    }  # fmt: skip


def test_an_identical_resubmit_returns_the_first_jobs_and_enqueues_nothing(
    coalescing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = coalescing(LONG)
    spy, entity, account = _created(pipeline, monkeypatch)
    again = pipeline.submit([account], entity_id=entity, title="v1")
    assert again.job_ids == [spy.sent[0].payload.job_id] and len(spy.sent) == 1


def test_without_redis_every_job_goes_out_at_once() -> None:
    client = redis.Redis(port=1, socket_connect_timeout=0.2)  # nothing listens on port 1
    markers = RedisMarkers(client, RedisKeys("cst-down"), ttl_seconds=60, window_ms=1000, max_wait_ms=10_000)
    claims = [Claim(Mark("t", "e", "a", "update", 2), "job-1"), Claim(Mark("t", "e", "b", "update", 2), "job-2")]
    assert markers.claim_all(claims) == [Claimed(None), Claimed(None)]


def test_changes_sent_to_the_intake_actor_coalesce_like_any_other(
    coalescing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = coalescing(LONG)
    account = pipeline.account()
    spy = EnqueueSpy(pipeline.broker, monkeypatch)

    def sync_jobs() -> list[Sent]:
        return [s for s in spy.sent if s.message.actor_name == "sync_calendar_event"]

    def send(title: str, jobs: int) -> None:
        edit = IntakeMessage.model_validate(
            {"tenant_id": "tenant-1", "change": change([account], entity_id="evt-msg", title=title)}
        )
        pipeline.broker.enqueue(intake_message(pipeline.settings.intake_queue, edit))
        wait_until(lambda: len(sync_jobs()) == jobs, what=f"the sync job of {title}")

    with pipeline.worker(threads=1):
        send("v1", 1)
        send("v2", 2)
    assert [(s.payload.target_version, s.delay) for s in sync_jobs()] == [(1, None), (2, 30_000)]
