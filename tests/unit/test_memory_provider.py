"""The memory provider behaves like a careful real provider, and its faults are shareable across processes."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from core.errors import ProviderUnavailable, RateLimited
from providers.base import Account, EventState, Target
from providers.memory import MemoryProvider, external_id_for

ACCOUNT = Account(id="acc", tenant_id="t", provider="memory", address="a@b.c")
TARGET = Target(event_id="e1", account_id="acc", tenant_id="t")


def _event(version: int, title: str = "Standup") -> EventState:
    start = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
    return EventState(id="e1", tenant_id="t", version=version, title=title, start=start,
                      end=start + dt.timedelta(minutes=15), time_zone="UTC", all_day=False)  # fmt: skip


def test_a_retried_create_adopts_instead_of_duplicating() -> None:
    provider = MemoryProvider()
    provider.add_fault(op="upsert", error="unavailable", after=True, times=1)  # created, response lost
    with pytest.raises(ProviderUnavailable):
        provider.upsert(ACCOUNT, _event(1), TARGET)
    ref = provider.upsert(ACCOUNT, _event(1), TARGET)
    assert ref.external_id == external_id_for(TARGET.sync_key)
    assert [c.effect for c in provider.calls() if c.effect] == ["created", "adopted"]
    assert len(provider.events()) == 1


def test_delete_is_idempotent_and_upsert_restores() -> None:
    provider = MemoryProvider()
    ref = provider.upsert(ACCOUNT, _event(1), TARGET)
    known = Target(event_id="e1", account_id="acc", tenant_id="t", external_id=ref.external_id)
    provider.delete(ACCOUNT, known)
    provider.delete(ACCOUNT, known)
    provider.upsert(ACCOUNT, _event(2), known)
    assert [c.effect for c in provider.calls()] == ["created", "deleted", "already_gone", "restored"]


def test_faults_match_count_down_and_carry_retry_after(tmp_path: Path) -> None:
    writer = MemoryProvider(tmp_path / "shared.sqlite3")
    reader = MemoryProvider(tmp_path / "shared.sqlite3")  # another process would open the same file
    writer.add_fault(error="rate_limited", title="^Standup", retry_after=42, times=2)
    for _ in range(2):
        with pytest.raises(RateLimited) as caught:
            reader.upsert(ACCOUNT, _event(1), TARGET)
        assert caught.value.retry_after == 42
    reader.upsert(ACCOUNT, _event(1), TARGET)
    reader.upsert(ACCOUNT, _event(1, title="Other"), TARGET)
    # Without a known external id the second write finds the event by its deterministic id and adopts it.
    assert [c.error or c.effect for c in writer.calls()] == ["RateLimited", "RateLimited", "created", "adopted"]
    with pytest.raises(ValueError, match="unknown fault error"):
        writer.add_fault(error="meteor")
