"""Producer invariants: the dedup marker lives ``DEDUP_TTL`` and no longer, the first identical enqueue wins,
and a change can only name the submitting tenant's own, enabled accounts."""

from __future__ import annotations

from typing import Any

import pytest

from calsync.core.model.errors import InvalidChange
from calsync.core.store import accounts, events, targets
from tests.spies import EnqueueSpy
from tests.support import Pipeline, wait_until

DEDUP_TTL = 2  # seconds (the setting is whole seconds)


def test_the_dedup_marker_expires_after_dedup_ttl(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(dedup_ttl=DEDUP_TTL))
    try:
        account = pipeline.account()
        first = pipeline.submit([account], title="Standup")
        marker = pipeline.clients.keys.dedup("tenant-1", first.entity_id, account, "update", 1)  # a create's: Mark.of
        redis = pipeline.clients.redis
        assert redis.get(marker) == first.job_ids[0].encode()
        assert 0.5 * DEDUP_TTL * 1000 < int(redis.pttl(marker)) <= DEDUP_TTL * 1000

        retried = pipeline.submit([account], entity_id=first.entity_id, title="Standup")  # the client retries
        assert retried.job_ids == first.job_ids  # the marker returns the first enqueue's job

        wait_until(lambda: redis.exists(marker) == 0, timeout=DEDUP_TTL + 5, what="the dedup marker to expire")
        later = pipeline.submit([account], entity_id=first.entity_id, title="Standup")
        assert later.version == 1 and later.job_ids and later.job_ids != first.job_ids  # offered again
    finally:
        pipeline.close()


def test_a_change_naming_another_tenants_account_is_refused_and_nothing_is_enqueued(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = pipeline.account(tenant="tenant-a", account_id="acc-a")
    foreign = pipeline.account(tenant="tenant-b", account_id="acc-b")
    spy = EnqueueSpy(pipeline.broker, monkeypatch)

    for named in ([foreign], [own, foreign]):
        with pytest.raises(InvalidChange, match=f"account {foreign} does not exist for tenant tenant-a"):
            pipeline.submit(named, tenant="tenant-a", entity_id="evt-x")

    assert spy.sent == []
    with pipeline.clients.db.read() as conn:
        assert events.get_event(conn, "tenant-a", "evt-x") is None
        assert targets.list_targets(conn, "tenant-a", "evt-x") == []
    accepted = pipeline.submit([own], tenant="tenant-a", entity_id="evt-x")  # the tenant's own account is fine
    assert len(accepted.job_ids) == 1 and len(spy.sent) == 1


def test_an_identical_update_resubmitted_gets_the_first_job(pipeline: Pipeline) -> None:
    account = pipeline.account()
    first = pipeline.submit([account], title="v1")
    update = pipeline.submit([account], entity_id=first.entity_id, title="v2")
    again = pipeline.submit([account], entity_id=first.entity_id, title="v2")  # the client retries its request
    assert (update.version, again.version) == (2, 2)
    assert again.job_ids == update.job_ids


def test_a_change_naming_a_disabled_account_is_refused_and_nothing_is_enqueued(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = pipeline.account(account_id="acc-off")
    with pipeline.clients.db.write() as conn:
        accounts.update_account(conn, account, status="disabled")
    spy = EnqueueSpy(pipeline.broker, monkeypatch)
    with pytest.raises(InvalidChange, match=f"account {account} is disabled"):
        pipeline.submit([account], entity_id="evt-off")
    assert spy.sent == []
    with pipeline.clients.db.read() as conn:
        assert events.get_event(conn, "tenant-1", "evt-off") is None
