"""The lookup before a create: skipped only when the target says no create was ever sent, counted at the emulator."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from calsync.core.model.calendar import needs_create_marker
from calsync.core.model.errors import ProviderUnavailable
from calsync.providers.exchange.provider import ExchangeProvider
from tests.providers.exchange.ews_support import ExchangeRig


def test_the_adapter_asks_the_worker_for_the_marker(provider: ExchangeProvider) -> None:
    assert needs_create_marker(provider)


def test_a_first_create_sends_exactly_one_request(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple(create_attempted=False)
    provider.verify(account)  # the mailbox's one GetFolder, once per process
    since = len(ews.requests())

    ref = provider.upsert(account, event, target)

    assert [r["operation"] for r in ews.requests()[since:]] == ["CreateItem"]
    [item] = ews.items()
    assert item["id"] == ref.external_id


@pytest.mark.parametrize("create_attempted", [True, None])  # None: a Target built without saying
def test_a_create_that_may_have_been_sent_before_looks_up_first(
    rig: ExchangeRig, create_attempted: bool | None
) -> None:
    provider, ews = rig.provider, rig.ews
    given: dict[str, Any] = {} if create_attempted is None else {"create_attempted": create_attempted}
    account, event, target = rig.triple(**given)
    provider.verify(account)
    since = len(ews.requests())

    provider.upsert(account, event, target)

    assert [r["operation"] for r in ews.requests()[since:]] == ["FindItem", "CreateItem"]


def test_a_create_after_an_attempt_whose_response_was_lost_adopts_the_item(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, first = rig.triple(create_attempted=False)
    ews.add_fault(operation="CreateItem", after=True, drop=True, times=1)  # created, the answer lost

    with pytest.raises(ProviderUnavailable):
        provider.upsert(account, event, first)
    assert len(ews.items()) == 1

    # The worker committed the marker before the first attempt, so the retry's target says a create may have gone.
    newer = dataclasses.replace(event, version=2, title="Standup v2")
    ref = provider.upsert(account, newer, dataclasses.replace(first, create_attempted=True))

    [item] = ews.items()
    assert (item["id"], item["change_key"], item["subject"]) == (ref.external_id, ref.etag, "Standup v2")
    assert [r["operation"] for r in ews.requests()][-2:] == ["FindItem", "UpdateItem"]
    assert len(ews.requests("CreateItem")) == 1
