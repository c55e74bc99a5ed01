"""The adapter's EWS sessions read the proxy variables once, and still go where the environment says."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from exchangelib import Configuration, Credentials, Version
from exchangelib.protocol import CachingProtocol, Protocol
from exchangelib.version import EXCHANGE_2016

from calsync.core.model.errors import ProviderUnavailable
from calsync.providers.exchange.transport import forget_environment, tune
from calsync_emulators.server import RunningEmulator
from tests.providers.exchange.ews_support import ExchangeRig


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


_ENDPOINT = "http://mail.example.com/EWS/Exchange.asmx"


def _tuned_session(auth_type: str = "basic", endpoint: str = _ENDPOINT) -> requests.Session:
    config = Configuration(service_endpoint=endpoint, credentials=Credentials("CORP\\svc", "pw"), auth_type=auth_type,
                           version=Version(build=EXCHANGE_2016))  # fmt: skip
    protocol = Protocol(config=config)
    tune(protocol)
    session: requests.Session = protocol.create_session()
    return session


def _prepared(session: requests.Session, prepare: Callable[..., Any], **changes: Any) -> tuple[Any, ...]:
    """A request as exchangelib's ``session.post`` builds it (``Session.request``), prepared by ``prepare``."""
    given = {"method": "POST", "url": _ENDPOINT, "headers": {"X-AnchorMailbox": "cfo@example.com"},
             "data": b"<?xml version='1.0'?><s:Envelope/>", **changes}  # fmt: skip
    try:
        p = prepare(session, requests.Request(**given))
    except Exception as exc:  # refused alike
        return ("refused", type(exc), str(exc))
    cookies = sorted((c.name, c.value, c.domain, c.path) for c in p._cookies)
    return p.method, p.url, list(p.headers.items()), p.body, p.hooks, cookies, p._body_position


