"""Create/update/delete round trips through exchangelib and the EWS emulator."""

from __future__ import annotations

import dataclasses
import datetime as dt

import exchangelib.protocol
import pytest

from calsync.core.model.calendar import SendUpdates
from calsync.core.model.errors import AuthRevoked, Forbidden
from calsync.core.model.markers import SYNC_KEY_PROPERTY_NAME
from tests.providers.exchange.ews_support import ExchangeRig


def test_create_update_delete_timed_event_keeps_its_time_zone(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account = rig.make_account("alpha@example.com")
    event = rig.make_event(time_zone="America/New_York", attendees=("bob@example.org",))
    target = rig.make_target(account, event)

    ref = provider.upsert(account, event, target)

    [item] = ews.items("alpha@example.com")
    assert (item["id"], item["change_key"]) == (ref.external_id, ref.etag)
    assert item["subject"] == "Standup"
    assert item["body"] == "Daily sync"
    assert item["location"] == "Room 1"
    assert item["start"] == "2030-01-02T10:00:00-05:00"
    assert item["end"] == "2030-01-02T10:30:00-05:00"
    assert item["start_time_zone"] == item["end_time_zone"] == "Eastern Standard Time"
    assert item["is_all_day"] is False
    assert item["required_attendees"] == ["bob@example.org"]
    assert item["extended_properties"] == {SYNC_KEY_PROPERTY_NAME: target.sync_key}

    moved = dataclasses.replace(
        event,
        version=2,
        title="Standup (moved)",
        start=dt.datetime(2030, 7, 1, 9, 0, tzinfo=dt.UTC),
        end=dt.datetime(2030, 7, 1, 9, 45, tzinfo=dt.UTC),
        time_zone="Asia/Tokyo",
        location=None,
        description=None,
        attendees=(),
    )
    updated = provider.upsert(account, moved, dataclasses.replace(target, external_id=ref.external_id, etag=ref.etag))

    [item] = ews.items("alpha@example.com")
    assert updated.external_id == ref.external_id
    assert updated.etag == item["change_key"] != ref.etag
    assert item["subject"] == "Standup (moved)"
    assert item["start"] == "2030-07-01T18:00:00+09:00"
    assert item["end"] == "2030-07-01T18:45:00+09:00"
    assert item["start_time_zone"] == "Tokyo Standard Time"
    assert (item["location"], item["body"], item["required_attendees"]) == (None, None, [])

    provider.delete(account, dataclasses.replace(target, external_id=updated.external_id, etag=updated.etag))

    assert ews.items() == []
    assert [r["operation"] for r in ews.requests()] == [
        "GetFolder",
        "GetFolder",
        "FindItem",
        "CreateItem",
        "UpdateItem",
        "DeleteItem",
    ]


def test_all_day_events_span_local_midnights_with_an_exclusive_end(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account = rig.make_account()
    event = rig.make_event(
        all_day=True, start=dt.date(2030, 3, 30), end=dt.date(2030, 4, 1), time_zone="Europe/Copenhagen"
    )
    target = rig.make_target(account, event)

    ref = provider.upsert(account, event, target)

    [item] = ews.items()
    assert item["is_all_day"] is True
    # 31 March 2030 is the DST switch in Copenhagen: each midnight keeps its own offset.
    assert (item["start"], item["end"]) == ("2030-03-30T00:00:00+01:00", "2030-04-01T00:00:00+02:00")
    assert item["start_time_zone"] == "Romance Standard Time"

    one_day = dataclasses.replace(event, version=2, start=dt.date(2030, 5, 1), end=dt.date(2030, 5, 1))
    ref = provider.upsert(account, one_day, dataclasses.replace(target, external_id=ref.external_id, etag=ref.etag))
    [item] = ews.items()
    assert (item["start"], item["end"]) == ("2030-05-01T00:00:00+02:00", "2030-05-02T00:00:00+02:00")

    timed = dataclasses.replace(
        one_day, version=3, all_day=False, start=dt.datetime(2030, 5, 1, 13), end=dt.datetime(2030, 5, 1, 14)
    )
    provider.upsert(account, timed, dataclasses.replace(target, external_id=ref.external_id, etag=ref.etag))
    [item] = ews.items()
    assert item["is_all_day"] is False
    assert (item["start"], item["end"]) == ("2030-05-01T13:00:00+02:00", "2030-05-01T14:00:00+02:00")


@pytest.mark.parametrize(
    ("send_updates", "mode"),
    [("all", "SendToAllAndSaveCopy"), ("external_only", "SendToAllAndSaveCopy"), ("none", "SendToNone")],
)
def test_invitation_and_cancellation_modes_follow_send_updates(
    send_updates: SendUpdates, mode: str, rig: ExchangeRig
) -> None:
    provider, ews = rig.provider, rig.ews
    account = rig.make_account()
    event = rig.make_event(attendees=("bob@example.org", "carol@example.com"), send_updates=send_updates)
    target = rig.make_target(account, event)

    ref = provider.upsert(account, event, target)
    ref = provider.upsert(
        account,
        dataclasses.replace(event, title="Changed"),
        dataclasses.replace(target, external_id=ref.external_id, etag=ref.etag),
    )
    provider.delete(account, dataclasses.replace(target, external_id=ref.external_id), send_updates=send_updates)

    notified = [] if mode == "SendToNone" else ["bob@example.org", "carol@example.com"]
    [create] = ews.requests("CreateItem")
    [update] = ews.requests("UpdateItem")
    [delete] = ews.requests("DeleteItem")
    assert (create["send_meeting_invitations"], create["notified"]) == (mode, notified)
    assert (update["send_meeting_invitations_or_cancellations"], update["notified"]) == (mode, notified)
    assert (delete["send_meeting_cancellations"], delete["notified"]) == (mode, notified)


def test_impersonation_acts_as_the_mailbox_and_delegate_uses_the_login(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    impersonated = rig.make_account("bravo@example.com", access_type="impersonation")
    own_calendar = rig.make_account("alice@example.com", login="alice", access_type="delegate")
    event = rig.make_event()

    provider.upsert(impersonated, event, rig.make_target(impersonated, event))
    provider.upsert(own_calendar, event, rig.make_target(own_calendar, event))

    assert [i["mailbox"] for i in ews.items()] == ["bravo@example.com", "alice@example.com"]
    creates = ews.requests("CreateItem")
    assert [(r["principal"], r["access"], r["mailbox"]) for r in creates] == [
        ("svc@example.com", "impersonation", "bravo@example.com"),
        ("alice@example.com", "delegate", "alice@example.com"),
    ]


def test_a_login_without_rights_is_forbidden_for_impersonation_and_for_foreign_calendars(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    event = rig.make_event()
    impersonating = rig.make_account("bravo@example.com", login="alice", access_type="impersonation", account_id="a1")
    foreign = rig.make_account("bravo@example.com", login="alice", access_type="delegate", account_id="a2")

    with pytest.raises(Forbidden, match="ErrorImpersonateUserDenied"):
        provider.upsert(impersonating, event, rig.make_target(impersonating, event))
    with pytest.raises(Forbidden, match="ErrorAccessDenied"):
        provider.upsert(foreign, event, rig.make_target(foreign, event))
    assert ews.items() == []


def test_oauth2_client_credentials_fetch_a_token_once_and_impersonate(insecure_oauth: None, rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple(rig.make_account("charlie@example.com", auth_type="oauth2", access_type=None))

    ref = provider.upsert(account, event, target)
    provider.delete(account, dataclasses.replace(target, external_id=ref.external_id))

    token, *soap = ews.requests()
    assert (token["operation"], token["client_id"], token["outcome"]) == ("token", "calsync-client", "issued")
    assert [r["operation"] for r in soap] == ["GetFolder", "GetFolder", "FindItem", "CreateItem", "DeleteItem"]
    assert {(r["auth"], r["access"], r["principal"], r["mailbox"]) for r in soap} == {
        ("bearer", "impersonation", "calsync-client", "charlie@example.com")
    }
    assert ews.items() == []


def test_oauth2_rejected_token_is_refetched_and_the_call_retried_once(insecure_oauth: None, rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple(rig.make_account(auth_type="oauth2", access_type=None))
    provider.upsert(account, event, target)
    assert ews.revoke_tokens() == 1

    second = rig.make_event(id="evt-2")
    provider.upsert(account, second, rig.make_target(account, second))

    assert len(ews.items()) == 2
    after_revoke = ews.requests()[5:]
    assert [(r["operation"], r["status"]) for r in after_revoke] == [
        ("FindItem", 401),
        ("token", 200),
        ("FindItem", 200),
        ("CreateItem", 200),
    ]


def test_oauth2_wrong_client_secret_is_auth_revoked_after_one_token_request(
    insecure_oauth: None, rig: ExchangeRig
) -> None:
    provider, ews = rig.provider, rig.ews
    account = rig.make_account(auth_type="oauth2", access_type=None, credentials={"client_secret": "not-the-secret"})
    _, event, target = rig.triple(account)

    for _attempt in range(2):
        with pytest.raises(AuthRevoked) as caught:
            provider.upsert(account, event, target)
        assert "not-the-secret" not in str(caught.value)

    assert [(r["operation"], r["outcome"]) for r in ews.requests()] == [("token", "invalid_client")] * 2


def test_close_releases_each_mailbox_pool_once_and_the_adapter_reconnects_after(
    rig: ExchangeRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, ews = rig.provider, rig.ews
    closed: list[object] = []
    real_close = exchangelib.protocol.BaseProtocol.close

    def recording_close(protocol: exchangelib.protocol.BaseProtocol) -> None:
        closed.append(protocol)
        real_close(protocol)

    monkeypatch.setattr(exchangelib.protocol.BaseProtocol, "close", recording_close)
    event = rig.make_event()
    for address in ("alpha@example.com", "beta@example.com"):
        account = rig.make_account(address)
        provider.upsert(account, event, rig.make_target(account, event))

    provider.close()
    provider.close()

    assert len(closed) == 2  # one mailbox each, the second close found nothing left to release
    account = rig.make_account("alpha@example.com")
    provider.upsert(account, dataclasses.replace(event, title="After close"), rig.make_target(account, event))
    assert [item["subject"] for item in ews.items("alpha@example.com")] == ["After close"]
