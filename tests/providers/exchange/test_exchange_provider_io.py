"""The EWS adapter counts every request its sessions hand to the network (OAuth token fetches included), a
refused connection too, and none when its own code fails before the first one."""

from __future__ import annotations

import pytest

from calsync.core.model.errors import ProviderUnavailable
from calsync.core.model.provider_io import RequestsSent
from calsync.providers.exchange import provider as exchange_provider
from tests.providers.exchange.ews_support import ExchangeRig
from tests.support import closed_port


@pytest.mark.parametrize("auth_type", ["basic", "oauth2"])
def test_every_request_of_a_call_is_counted(rig: ExchangeRig, auth_type: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")  # the emulator's token endpoint is plain http
    access = "impersonation" if auth_type == "basic" else None
    account = rig.make_account(f"{auth_type}@example.com", auth_type=auth_type, access_type=access)
    account, event, target = rig.triple(account)
    with RequestsSent() as sent:
        rig.provider.upsert(account, event, target)  # (a token,) the calendar's GetFolder(s), the create
    assert sent.count == len(rig.ews.requests()) >= 2


def test_a_refused_connection_counts_as_a_request(rig: ExchangeRig) -> None:
    port = closed_port()
    account, event, target = rig.triple(rig.make_account(server_url=f"http://127.0.0.1:{port}/EWS/Exchange.asmx"))
    with RequestsSent() as sent, pytest.raises(ProviderUnavailable):
        rig.provider.upsert(account, event, target)
    assert sent.count >= 1


def test_our_own_failure_before_the_first_request_counts_none(
    rig: ExchangeRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> dict[str, object]:
        raise OverflowError("date value out of range")

    monkeypatch.setattr(exchange_provider, "item_fields", broken)
    account, event, target = rig.triple()
    with RequestsSent() as sent, pytest.raises(OverflowError):
        rig.provider.upsert(account, event, target)
    assert sent.count == 0 and rig.ews.requests() == []