@pytest.fixture
def library_prepares(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The requests the library's own ``Session.prepare_request`` prepared (the fallback taken)."""
    seen: list[object] = []
    library = requests.Session.prepare_request
    monkeypatch.setattr(requests.Session, "prepare_request", lambda s, r: seen.append(r) or library(s, r))
    return seen


def _session_with(case: str) -> requests.Session:
    session = _tuned_session("NTLM" if case == "ntlm" else "basic")
    if case == "an affinity cookie":
        session.cookies.set("X-BackEndOverrideCookie", "srv1~1", domain="mail.example.com", path="/EWS")
        session.cookies.set("other", "x", domain="elsewhere.example.com")
    return session


_LEAN = {
    "basic": {},
    "ntlm": {},
    "an affinity cookie": {},
    "a header of the session's in another case": {"headers": {"user-agent": "mine", "X-AnchorMailbox": "a@b.c"}},
    "a header the request drops": {"headers": {"Accept-Encoding": None, "X-AnchorMailbox": "a@b.c"}},
    "an idn host and a query": {"url": "http://bücher.example/EWS/Exchange.asmx?a=1 2&b"},
    "no body": {"data": b""},
}


@pytest.mark.parametrize("case", list(_LEAN))
def test_a_tuned_session_prepares_exchangelibs_requests_as_requests_does(
    case: str, library_prepares: list[object]
) -> None:
    session = _session_with(case)
    ours = _prepared(session, lambda s, r: s.prepare_request(r), **_LEAN[case])
    assert library_prepares == []  # prepared here
    assert ours == _prepared(session, requests.Session.prepare_request, **_LEAN[case])
    if case == "an affinity cookie":
        assert ("Cookie", "X-BackEndOverrideCookie=srv1~1") in ours[2]


class _Url:
    """A URL object requests takes (by ``str``) that cannot be a cache key."""

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return _ENDPOINT


_NETRC = "machine mail.example.com login netrc-user password netrc-pw\n"
_FALLBACK: dict[str, dict[str, Any]] = {
    "query parameters": {"params": {"a": "1"}},
    "the request's cookies": {"cookies": {"c": "1"}},
    "the request's auth": {"auth": ("u", "p")},
    "headers as pairs": {"headers": [("X-AnchorMailbox", "a@b.c")]},
    "a url object": {"url": _Url()},
    "the session's parameters": {},
    "the environment trusted": {},
    "another requests": {},
}


@pytest.mark.parametrize("case", list(_FALLBACK))
def test_any_other_request_is_prepared_by_requests(
    case: str, library_prepares: list[object], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    session = _tuned_session()
    if case == "the session's parameters":
        session.params = {"s": "1"}
    if case == "the environment trusted":  # requests then reads netrc credentials for a request without auth
        (tmp_path / "netrc").write_text(_NETRC)
        monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
        session.trust_env, session.auth = True, None
    if case == "another requests":
        monkeypatch.setattr(requests, "__version__", "2.35.0")
    ours = _prepared(session, lambda s, r: s.prepare_request(r), **_FALLBACK[case])
    assert len(library_prepares) == 1
    library_prepares.clear()
    assert ours == _prepared(session, requests.Session.prepare_request, **_FALLBACK[case])


def test_the_adapters_requests_are_prepared_by_the_tuned_session(
    library_prepares: list[object], rig: ExchangeRig
) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple()
    provider.upsert(account, event, target)
    assert [r["operation"] for r in ews.requests()][-2:] == ["FindItem", "CreateItem"]
    assert library_prepares == []


def _adapter_answers(adapter: Any, url: str, proxies: dict[str, str], verify: Any = True) -> tuple[Any, ...]:
    """What an adapter's ``request_url`` and ``get_connection_with_tls_context`` give for a request to ``url``."""
    try:
        request = requests.Request("POST", _ENDPOINT, data=b"<x/>").prepare()
        request.url = url  # as given, even one requests would not prepare
        pool = adapter.get_connection_with_tls_context(request, verify, proxies=proxies, cert=None)
        return adapter.request_url(request, proxies), id(pool), type(pool), pool.host, pool.port
    except Exception as exc:  # refused alike
        return ("refused", type(exc), str(exc))


_ADAPTER_CASES = {
    "no proxies": (_ENDPOINT, {}),
    "https with a port and a query": ("https://mail.example.com:8443/EWS/Exchange.asmx?a=1#f", {}),
    "an idn host": ("http://bücher.example/EWS/Exchange.asmx", {}),
    "a port out of range": ("http://mail.example.com:99999/EWS/Exchange.asmx", {}),
    "a proxy for the host": (_ENDPOINT, {"http://mail.example.com": "http://127.0.0.1:3128"}),
    "a proxy for the scheme, https": ("https://mail.example.com/EWS/Exchange.asmx", {"https": "http://127.0.0.1:3128"}),
}


@pytest.mark.parametrize("case", list(_ADAPTER_CASES))
@pytest.mark.parametrize("version", ["2.34.2", "2.35.0"])
def test_a_tuned_sessions_adapters_answer_as_requests_does(
    case: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    library = requests.adapters.HTTPAdapter
    request_url, connection = library.request_url, library.get_connection_with_tls_context
    # The same adapter without its tuned methods: the same pool manager, so the same pools.
    session = _tuned_session()
    url, proxies = _ADAPTER_CASES[case]
    adapter = session.get_adapter(url)
    untuned = type("Untuned", (), {"request_url": request_url, "get_connection_with_tls_context": connection,
                                   "poolmanager": adapter.poolmanager, "proxy_manager_for": adapter.proxy_manager_for,
                                   "build_connection_pool_key_attributes": adapter.build_connection_pool_key_attributes,
                                   })()  # fmt: skip
    expected = _adapter_answers(untuned, url, proxies)
    calls: list[str] = []
    monkeypatch.setattr(library, "request_url", lambda *a, **k: calls.append("url") or request_url(*a, **k))
    monkeypatch.setattr(library, "get_connection_with_tls_context",
                        lambda *a, **k: calls.append("pool") or connection(*a, **k))  # fmt: skip
    monkeypatch.setattr(requests, "__version__", version)
    assert _adapter_answers(adapter, url, proxies) == expected
    if case == "a port out of range":
        assert expected[:2] == ("refused", requests.exceptions.InvalidURL)
    lean = not proxies and version == "2.34.2"
    assert calls == ([] if lean else ["pool"] if expected[0] == "refused" else ["pool", "url"])


class _OwnAdapter(requests.adapters.HTTPAdapter):
    """An adapter of the deployment's own (exchangelib's ``HTTP_ADAPTER_CLS`` hook): its methods stay its own."""

    def request_url(self, request: Any, proxies: Any) -> str:
        return "own"


def test_an_adapter_of_another_class_keeps_its_methods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Protocol, "HTTP_ADAPTER_CLS", _OwnAdapter)
    adapter = _tuned_session().get_adapter(_ENDPOINT)
    assert type(adapter) is _OwnAdapter
    assert adapter.request_url(requests.Request("POST", _ENDPOINT, data=b"").prepare(), {}) == "own"
