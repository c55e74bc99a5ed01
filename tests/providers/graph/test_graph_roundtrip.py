"""The Graph adapter against the Exchange server emulator, on the real httpx + msal over https."""

from __future__ import annotations

import dataclasses

import pytest

from calsync.core.model.errors import ConcurrencyLimited, InvalidRequest, RateLimited
from calsync.core.model.markers import SYNC_KEY_PROPERTY_NAME
from calsync.providers.graph.event_body import transaction_id_for
from calsync.providers.graph.provider import GraphProvider
from calsync_emulators.control import GraphControl
from tests.providers.graph.conftest import MakeAccount, MakeEvent, graph_ops, target_for


def test_create_update_delete_round_trip(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    ref = provider.upsert(account, event, target_for(account, event))
    [item] = graph.items("alpha@example.com")
    assert (item["id"], f'W/"{item["change_key"]}"') == (ref.external_id, ref.etag)
    assert item["subject"] == "Standup" and item["location"] == "Room 1" and item["body"] == "Daily sync"
    assert item["start"] == "2030-01-02T09:00:00Z"  # 10:00 in Copenhagen
    assert item["required_attendees"] == ["bob@example.com"]
    assert item["extended_properties"] == {SYNC_KEY_PROPERTY_NAME: "t1:evt-1:acct-alpha"}

    changed = provider.upsert(account, make_event(version=2, title="Standup v2"),
                              target_for(account, event, external_id=ref.external_id, etag=ref.etag))  # fmt: skip
    assert changed.external_id == ref.external_id and changed.etag != ref.etag
    assert graph.item(ref.external_id)["subject"] == "Standup v2"
    update = [r for r in graph.requests() if r.get("operation") == "events.update"]
    assert update[0]["if_match"] == ref.etag

    provider.delete(account, target_for(account, event, external_id=changed.external_id, etag=changed.etag))
    assert graph.items() == []
    provider.delete(account, target_for(account, event, external_id=changed.external_id, etag=changed.etag))
    assert graph_ops(graph)[-2:] == [("events.delete", 204), ("events.delete", 404)]


def test_the_transaction_id_is_deterministic_and_a_replayed_create_makes_no_second_event(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    key = target_for(account, event).sync_key
    assert transaction_id_for(key) == transaction_id_for(key) != transaction_id_for(key + "x")
    first = provider.upsert(account, event, target_for(account, event))
    again = provider.upsert(account, event, target_for(account, event))
    assert again.external_id == first.external_id
    assert len(graph.items()) == 1
    creates = [r for r in graph.requests() if r.get("operation") == "events.create"]
    assert [r["transaction_id"] for r in creates] == [transaction_id_for(key)] * 2
    assert creates[1]["replayed"] is True


def test_a_lost_create_response_is_adopted_by_marker_exactly_one_item(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    graph.add_fault(operation="events.create", after=True, drop=True, times=1)
    ref = provider.upsert(account, event, target_for(account, event))
    [item] = graph.items()
    assert ref.external_id == item["id"]
    assert [op for op, _ in graph_ops(graph)] == ["events.create", "events.list", "events.get", "events.update"]


def test_a_create_answered_with_a_5xx_after_applying_is_adopted(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    graph.add_fault(operation="events.create", after=True, status=504, times=1)
    ref = provider.upsert(account, event, target_for(account, event))
    assert [i["id"] for i in graph.items()] == [ref.external_id]


@pytest.mark.parametrize("status", [400, 409])
def test_duplicate_transaction_id_means_find_and_adopt(
    status: int, provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    first = provider.upsert(account, event, target_for(account, event))
    graph.add_fault(operation="events.create", status=status, reason="ErrorDuplicateTransactionId", times=1)
    # The target lost its ref (e.g. restored from a backup): a create collides with the first one.
    ref = provider.upsert(account, make_event(version=2, title="v2"), target_for(account, event))
    assert ref.external_id == first.external_id
    [item] = graph.items()
    assert item["subject"] == "v2"


def test_the_emulator_refuses_a_reused_transaction_id_for_another_event(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    first = provider.upsert(account, event, target_for(account, event))
    # Same target key, different content, no recorded ref: the emulator answers 400 ErrorDuplicateTransactionId.
    ref = provider.upsert(account, make_event(version=3, title="v3"), target_for(account, event))
    assert ref.external_id == first.external_id and graph.item(first.external_id)["subject"] == "v3"
    assert ("events.create", 400) in graph_ops(graph)


def test_412_re_reads_and_re_applies_never_overwriting_blindly(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    ref = provider.upsert(account, event, target_for(account, event))
    graph.edit_item(ref.external_id, location="Moved by a user")  # new ChangeKey: our etag is stale
    done = provider.upsert(account, make_event(version=2, title="Ours"),
                           target_for(account, event, external_id=ref.external_id, etag=ref.etag))  # fmt: skip
    item = graph.item(ref.external_id)
    assert item["subject"] == "Ours" and done.etag == f'W/"{item["change_key"]}"'
    assert [op for op in graph_ops(graph)][1:] == [
        ("events.update", 412), ("events.get", 200), ("events.update", 200)]  # fmt: skip


def test_an_event_not_carrying_our_marker_is_never_adopted(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    other = provider.upsert(account, event, target_for(dataclasses.replace(account, id="someone-else"), event))
    with pytest.raises(InvalidRequest):
        provider.upsert(account, make_event(version=2),
                        target_for(account, event, external_id=other.external_id, etag='W/"stale"'))  # fmt: skip


def test_a_deleted_event_is_recreated_on_update(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    ref = provider.upsert(account, event, target_for(account, event))
    graph.delete_item(ref.external_id)
    again = provider.upsert(account, make_event(version=2),
                            target_for(account, event, external_id=ref.external_id, etag=ref.etag))  # fmt: skip
    assert [i["id"] for i in graph.items()] == [again.external_id] != [ref.external_id]
    # A re-create is not a replay of the first create: its transactionId is seeded with the gone event's id.
    first, second = [r["transaction_id"] for r in graph.requests() if r.get("operation") == "events.create"]
    assert first == transaction_id_for(target_for(account, event).sync_key) != second


def test_throttling_429_carries_retry_after_as_the_floor(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    graph.add_fault(operation="events.create", status=429, reason="TooManyRequests", retry_after=7, times=1)
    with pytest.raises(RateLimited) as caught:
        provider.upsert(account, event, target_for(account, event))
    assert caught.value.retry_after == 7
    assert len([op for op in graph_ops(graph) if op[0] == "events.create"]) == 1  # no retry inside the client
    provider.upsert(account, event, target_for(account, event))
    assert len(graph.items()) == 1


def test_mailbox_concurrency_throttling_is_a_deferral(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account, event = make_account(), make_event()
    graph.add_fault(operation="events.create", status=429, reason="ApplicationThrottled",
                    message="Application is over its MailboxConcurrency limit.", retry_after=1, times=1)  # fmt: skip
    with pytest.raises(ConcurrencyLimited) as caught:
        provider.upsert(account, event, target_for(account, event))
    assert caught.value.retry_after == 1
    assert isinstance(caught.value.give_up(3), RateLimited)


def test_send_updates_none_keeps_attendees_off_and_all_writes_them(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    quiet = make_event(id="quiet", send_updates="none")
    ref = provider.upsert(account, quiet, target_for(account, quiet))
    assert graph.item(ref.external_id)["required_attendees"] == []
    loud = make_event(id="loud", send_updates="all")
    provider.upsert(account, loud, target_for(account, loud))
    notified = [r["notified"] for r in graph.requests() if r.get("operation") == "events.create"]
    assert notified == [[], ["bob@example.com"]]


def test_an_item_created_over_ews_is_visible_over_graph_with_the_same_marker(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    from calsync.providers.exchange.provider import ExchangeProvider

    ews = ExchangeProvider(timeout=10, pool_size=2)
    try:
        ews_account = dataclasses.replace(
            make_account(), provider="exchange",
            credentials={"username": "svc@example.com", "password": "svc-password"},
            options={"server_url": f"{graph.base_url}/EWS/Exchange.asmx", "auth_type": "basic",
                     "access_type": "impersonation"},
        )  # fmt: skip
        event = make_event()
        ews_ref = ews.upsert(ews_account, event, target_for(ews_account, event))
    finally:
        ews.close()
    account = make_account()
    moved = provider.upsert(account, make_event(version=2, title="via Graph"),
                            target_for(account, event, external_id=ews_ref.external_id, etag=ews_ref.etag))  # fmt: skip
    [item] = graph.items()
    assert item["id"] == moved.external_id and item["subject"] == "via Graph"


def test_an_event_created_over_graph_is_adopted_by_the_ews_adapter(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    from calsync.providers.exchange.provider import ExchangeProvider

    account, event = make_account(), make_event()
    created = provider.upsert(account, event, target_for(account, event))
    ews = ExchangeProvider(timeout=10, pool_size=2)
    try:
        ews_account = dataclasses.replace(
            account, provider="exchange",
            credentials={"username": "svc@example.com", "password": "svc-password"},
            options={"server_url": graph.server_url, "auth_type": "basic", "access_type": "impersonation"},
        )  # fmt: skip
        adopted = ews.upsert(ews_account, make_event(version=2, title="via EWS"), target_for(ews_account, event))
    finally:
        ews.close()
    [item] = graph.items()
    assert (adopted.external_id, created.external_id) == (item["ews_id"], item["id"]) and item["subject"] == "via EWS"


def test_each_mailbox_and_calendar_gets_its_own_collection_url(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    accounts = [make_account(), make_account("beta@example.com"), make_account(account_id="acct-own", calendar="own")]
    for n in range(2):
        for account in accounts:
            event = make_event(id=f"e{n}")
            provider.upsert(account, event, target_for(account, event))
    paths = [r["path"] for r in graph.requests() if r.get("operation") == "events.create"]
    users = "/v1.0/users"
    assert paths == 2 * [f"{users}/alpha@example.com/calendar/events", f"{users}/beta@example.com/calendar/events",
                         f"{users}/alpha@example.com/calendars/own/events"]  # fmt: skip
    assert {i["subject"] for i in graph.items("beta@example.com")} == {"Standup"}
