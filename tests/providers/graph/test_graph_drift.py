"""The Graph adapter's read-back (calendarView delta + the marker by id) on httpx against the Exchange emulator."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.error import HTTPError

import pytest
from hypothesis import given

from calsync.core.model.calendar import Account, EventState
from calsync.core.model.drift import DriftReader, drift_reader
from calsync.core.model.errors import EntityNotFound, ProviderUnavailable
from calsync.providers.graph.provider import GraphProvider
from calsync_emulators.control import GraphControl
from tests.providers.fingerprint_support import CONTENT, ROUND_TRIP, drawn_event
from tests.providers.graph.conftest import MakeAccount, MakeEvent, graph_ops, target_for


def _seed(provider: GraphProvider, account: Account, make_event: MakeEvent, count: int = 3) -> list[tuple[str, str]]:
    """``count`` events written by the adapter, as (sync key, Graph id)."""
    made = []
    for n in range(count):
        event = make_event(id=f"evt-{n}", title=f"Meeting {n}")
        target = target_for(account, event)
        made.append((target.sync_key, provider.upsert(account, event, target).external_id))
    return made


def _swept(
    provider: GraphProvider, account: Account, make_event: MakeEvent, count: int = 3
) -> tuple[list[tuple[str, str]], str | None]:
    """Events written by the adapter and the cursor of a first full read-back."""
    made = _seed(provider, account, make_event, count)
    return made, provider.read_back(account, None).cursor


def _event(make_event: MakeEvent, n: int) -> EventState:
    return make_event(id=f"evt-{n}", title=f"Meeting {n}")


def test_the_adapter_is_a_drift_reader(provider: GraphProvider) -> None:
    assert isinstance(drift_reader(provider), DriftReader)


def test_a_full_listing_holds_only_marked_events_with_the_fingerprint_of_what_was_written(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    made = _seed(provider, account, make_event)
    reading = provider.read_back(account, None)
    assert reading.full and reading.cursor
    assert sorted((i.sync_key, i.external_id) for i in reading.items) == sorted(made)
    first = next(i for i in reading.items if i.external_id == made[0][1])
    assert first.etag == f'W/"{graph.item(made[0][1])["change_key"]}"' and not first.removed
    assert first.fingerprint == provider.fingerprint(account, _event(make_event, 0))
    assert first.fingerprint != provider.fingerprint(account, make_event(id="evt-0", title="Other"))


def test_an_unchanged_calendar_costs_one_request_and_keeps_its_cursor(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    _, cursor = _swept(provider, account, make_event)
    since = len(graph.requests())
    again = provider.read_back(account, cursor)
    assert (again.items, again.full, again.cursor) == ([], False, cursor)
    assert graph_ops(graph, since) == [("events.delta", 200)]


def test_a_user_edit_and_delete_show_up_incrementally(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    made, cursor = _swept(provider, account, make_event)
    graph.edit_item(made[0][1], subject="Renamed by the user")
    graph.delete_item(made[1][1])
    reading = provider.read_back(account, cursor)
    assert not reading.full and reading.cursor != cursor
    by_id = {i.external_id: i for i in reading.items}
    assert set(by_id) == {made[0][1], made[1][1]}
    assert by_id[made[1][1]].removed and by_id[made[1][1]].sync_key is None
    edited = by_id[made[0][1]]
    assert edited.sync_key == made[0][0] and edited.etag == f'W/"{graph.item(made[0][1])["change_key"]}"'
    assert edited.fingerprint != provider.fingerprint(account, _event(make_event, 0))
    assert provider.read_back(account, reading.cursor).items == []


def test_an_expired_delta_token_leads_to_one_full_listing_without_duplicates(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    made, cursor = _swept(provider, account, make_event)
    graph.expire_sync_states()
    since = len(graph.requests())
    reading = provider.read_back(account, cursor)
    assert reading.full
    assert sorted(i.external_id for i in reading.items) == sorted(i for _, i in made)
    assert graph_ops(graph, since) == [("events.delta", 410), ("events.delta", 200), ("events.list", 200)]


def test_a_503_during_the_read_back_is_a_temporary_error(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    _seed(provider, account, make_event, 1)
    graph.add_fault(operation="events.delta", status=503, times=1)
    with pytest.raises(ProviderUnavailable):
        provider.read_back(account, None)


def test_an_event_moved_out_of_the_window_is_read_again_not_called_removed(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    made, cursor = _swept(provider, account, make_event, 1)
    moved = make_event(
        id="evt-0", title="Meeting 0", start=dt.datetime(2041, 1, 2, 10), end=dt.datetime(2041, 1, 2, 11)
    )
    target = target_for(account, moved, external_id=made[0][1], etag=None)
    provider.upsert(account, moved, target)  # beyond the reader's window: delta reports it @removed
    since = len(graph.requests())
    [seen] = provider.read_back(account, cursor).items
    assert (seen.external_id, seen.removed, seen.sync_key) == (made[0][1], False, made[0][0])
    assert seen.fingerprint == provider.fingerprint(account, moved)
    assert graph_ops(graph, since) == [("events.delta", 200), ("events.get", 200)]


@pytest.mark.parametrize(
    "cursor", ["2000-01-01;{link}", "{day};https://elsewhere.example/v1.0/x?$deltatoken=t", "junk"]
)
def test_a_stale_foreign_or_unreadable_cursor_starts_a_full_listing(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent, cursor: str
) -> None:
    account = make_account()
    _seed(provider, account, make_event, 1)
    day, _, link = str(provider.read_back(account, None).cursor).partition(";")
    since = len(graph.requests())
    reading = provider.read_back(account, cursor.format(day=day, link=link))
    assert reading.full and len(reading.items) == 1
    assert [op for op, _ in graph_ops(graph, since)] == ["events.delta", "events.list"]
    assert all("elsewhere" not in r["path"] for r in graph.requests())


def test_an_account_writing_to_another_calendar_reads_that_calendar_back(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account(calendar="team-calendar")
    made, _ = _swept(provider, account, make_event, 1)
    paths = [r["path"] for r in graph.requests() if r.get("operation") in ("events.delta", "events.list")]
    base = "/v1.0/users/alpha@example.com/calendars/team-calendar"
    assert paths == [f"{base}/calendarView/delta", f"{base}/events"]
    assert [i.external_id for i in provider.read_back(account, None).items] == [made[0][1]]


@pytest.mark.parametrize("zone", ["Europe/Copenhagen", "America/New_York", "UTC"])
def test_an_all_day_event_reads_back_with_the_fingerprint_of_what_was_written(
    provider: GraphProvider, make_account: MakeAccount, make_event: MakeEvent, zone: str
) -> None:
    account = make_account()
    days = {"start": dt.date(2030, 3, 1), "end": dt.date(2030, 3, 3), "time_zone": zone, "all_day": True}
    event = make_event(**days)
    provider.upsert(account, event, target_for(account, event))
    [seen] = provider.read_back(account, None).items
    assert seen.fingerprint == provider.fingerprint(account, event)
    assert seen.fingerprint != provider.fingerprint(account, make_event(**{**days, "end": dt.date(2030, 3, 4)}))


@ROUND_TRIP
@given(drawn=CONTENT)
def test_graph_reads_back_the_digest_of_what_it_wrote(
    provider: GraphProvider,
    graph: GraphControl,
    make_account: MakeAccount,
    make_event: MakeEvent,
    drawn: dict[str, Any],
) -> None:
    graph.reset()
    account, event = make_account(), drawn_event(make_event(), drawn)
    provider.upsert(account, event, target_for(account, event))
    [seen] = provider.read_back(account, None).items
    assert seen.fingerprint == provider.fingerprint(account, event)


def test_only_a_missing_event_is_called_removed_not_a_missing_mailbox(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    made, cursor = _swept(provider, account, make_event, 1)
    graph.edit_item(made[0][1], subject="Edited")
    graph.add_fault(operation="events.get", status=404, reason="MailboxNotEnabledForRESTAPI", times=1)
    with pytest.raises(EntityNotFound):
        provider.read_back(account, cursor)
    graph.delete_item(made[0][1])
    [gone] = provider.read_back(account, cursor).items
    assert (gone.external_id, gone.removed) == (made[0][1], True)


def test_a_user_moving_an_event_is_a_changed_fingerprint_and_a_backwards_move_is_refused(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    made, cursor = _swept(provider, account, make_event, 1)
    before = graph.item(made[0][1])["change_key"]
    with pytest.raises(HTTPError):
        graph.edit_item(made[0][1], start="2030-01-02T12:00:00Z")  # after its end: Outlook refuses it
    assert graph.item(made[0][1])["change_key"] == before
    graph.edit_item(made[0][1], start="2030-01-02T08:00:00Z", end="2030-01-02T08:30:00Z")
    [moved] = provider.read_back(account, cursor).items
    there = make_event(
        id="evt-0", title="Meeting 0", start=dt.datetime(2030, 1, 2, 9), end=dt.datetime(2030, 1, 2, 9, 30)
    )
    assert moved.fingerprint == provider.fingerprint(account, there)  # 09:00 in Copenhagen is 08:00 UTC
