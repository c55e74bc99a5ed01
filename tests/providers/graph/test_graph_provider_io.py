"""The Graph adapter counts every request its client hands to the network (msal's token calls included), a
refused connection too, and none when its own code fails before the first one."""

from __future__ import annotations

import pytest

from calsync.core.model.errors import ProviderUnavailable
from calsync.core.model.provider_io import RequestsSent
from calsync.providers.graph import provider as graph_provider
from calsync_emulators.control import GraphControl
from tests.providers.graph.conftest import MakeAccount, MakeEvent, MakeProvider, target_for
from tests.support import closed_port


def test_every_request_of_a_call_is_counted(
    make_provider: MakeProvider, make_account: MakeAccount, make_event: MakeEvent, graph: GraphControl
) -> None:
    account, event = make_account(), make_event()
    with RequestsSent() as sent:
        make_provider().upsert(account, event, target_for(account, event))  # a token, then the create
    assert sent.count == len(graph.requests()) >= 2


def test_a_refused_connection_counts_as_a_request(
    make_provider: MakeProvider, make_account: MakeAccount, make_event: MakeEvent, graph: GraphControl
) -> None:
    port = closed_port()
    provider = make_provider(graph_api_endpoint=f"https://127.0.0.1:{port}/v1.0/")
    account, event = make_account(), make_event()
    with RequestsSent() as sent, pytest.raises(ProviderUnavailable):
        provider.upsert(account, event, target_for(account, event))
    assert sent.count > len(graph.requests()) >= 1  # the token calls the emulator answered, and the refused ones


def test_our_own_failure_before_the_first_request_counts_none(
    provider: graph_provider.GraphProvider, make_account: MakeAccount, make_event: MakeEvent, graph: GraphControl,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    def broken(*_: object, **__: object) -> dict[str, object]:
        raise OverflowError("date value out of range")

    account, event = make_account(), make_event()
    provider.upsert(account, event, target_for(account, event))  # msal's discovery and token: the app is warm
    before = len(graph.requests())
    monkeypatch.setattr(graph_provider, "event_body", broken)
    later = make_event(id="evt-2")
    with RequestsSent() as sent, pytest.raises(Exception, match="date value out of range"):
        provider.upsert(account, later, target_for(account, later))
    assert sent.count == 0 and len(graph.requests()) == before
