"""The adapter's EWS sessions read the proxy variables once, and still go where the environment says; a response
read whole is iterated in chunks, not byte by byte."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from exchangelib.protocol import CachingProtocol

from calsync.core.model.errors import ProviderUnavailable
from calsync.providers.exchange.transport import READ_CHUNK, CountingAdapter, proxies_for
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


BODY = b"<x>" + b"a" * 200_000 + b"</x>"


class _Large(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


def test_a_response_read_whole_is_iterated_in_chunks_a_stream_as_requests_does(environment: pytest.MonkeyPatch) -> None:
    # exchangelib parses every response from iter_content() (requests' default: one byte per step).
    with ThreadingHTTPServer(("127.0.0.1", 0), _Large) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with requests.Session() as session:
                session.mount("http://", CountingAdapter())
                url = f"http://127.0.0.1:{server.server_port}/"
                whole = session.get(url)
                streamed = session.get(url, stream=True)
                first = next(streamed.iter_content())
                streamed.close()
        finally:
            server.shutdown()
    chunks = list(whole.iter_content())
    assert b"".join(chunks) == BODY and len(chunks) == -(-len(BODY) // READ_CHUNK)
    assert len(list(whole.iter_content(10_000))) == 21  # a size the caller names is kept
    assert len(first) == 1  # a stream keeps requests' default
