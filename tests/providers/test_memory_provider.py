"""The memory provider behaves like a careful real provider, the same in this process and in a shared file."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from calsync.core.model.calendar import Account, EventState, Target
from calsync.core.model.errors import Forbidden, ProviderUnavailable, RateLimited
from calsync.core.model.provider_io import RequestsSent
from calsync.providers import memory_store
from calsync.providers.memory import MemoryProvider, external_id_for
from calsync.providers.memory_store import CalendarStore, Call, MemoryFaultRule, StoredEvent

ACCOUNT = Account(id="acc", tenant_id="t", provider="memory", address="a@b.c")
TARGET = Target(event_id="e1", account_id="acc", tenant_id="t")


def _event(version: int, title: str = "Standup") -> EventState:
    start = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
    return EventState(id="e1", tenant_id="t", version=version, title=title, start=start,
                      end=start + dt.timedelta(minutes=15), time_zone="UTC", all_day=False)  # fmt: skip


@pytest.fixture(params=["in-process", "sqlite-file"])
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryProvider:
    return MemoryProvider() if request.param == "in-process" else MemoryProvider(tmp_path / "memory.sqlite3")


def test_a_retried_create_adopts_instead_of_duplicating(provider: MemoryProvider) -> None:
    provider.add_fault(op="upsert", error="unavailable", after=True, times=1)  # created, response lost
    with pytest.raises(ProviderUnavailable):
        provider.upsert(ACCOUNT, _event(1), TARGET)
    ref = provider.upsert(ACCOUNT, _event(1), TARGET)
    assert ref.external_id == external_id_for(TARGET.sync_key)
    assert [c.error or c.effect for c in provider.calls()] == ["created", "ProviderUnavailable", "adopted"]
    assert len(provider.events()) == 1


def test_delete_is_idempotent_and_upsert_restores(provider: MemoryProvider) -> None:
    ref = provider.upsert(ACCOUNT, _event(1), TARGET)
    known = Target(event_id="e1", account_id="acc", tenant_id="t", external_id=ref.external_id)
    provider.delete(ACCOUNT, known)
    provider.delete(ACCOUNT, known)
    provider.delete(ACCOUNT, Target(event_id="never", account_id="acc", tenant_id="t"))
    provider.upsert(ACCOUNT, _event(2), known)
    assert [c.effect for c in provider.calls()] == ["created", "deleted", "already_gone", "already_gone", "restored"]
    [stored] = provider.events()
    assert (stored.status, stored.writes, stored.body["version"]) == ("confirmed", 3, 2)


def test_an_unchanged_write_keeps_its_etag_and_a_change_makes_a_new_one(provider: MemoryProvider) -> None:
    first = provider.upsert(ACCOUNT, _event(1), TARGET)
    known = Target(event_id="e1", account_id="acc", tenant_id="t", external_id=first.external_id)
    same = provider.upsert(ACCOUNT, _event(1), known)
    changed = provider.upsert(ACCOUNT, _event(2, title="Moved"), known)
    assert same.etag == first.etag != changed.etag
    assert [c.effect for c in provider.calls()] == ["created", "unchanged", "updated"]
    assert [e.body["title"] for e in provider.events("acc")] == ["Moved"]
    assert provider.events("someone-else") == []


def test_faults_match_count_down_and_carry_retry_after(provider: MemoryProvider) -> None:
    provider.add_fault(error="rate_limited", title="^Standup", retry_after=42, times=2)
    for _ in range(2):
        with pytest.raises(RateLimited) as caught:
            provider.upsert(ACCOUNT, _event(1), TARGET)
        assert caught.value.retry_after == 42
    provider.upsert(ACCOUNT, _event(1), TARGET)
    provider.upsert(ACCOUNT, _event(1, title="Other"), TARGET)
    # Without a known external id the second write finds the event by its deterministic id and adopts it.
    assert [c.error or c.effect for c in provider.calls()] == ["RateLimited", "RateLimited", "created", "adopted"]


def test_faults_match_only_their_operation_account_and_entity(provider: MemoryProvider) -> None:
    provider.add_fault(error="forbidden", op="delete", account_id="acc", entity_id="e1")
    provider.upsert(ACCOUNT, _event(1), TARGET)  # an upsert: not matched
    provider.delete(ACCOUNT, Target(event_id="e2", account_id="acc", tenant_id="t"))  # another entity
    with pytest.raises(Forbidden, match="injected forbidden fault"):
        provider.delete(ACCOUNT, TARGET)
    with pytest.raises(Forbidden, match="injected forbidden fault"):
        provider.delete(ACCOUNT, TARGET)  # no count: every matching call
    provider.clear_faults()
    provider.delete(ACCOUNT, TARGET)
    assert [c.error or c.effect for c in provider.calls()] == ["created", "already_gone", "Forbidden", "Forbidden",
                                                               "deleted"]  # fmt: skip


def test_bad_fault_rules_are_refused(provider: MemoryProvider) -> None:
    with pytest.raises(ValueError, match="unknown fault error 'meteor'"):
        provider.add_fault(error="meteor")
    with pytest.raises(ValueError, match="times must be at least 1"):
        provider.add_fault(times=0)
    provider.upsert(ACCOUNT, _event(1), TARGET)  # nothing was stored by the refused rules
    assert [c.effect for c in provider.calls()] == ["created"]


def test_a_file_calendar_is_shared_by_every_provider_that_opens_it(tmp_path: Path) -> None:
    writer = MemoryProvider(tmp_path / "shared.sqlite3")
    reader = MemoryProvider(tmp_path / "shared.sqlite3")  # another process would open the same file
    writer.add_fault(error="unavailable", times=1)
    with pytest.raises(ProviderUnavailable):
        reader.upsert(ACCOUNT, _event(1), TARGET)
    reader.upsert(ACCOUNT, _event(1), TARGET)
    assert [c.error or c.effect for c in writer.calls()] == ["ProviderUnavailable", "created"]
    assert writer.events() == reader.events()


def test_in_process_calendars_are_separate() -> None:
    one, other = MemoryProvider(), MemoryProvider(":memory:")
    one.upsert(ACCOUNT, _event(1), TARGET)
    assert other.events() == [] and len(one.events()) == 1


@pytest.fixture(params=["in-process", "sqlite-file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> CalendarStore:
    return CalendarStore() if request.param == "in-process" else CalendarStore(tmp_path / "store.sqlite3")


def test_a_failed_step_leaves_nothing_behind(store: CalendarStore) -> None:
    kept = StoredEvent("acc", "x1", "key", '"1"', {"title": "kept"}, "confirmed", 1)
    rule = MemoryFaultRule(0, None, None, None, None, "unavailable", None, None, 0, False, 2)
    with store.transaction() as tx:
        tx.save(kept)
        fault_id = tx.add_fault(rule)
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.save(StoredEvent("acc", "x1", "key", '"2"', {"title": "changed"}, "confirmed", 2))
        tx.save(StoredEvent("acc", "x2", "key2", '"1"', {"title": "new"}, "confirmed", 1))
        tx.log(Call("upsert", "acc", "e1", "x1", 2, "updated", None, 0.0))
        tx.add_fault(rule)
        tx.set_remaining(fault_id, 0)
        raise RuntimeError("the step fails")
    with store.transaction() as tx:
        assert tx.events(None) == [kept]
        assert tx.calls() == []
        assert [(f.id, f.remaining) for f in tx.faults()] == [(fault_id, 2)]
    assert [(f.id, f.remaining) for f in store.faults()] == [(fault_id, 2)]  # read outside a transaction too


@pytest.mark.parametrize("after", [False, True])
def test_a_delay_only_fault_waits_once_and_the_call_succeeds(tmp_path: Path, after: bool) -> None:
    waits: list[float] = []
    provider = MemoryProvider(tmp_path / "memory.sqlite3", sleep=waits.append)
    provider.add_fault(error=None, delay_ms=50, after=after)
    provider.upsert(ACCOUNT, _event(1), TARGET)
    provider.delete(ACCOUNT, TARGET)
    assert waits == [0.05, 0.05]  # one wait per call, not one before and one after the write
    assert [c.error or c.effect for c in provider.calls()] == ["created", "deleted"]


def test_a_file_calendar_serves_many_threads(tmp_path: Path) -> None:
    provider = MemoryProvider(tmp_path / "memory.sqlite3")

    def sync(n: int) -> None:
        target = Target(event_id=f"e{n}", account_id="acc", tenant_id="t")
        for version in (1, 2):
            provider.upsert(ACCOUNT, _event(version, title=f"Event {n}"), target)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(sync, range(40)))
    assert len(provider.events("acc")) == 40
    assert sorted(c.effect or "" for c in provider.calls()) == ["adopted"] * 40 + ["created"] * 40
    provider.close()
    provider.upsert(ACCOUNT, _event(1), Target(event_id="late", account_id="acc", tenant_id="t"))
    # ^ a closed store opens a new connection on the next call
    assert len(provider.events("acc")) == 41


def test_the_call_log_keeps_only_the_newest_calls(
    store_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 20
    monkeypatch.setattr(memory_store, "CALL_LOG_LIMIT", limit)
    store = CalendarStore(None if store_kind == "in-process" else tmp_path / "s.sqlite3")
    for n in range(100):
        with store.transaction() as tx:
            tx.log(Call("upsert", "acc", f"e{n}", None, 1, "created", None, float(n)))
    with store.transaction() as tx:
        kept = [call.entity_id for call in tx.calls()]
    assert limit <= len(kept) <= limit + limit // 10 and kept[-1] == "e99"
    assert kept == [f"e{n}" for n in range(100 - len(kept), 100)]  # the newest, in order


@pytest.fixture(params=["in-process", "sqlite-file"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_write_counts_as_a_request_its_fault_included(provider: MemoryProvider) -> None:
    provider.add_fault(op="delete", error="unavailable", times=1)  # the provider's answer: the request went out
    with RequestsSent() as sent:
        provider.upsert(ACCOUNT, _event(1), TARGET)
        with pytest.raises(ProviderUnavailable):
            provider.delete(ACCOUNT, TARGET)
    assert sent.count == 2
