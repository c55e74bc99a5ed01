"""The memory provider reads back as the drift contract says (core/model/drift.py): a full listing of the account's
confirmed events without a cursor it gave, then only what changed (a deletion as a removed item), one request
each, and a fingerprint of what it wrote equal to that of the item it lists; edits "as the user did"."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calsync.core.model.calendar import Account, EventState, Target
from calsync.core.model.drift import DriftReader, drift_reader
from calsync.core.model.errors import ProviderUnavailable
from calsync.core.model.provider_io import RequestsSent
from calsync.providers.memory import MemoryProvider

ACCOUNT = Account(id="acc", tenant_id="t", provider="memory", address="a@b.c")
OTHER = replace(ACCOUNT, id="other")
START = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)


def event(event_id: str, title: str = "Standup", **fields: object) -> EventState:
    """An event of tenant t."""
    return EventState(id=event_id, tenant_id="t", version=1, title=title, start=START,  # type: ignore[arg-type]
                      end=START + dt.timedelta(minutes=15), time_zone="UTC", all_day=False, **fields)  # fmt: skip


def target(event_id: str, account: Account = ACCOUNT) -> Target:
    """The target of an event in an account."""
    return Target(event_id=event_id, account_id=account.id, tenant_id="t")


@pytest.fixture(params=["in-process", "sqlite-file"])
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryProvider:
    return MemoryProvider() if request.param == "in-process" else MemoryProvider(tmp_path / "memory.sqlite3")


def test_it_is_a_drift_reader(provider: MemoryProvider) -> None:
    assert isinstance(drift_reader(provider), DriftReader)


def test_no_cursor_lists_the_account_s_confirmed_events_then_only_what_changed(provider: MemoryProvider) -> None:
    kept, gone = (provider.upsert(ACCOUNT, event(e), target(e)) for e in ("e1", "e2"))
    provider.upsert(OTHER, event("e1"), target("e1", OTHER))
    provider.delete(ACCOUNT, target("e2"))
    full = provider.read_back(ACCOUNT, None)
    assert full.full and [(i.external_id, i.sync_key, i.etag) for i in full.items] == [
        (kept.external_id, "t:e1:acc", kept.etag)]  # fmt: skip
    unchanged = provider.read_back(ACCOUNT, full.cursor)
    assert (unchanged.full, unchanged.items, unchanged.cursor) == (False, [], full.cursor)

    edited = provider.user_edit(ACCOUNT.id, kept.external_id, title="Mine")
    provider.upsert(OTHER, event("e1", title="elsewhere"), target("e1", OTHER))  # another account's change
    changes = provider.read_back(ACCOUNT, unchanged.cursor)
    assert not changes.full and [(i.external_id, i.etag, i.removed) for i in changes.items] == [
        (kept.external_id, edited.etag, False)]  # fmt: skip
    assert edited.etag != kept.etag
    provider.user_delete(ACCOUNT.id, kept.external_id)
    [removed] = provider.read_back(ACCOUNT, changes.cursor).items
    assert (removed.external_id, removed.removed, removed.fingerprint) == (kept.external_id, True, None)
    assert gone.external_id != kept.external_id


@pytest.mark.parametrize("cursor", ["", "garbage", "mem:x", "mem:999999", "token-of-another-provider"])
def test_a_cursor_it_did_not_give_is_refused_with_a_full_listing(provider: MemoryProvider, cursor: str) -> None:
    provider.upsert(ACCOUNT, event("e1"), target("e1"))
    reading = provider.read_back(ACCOUNT, cursor)
    assert reading.full and len(reading.items) == 1


def test_each_read_back_is_one_request_and_a_fault_is_its_answer(provider: MemoryProvider) -> None:
    provider.add_fault(op="read_back", error="unavailable", times=1)
    sent = RequestsSent()
    with sent, pytest.raises(ProviderUnavailable):
        provider.read_back(ACCOUNT, None)
    with sent:
        provider.read_back(ACCOUNT, None)
    assert sent.count == 2
    assert [(c.op, c.effect, c.error) for c in provider.calls()] == [
        ("read_back", None, "ProviderUnavailable"), ("read_back", "full", None)]  # fmt: skip


def test_a_user_edit_of_an_unknown_event_is_refused(provider: MemoryProvider) -> None:
    with pytest.raises(KeyError):
        provider.user_edit(ACCOUNT.id, "nope", title="x")
    with pytest.raises(KeyError):
        provider.user_delete(ACCOUNT.id, "nope")


texts = st.one_of(st.none(), st.text(max_size=30))


@settings(max_examples=100, deadline=None)
@given(title=st.text(max_size=40), location=texts, description=texts,
       attendees=st.lists(st.emails(), max_size=4, unique=True), color=st.text(max_size=5))  # fmt: skip
def test_the_fingerprint_of_an_event_is_that_of_the_item_it_wrote_and_an_owned_edit_changes_it(
    title: str, location: str | None, description: str | None, attendees: list[str], color: str
) -> None:
    provider = MemoryProvider()
    state = event("e1", title=title, location=location, description=description, attendees=tuple(attendees))
    ref = provider.upsert(ACCOUNT, state, target("e1"))
    expected = provider.fingerprint(ACCOUNT, state)
    [item] = provider.read_back(ACCOUNT, None).items
    assert item.fingerprint == expected
    assert provider.fingerprint(ACCOUNT, replace(state, attendees=tuple(reversed(attendees)))) == expected
    assert provider.fingerprint(ACCOUNT, replace(state, version=7, send_updates="all")) == expected
    provider.user_edit(ACCOUNT.id, ref.external_id, color=color)  # a field calsync does not own
    [touched] = provider.read_back(ACCOUNT, None).items
    assert touched.fingerprint == expected and touched.etag != ref.etag
    provider.user_edit(ACCOUNT.id, ref.external_id, title=title + "!")
    [edited] = provider.read_back(ACCOUNT, None).items
    assert edited.fingerprint != expected
