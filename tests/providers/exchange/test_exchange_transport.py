"""The adapter's EWS sessions read the proxy variables once, and still go where the environment says."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import requests
from exchangelib import Configuration, Credentials, Version
from exchangelib.protocol import CachingProtocol, Protocol
from exchangelib.version import EXCHANGE_2016

from calsync.core.model.errors import ProviderUnavailable
from calsync.providers.exchange import ExchangeProvider
from calsync.providers.exchange.transport import forget_environment, tune
from calsync_emulators.control import EwsControl
from calsync_emulators.server import RunningEmulator
from tests.providers.exchange.ews_support import MakeAccount, MakeEvent, MakeTarget


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Proxy variables this test sets, read afresh: new protocols, and the adapter's reading forgotten."""
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    CachingProtocol.clear_cache()
    forget_environment()
    yield monkeypatch
    CachingProtocol.clear_cache()
    forget_environment()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("bypassed", [False, True])
def test_requests_go_through_the_environments_proxy_unless_no_proxy_names_the_host(
    environment: pytest.MonkeyPatch,
    emulator: RunningEmulator,
    ews: EwsControl,
    provider: ExchangeProvider,
    make_account: MakeAccount,
    make_event: MakeEvent,
    make_target: MakeTarget,
    bypassed: bool,
) -> None:
    environment.setenv("HTTP_PROXY", f"http://127.0.0.1:{_closed_port()}")  # a proxy nobody answers on
    if bypassed:
        environment.setenv("NO_PROXY", "localhost")
    account = make_account(server_url=emulator.url.replace("127.0.0.1", "localhost") + "/EWS/Exchange.asmx")
    event = make_event()
    if bypassed:
        provider.upsert(account, event, make_target(account, event))
        assert [r["operation"] for r in ews.requests()][-2:] == ["FindItem", "CreateItem"]
        return
    with pytest.raises(ProviderUnavailable):
        provider.upsert(account, event, make_target(account, event))
    assert ews.requests() == []  # it tried the proxy, never the emulator
    environment.delenv("HTTP_PROXY")
    with pytest.raises(ProviderUnavailable):
        provider.upsert(account, event, make_target(account, event))  # read once: the process keeps what it read


@pytest.mark.parametrize("proxied", [False, True])
def test_a_session_merges_no_empty_session_settings_per_request(environment: pytest.MonkeyPatch, proxied: bool) -> None:
    if proxied:
        environment.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    config = Configuration(service_endpoint=f"http://mail-{str(proxied).lower()}.example.com/EWS/Exchange.asmx",
                           credentials=Credentials("svc@example.com", "pw"), auth_type="basic",
                           version=Version(build=EXCHANGE_2016))  # fmt: skip
    protocol = Protocol(config=config)
    tune(protocol)
    session = protocol.create_session()
    # requests takes the request's own value for a None session setting: no merge (two dict copies) per request.
    assert session.params is None
    assert session.proxies == ({"http://mail-true.example.com": "http://127.0.0.1:3128"} if proxied else None)
    request = session.prepare_request(requests.Request("POST", config.service_endpoint, data=b"<x/>"))
    assert request.url == config.service_endpoint
    assert session.merge_environment_settings(request.url, {}, None, None, None)["proxies"] == (session.proxies or {})
