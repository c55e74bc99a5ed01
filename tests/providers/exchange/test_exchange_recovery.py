"""Retry safety: lost responses, stale ChangeKeys, items changed behind our back, bad passwords, threads."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest

from calsync.core.model.errors import AuthRevoked, ProviderUnavailable
from tests.providers.exchange.ews_support import ExchangeRig, recorded


def test_a_create_whose_response_was_lost_is_adopted_on_retry_not_duplicated(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple()
    ews.add_fault(operation="CreateItem", after=True, drop=True, times=1)

    with pytest.raises(ProviderUnavailable):
        provider.upsert(account, event, target)
    assert len(ews.items()) == 1  # the server did create it

    newer = dataclasses.replace(event, version=2, title="Standup v2")
    ref = provider.upsert(account, newer, target)

    [item] = ews.items()
    assert (item["id"], item["change_key"], item["subject"]) == (ref.external_id, ref.etag, "Standup v2")
    assert [r["operation"] for r in ews.requests()][-2:] == ["FindItem", "UpdateItem"]
    assert len(ews.requests("CreateItem")) == 1


def test_a_stale_change_key_is_re_resolved_and_the_latest_state_reapplied(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple()
    ref = provider.upsert(account, event, target)
    ews.edit_item(ref.external_id, subject="Renamed in Outlook")

    newer = dataclasses.replace(event, version=2, title="Standup v2")
    updated = provider.upsert(account, newer, recorded(target, ref))

    [item] = ews.items()
    assert updated.external_id == ref.external_id
    assert (item["subject"], item["change_key"]) == ("Standup v2", updated.etag)
    log = ews.requests()[-3:]
    assert [(r["operation"], r["response_codes"]) for r in log] == [
        ("UpdateItem", ["ErrorIrresolvableConflict"]),
        ("FindItem", ["NoError"]),
        ("UpdateItem", ["NoError"]),
    ]


def test_an_item_deleted_in_exchange_is_recreated_by_an_update(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple()
    ref = provider.upsert(account, event, target)
    ews.delete_item(ref.external_id)

    recreated = provider.upsert(account, dataclasses.replace(event, version=2), recorded(target, ref))

    [item] = ews.items()
    assert recreated.external_id == item["id"] != ref.external_id
    assert [(r["operation"], r["response_codes"]) for r in ews.requests()[-3:]] == [
        ("UpdateItem", ["ErrorItemNotFound"]),
        ("FindItem", ["NoError"]),
        ("CreateItem", ["NoError"]),
    ]


def test_deleting_an_item_already_deleted_in_exchange_succeeds(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple()
    ref = provider.upsert(account, event, target)
    ews.delete_item(ref.external_id)

    provider.delete(account, recorded(target, ref))
    provider.delete(account, recorded(target, ref))

    assert [r["response_codes"] for r in ews.requests("DeleteItem")] == [["ErrorItemNotFound"]] * 2


def test_deleting_with_a_malformed_stored_id_falls_back_to_the_sync_key(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple()
    ref = provider.upsert(account, event, target)

    provider.delete(account, dataclasses.replace(recorded(target, ref), external_id="garbled-id"))

    assert ews.items() == []
    assert [r["response_codes"] for r in ews.requests("DeleteItem")] == [["ErrorInvalidIdMalformed"], ["NoError"]]


def test_deleting_without_a_known_id_finds_the_item_by_sync_key(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple()
    other = rig.make_event(id="evt-other")
    provider.upsert(account, event, target)
    provider.upsert(account, other, rig.make_target(account, other))

    provider.delete(account, target)
    provider.delete(account, target)

    assert [i["extended_properties"] for i in ews.items()] == [{"CalsyncSyncKey": "t1:evt-other:acct-alpha"}]


def test_a_wrong_password_is_auth_revoked_with_one_request_per_attempt_and_no_secret_in_the_message(
    rig: ExchangeRig,
) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple(rig.make_account(credentials={"password": "hunter2-wrong"}))

    for attempt in range(1, 4):
        with pytest.raises(AuthRevoked) as caught:
            provider.upsert(account, event, target)
        assert "hunter2-wrong" not in str(caught.value)
        assert [r["status"] for r in ews.requests()] == [401] * attempt

    fixed = dataclasses.replace(account, credentials={"username": "svc@example.com", "password": "svc-password"})
    provider.upsert(fixed, event, rig.make_target(fixed, event))
    assert len(ews.items()) == 1


def test_eight_threads_across_three_mailboxes_run_concurrently_without_cross_talk(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    accounts = [rig.make_account(f"{name}@example.com") for name in ("alpha", "bravo", "charlie")]
    jobs = [(accounts[n % 3], rig.make_event(id=f"evt-{n}", title=f"Event {n}")) for n in range(8)]
    # Each mailbox connects once, in parallel with the others (no process-wide lock), and the pool sized
    # to the worker threads lets all eight creates be in flight at once. A barrier proves both.
    ews.add_barrier("GetFolder", parties=3)
    ews.add_barrier("CreateItem", parties=8)

    with ThreadPoolExecutor(max_workers=8) as pool:
        refs = list(pool.map(lambda job: provider.upsert(job[0], job[1], rig.make_target(*job)), jobs))

    assert {r["barrier"] for r in ews.requests() if "barrier" in r} == {"met"}
    assert len([r for r in ews.requests() if "barrier" in r]) == 3 + 8
    for (account, event), ref in zip(jobs, refs, strict=True):
        item = ews.item(ref.external_id)
        assert (item["mailbox"], item["subject"]) == (account.address, event.title)
        assert item["extended_properties"]["CalsyncSyncKey"] == rig.make_target(account, event).sync_key
    assert sorted(len(ews.items(a.address)) for a in accounts) == [2, 3, 3]
    assert len(ews.requests("GetFolder")) == 6  # root + calendar, once per mailbox
