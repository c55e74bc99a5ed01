"""GraphClient builds the API requests httpx's ``build_request`` builds, sends the same, and falls back to it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from calsync.providers.graph import transport
from calsync.providers.graph.transport import GraphClient
from tests.support import in_threads

_TOKEN = "Bearer " + "x" * 900
_PREFER = 'IdType="ImmutableId", outlook.timezone="UTC"'
_BODIES: list[Any] = [
    {"subject": "Standup", "body": {"contentType": "text", "content": ""}, "attendees": []},
    {"subject": 'Møde ☕ "quoted" \\ tab\t', "transactionId": "0c5e", "isReminderOn": False, "n": 1.5},
    {"location": {"displayName": "Room 1"}, "start": {"dateTime": "2030-01-02T10:00:00", "timeZone": "UTC"}},
    [],
    {},
]
_URLS = [
    "https://127.0.0.1:8443/v1.0/users/coo@example.com/calendar/events",
    "https://graph.microsoft.com/v1.0/users/a%40b.example/calendars/AAMk%3D/events",
    "https://graph.microsoft.com:443/v1.0/users/a@b.example/events/AAMkAG%2Fx",
    "http://localhost/v1.0/users/u@example.com/calendar/events",
]
_HEADERS: list[dict[str, str]] = [
    {"Authorization": _TOKEN, "Prefer": _PREFER},
    {"Authorization": _TOKEN, "Prefer": _PREFER, "If-Match": 'W/"DwAAABYAAA=="'},
    {"authorization": "Bearer t", "accept": "application/json;odata.metadata=none"},  # overrides a default
    {"Authorization": _TOKEN, "Content-Type": "application/json; charset=utf-8"},  # the caller's is kept
    {"Authorization": "Bearer t", "content-length": "2"},  # kept too, as httpx keeps it
]


@pytest.fixture
def client() -> Iterator[GraphClient]:
    with GraphClient(timeout=7.5) as built:
        yield built


def _same(lean: httpx.Request, library: httpx.Request) -> None:
    assert (lean.method, lean.url, lean.headers.raw, lean.content) == (
        library.method, library.url, library.headers.raw, library.content)  # fmt: skip
    assert lean.extensions == library.extensions
    assert b"".join(lean.stream) == b"".join(library.stream) == library.content  # type: ignore[arg-type]


@pytest.mark.parametrize("body", _BODIES)
@pytest.mark.parametrize("url", _URLS)
@pytest.mark.parametrize("headers", _HEADERS)
@pytest.mark.parametrize("method", ["POST", "PATCH", "patch", "PUT"])
def test_the_lean_request_is_the_one_build_request_builds(
    client: GraphClient, method: str, url: str, headers: dict[str, str], body: Any
) -> None:
    assert client.lean
    parsed = httpx.URL(url)
    library = client.build_request(method, parsed, json=body, headers=headers)
    _same(client.build_lean(method, parsed, body, headers), library)
    again = client.build_lean(method, parsed, body, headers)  # from the memo
    _same(again, client.build_request(method, parsed, json=body, headers=headers))


def test_a_non_json_value_fails_as_httpx_fails(client: GraphClient) -> None:
    url = httpx.URL(_URLS[0])
    for bad in ({"n": float("nan")}, {"o": object()}):
        with pytest.raises(Exception) as library:
            client.build_request("POST", url, json=bad, headers=_HEADERS[0])
        with pytest.raises(type(library.value)):
            client.build_lean("POST", url, bad, _HEADERS[0])


def _recording(seen: list[httpx.Request]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        cookies = [("Set-Cookie", "fpc=abc; Path=/; Secure"), ("Content-Type", "application/json")]
        return httpx.Response(201, headers=cookies, json={"id": "AAMk", "@odata.etag": 'W/"1"'})

    return httpx.MockTransport(answer)


def test_the_transport_is_handed_what_the_library_path_hands_it() -> None:
    seen: list[httpx.Request] = []
    # The library path as the adapter ran it before: httpx.Client on a jar that takes no cookies.
    with GraphClient(timeout=5.0, transport=_recording(seen)) as lean, httpx.Client(
            timeout=5.0, transport=_recording(seen), cookies=transport._NoCookieJar()) as library:  # fmt: skip
        url = httpx.URL(_URLS[0])
        for headers in _HEADERS:
            for body in _BODIES:
                assert lean.api_request("POST", url, json=body, headers=headers).json()["id"] == "AAMk"
                library.request("POST", url, json=body, headers=headers)
                _same(seen[-2], seen[-1])
                assert "cookie" not in seen[-2].headers
        assert not lean.cookies
    with httpx.Client(transport=_recording([])) as keeping:
        keeping.post(_URLS[0], json={})
        assert keeping.cookies  # httpx's own jar keeps Entra's cookies and sends them back


def _spied(client: GraphClient, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []
    real = client.request

    def request(method: str, url: Any, **kwargs: Any) -> httpx.Response:
        calls.append((method, url))
        return real(method, url, **kwargs)

    monkeypatch.setattr(client, "request", request)
    return calls


@pytest.mark.parametrize(
    ("url", "given"),
    [
        (httpx.URL(_URLS[0]), {"params": {"$expand": "x"}}),  # query parameters: httpx merges them
        (_URLS[0], {}),  # a str URL
        (httpx.URL("/v1.0/users/a@b.example/events"), {}),  # a relative URL
        (httpx.URL(_URLS[0]), {"json": None}),  # no body: httpx adds Content-Length: 0 itself
    ],
)
def test_anything_else_takes_client_request(url: Any, given: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    with GraphClient(base_url="https://127.0.0.1:8443", transport=_recording([])) as based:
        assert not based.lean
    with GraphClient(transport=_recording(seen)) as client:
        calls = _spied(client, monkeypatch)
        client.api_request("POST", url, headers=_HEADERS[0], **{"json": {"a": 1}, **given})
        assert calls == [("POST", url)]


@pytest.mark.parametrize(
    "settings",
    [{"auth": ("user", "secret")}, {"params": {"a": "1"}}, {"base_url": "https://graph.microsoft.com/v1.0/"}],
)
def test_a_client_with_something_to_merge_takes_client_request(
    settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with GraphClient(transport=_recording([]), **settings) as client:
        assert not client.lean
        calls = _spied(client, monkeypatch)
        client.api_request("POST", httpx.URL(_URLS[0]), json={"a": 1}, headers=_HEADERS[0])
        assert calls == [("POST", httpx.URL(_URLS[0]))]


def test_another_httpx_takes_client_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httpx, "__version__", "0.29.0")
    with GraphClient(transport=_recording([])) as client:
        assert not client.lean
        calls = _spied(client, monkeypatch)
        client.api_request("POST", httpx.URL(_URLS[0]), json={"a": 1}, headers=_HEADERS[0])
        assert calls == [("POST", httpx.URL(_URLS[0]))]


def test_the_merged_headers_follow_the_clients_and_stay_bounded(client: GraphClient) -> None:
    url = httpx.URL(_URLS[0])
    client.build_lean("POST", url, {}, _HEADERS[0])
    client.headers = {"User-Agent": "calsync-test"}
    assert client.build_lean("POST", url, {}, _HEADERS[0]).headers["user-agent"] == "calsync-test"
    library = client.build_request("POST", url, json={}, headers=_HEADERS[0])
    _same(client.build_lean("POST", url, {}, _HEADERS[0]), library)
    for n in range(transport.MEMO_SIZE + 3):
        token = {"Authorization": f"Bearer {n}"}
        assert client.build_lean("POST", url, {}, token).headers["authorization"] == f"Bearer {n}"
    assert len(client._merged) <= transport.MEMO_SIZE
    for merged, _, _ in client._merged.values():  # a request's own headers never land in the kept set
        assert "content-length" not in merged and "content-type" not in merged


def test_cookies_set_on_the_client_are_not_kept(client: GraphClient) -> None:
    client.cookies = {"a": "b"}
    assert not client.cookies
    assert "cookie" not in client.build_lean("POST", httpx.URL(_URLS[0]), {}, _HEADERS[0]).headers
    assert "cookie" not in client.build_request("GET", _URLS[0]).headers
    assert json.loads(client.build_lean("POST", httpx.URL(_URLS[0]), {"k": "v"}, _HEADERS[0]).content) == {"k": "v"}


def test_threads_sharing_the_client_each_get_their_own_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "MEMO_SIZE", 3)  # the memo is emptied while other threads read it
    url = httpx.URL(_URLS[0])
    failures: list[str] = []
    with GraphClient() as client:

        def work(n: int) -> None:
            headers = {"Authorization": f"Bearer token-{n}", "Prefer": _PREFER}
            for i in range(200):
                lean = client.build_lean("POST", url, {"i": i}, headers)
                library = client.build_request("POST", url, json={"i": i}, headers=headers)
                if (lean.headers.raw, lean.content) != (library.headers.raw, library.content):
                    failures.append(f"thread {n}, request {i}")

        in_threads(work, 8)
    assert not failures
