"""The adapter's EWS sessions read the proxy variables once, and still go where the environment says."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from exchangelib.protocol import CachingProtocol

from calsync.core.model.errors import ProviderUnavailable
from calsync.providers.exchange.transport import proxies_for
from calsync_emulators.server import RunningEmulator
from tests.providers.exchange.ews_support import ExchangeRig


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Proxy variables this test sets, read afresh: new protocols, and the adapter's reading forgotten."""
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    CachingProtocol.clear_cache()
    proxies_for.cache_clear()
    yield monkeypatch
    CachingProtocol.clear_cache()
    proxies_for.cache_clear()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("bypassed", [False, True])
def test_requests_go_through_the_environments_proxy_unless_no_proxy_names_the_host(
    environment: pytest.MonkeyPatch, emulator: RunningEmulator, rig: ExchangeRig, bypassed: bool
) -> None:
    provider, ews = rig.provider, rig.ews
    environment.setenv("HTTP_PROXY", f"http://127.0.0.1:{_closed_port()}")  # a proxy nobody answers on
    if bypassed:
        environment.setenv("NO_PROXY", "localhost")
    account = rig.make_account(server_url=emulator.url.replace("127.0.0.1", "localhost") + "/EWS/Exchange.asmx")
    _, event, target = rig.triple(account)
    if bypassed:
        provider.upsert(account, event, target)
        assert [r["operation"] for r in ews.requests()][-2:] == ["FindItem", "CreateItem"]
        return
    with pytest.raises(ProviderUnavailable):
        provider.upsert(account, event, target)
    assert ews.requests() == []  # it tried the proxy, never the emulator
    environment.delenv("HTTP_PROXY")
    with pytest.raises(ProviderUnavailable):
        provider.upsert(account, event, target)  # read once: the process keeps what it read
