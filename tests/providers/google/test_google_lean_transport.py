"""providers/google/lean.py's LeanHttp and LeanResponse against httplib2 and http.client themselves: the same
request bytes on the wire, the same responses, the same failures, and the library's own path where they step aside."""

from __future__ import annotations

import email.parser
import http.client
import io
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httplib2
import pytest

from calsync.providers.google import lean
from calsync.providers.google.lean import LeanHttp, LeanResponse, PlainMessage, parse_header_block
from calsync_emulators.graph import self_signed

_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=UTF-8\r\nVary: Origin\r\nVary: X-Origin\r\n"
    b'ETag: "3"\r\nX-Odd:value-without-space  \r\nContent-Length: 11\r\n\r\n{"id": "x"}'
)


class _Recorder(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, answer: Callable[[int], bytes | None], tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer, self.tls = answer, tls
        self.requests: list[bytes] = []

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        return (self.tls.wrap_socket(sock, server_side=True) if self.tls else sock), address


class _Handler(socketserver.StreamRequestHandler):
    server: _Recorder

    def handle(self) -> None:
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = self.rfile.readline()
                if not line:
                    return
                head += line
            length = next(
                (int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), 0
            )
            self.server.requests.append(head + self.rfile.read(length))
            answer = self.server.answer(len(self.server.requests))
            if answer is None:  # hang up without answering
                return
            self.wfile.write(answer)


@pytest.fixture
def recorder() -> Iterator[Callable[..., tuple[_Recorder, str]]]:
    servers: list[_Recorder] = []

    def start(answer: Callable[[int], bytes | None], tls: ssl.SSLContext | None = None) -> tuple[_Recorder, str]:
        server = _Recorder(answer, tls)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _exchange(http: httplib2.Http, base: str) -> list[tuple[int, str, int, dict[str, str], bytes]]:
    calls: list[tuple[str, str, Any, dict[str, Any] | None]] = [
        ("POST", "/calendar/v3/calendars/a%40example.com/events?sendUpdates=all&alt=json", '{"a": 1}',
         {"Content-Type": "application/json", "content-length": "8", "Authorization": "Bearer  tok\tx"}),
        ("POST", "/calendar/v3/calendars/a%40example.com/events?sendUpdates=all&alt=json", '{"a": 22}',
         {"Content-Type": "application/json", "content-length": "9", "Authorization": "Bearer  tok\tx"}),
        ("GET", "/calendar/v3/calendars/caf\u00e9 b/events/e1", None, {"user-agent": "mine", "If-Match": '"2"'}),
        ("PUT", "/calendar/v3/calendars/caf\u00e9 b/events/e1", b"xyz", {b"X-Bytes": b"v"}),
        ("DELETE", "/calendar/v3/calendars/a%40example.com/events/e2", None, None),
    ]  # fmt: skip
    answers = []
    for method, path, body, headers in calls * 2:
        response, content = http.request(base + path, method, body=body, headers=headers)
        fields = {k: v.replace(base, "BASE") for k, v in response.items()}
        answers.append((response.status, response.reason, response.version, fields, content))
    return answers


def test_lean_http_sends_what_httplib2_sends_and_answers_alike(recorder: Any) -> None:
    library, library_url = recorder(lambda n: _ANSWER)
    ours, our_url = recorder(lambda n: _ANSWER)
    expected = _exchange(httplib2.Http(timeout=5), library_url)
    lean_http = LeanHttp(timeout=5)
    assert _exchange(lean_http, our_url) == expected
    port = lambda url: url.rsplit(":", 1)[1].encode()  # noqa: E731
    assert [r.replace(port(our_url), b"PORT") for r in ours.requests] == [
        r.replace(port(library_url), b"PORT") for r in library.requests
    ]
    assert len(ours.requests) == 10
    [connection] = lean_http.connections.values()
    assert connection.response_class is LeanResponse


def test_lean_http_over_tls_sends_what_httplib2_sends(recorder: Any, tmp_path: Path) -> None:
    identity = self_signed(tmp_path)
    library, library_url = recorder(lambda n: _ANSWER, identity.context)
    ours, our_url = recorder(lambda n: _ANSWER, identity.context)
    expected = _exchange(httplib2.Http(timeout=5, ca_certs=str(identity.ca_file)), library_url)
    lean_http = LeanHttp(timeout=5, ca_certs=str(identity.ca_file))
    assert _exchange(lean_http, our_url) == expected
    port = lambda url: url.rsplit(":", 1)[1].encode()  # noqa: E731
    assert [r.replace(port(our_url), b"PORT") for r in ours.requests] == [
        r.replace(port(library_url), b"PORT") for r in library.requests
    ]
    [connection] = lean_http.connections.values()
    assert isinstance(connection, httplib2.HTTPSConnectionWithTimeout)
    assert connection.response_class is LeanResponse


def test_a_known_uri_and_header_pair_are_not_derived_again(recorder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, url = recorder(lambda n: _ANSWER)
    http = LeanHttp(timeout=5)
    derived: list[str] = []
    normalized: list[object] = []
    real_iri2uri, real_normalize = httplib2.iri2uri, httplib2._normalize_headers
    monkeypatch.setattr(httplib2, "iri2uri", lambda uri: derived.append(uri) or real_iri2uri(uri))
    monkeypatch.setattr(httplib2, "_normalize_headers", lambda h: normalized.append(h) or real_normalize(h))
    for _ in range(3):
        http.request(f"{url}/a", "POST", body="{}", headers={"Authorization": "Bearer t"})
    # The first request is httplib2's own (it opens the connection); the second derives and keeps; the third reuses.
    assert derived == [f"{url}/a", f"{url}/a"]
    assert len(normalized) == 2


def test_a_known_header_line_is_encoded_once_and_refused_where_http_client_refuses_it(
    recorder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = recorder(lambda n: _ANSWER)
    client = LeanHttp(timeout=5)
    for _ in range(2):
        client.request(f"{url}/a", "GET", headers={"x-one": "1"})
    [connection] = client.connections.values()
    encoded: list[str] = []
    real = http_client_putheader = http.client.HTTPConnection.putheader
    monkeypatch.setattr(
        http.client.HTTPConnection, "putheader", lambda self, h, *v: encoded.append(h) or real(self, h, *v)
    )
    client.request(f"{url}/a", "GET", headers={"x-one": "1", "x-two": "2"})
    assert encoded == ["x-two"]
    monkeypatch.setattr(http.client.HTTPConnection, "putheader", http_client_putheader)
    for line in [("x-one", "1"), ("x-new", "3")]:
        with pytest.raises(http.client.CannotSendHeader):
            connection.putheader(*line)  # no request started
    connection.putrequest("GET", "/a")
    with pytest.raises(ValueError, match="Invalid header value"):
        connection.putheader("x-bad", "a\r\nb")
    with pytest.raises(ValueError, match="Invalid header value"):
        connection.putheader("x-bad", "a\r\nb")
    connection.close()


def test_memos_are_bounded(recorder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, url = recorder(lambda n: _ANSWER)
    monkeypatch.setattr(lean, "MEMO_SIZE", 4)
    http = LeanHttp(timeout=5)
    for n in range(10):
        http.request(f"{url}/e{n}", "GET", headers={"x-n": str(n)})
    assert 0 < len(http._routes) <= 4
    assert 0 < len(http._pairs) <= 4


@pytest.mark.parametrize(
    "unusual",
    [
        lambda http: setattr(http, "cache", httplib2.FileCache(".cache-never-written")) or {},
        lambda http: setattr(http, "force_exception_to_status_code", True) or {},
        lambda http: {"Cache-Control": "max-age=0"},
        lambda http: {"x-n": b"1"},
    ],
    ids=["cache", "exceptions as statuses", "cache-control", "a header that is no str"],
)
def test_unusual_requests_go_through_httplib2_itself(
    recorder: Any, monkeypatch: pytest.MonkeyPatch, unusual: Callable[[LeanHttp], dict[str, Any]], tmp_path: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    _, url = recorder(lambda n: _ANSWER)
    http = LeanHttp(timeout=5)
    http.request(f"{url}/warm", "POST", body="{}")
    library: list[str] = []
    real = httplib2.Http.request
    monkeypatch.setattr(
        httplib2.Http, "request", lambda self, uri, *a, **k: library.append(uri) or real(self, uri, *a, **k)
    )
    headers = unusual(http)
    http.request(f"{url}/x", "POST", body="{}", headers=headers)
    assert library == [f"{url}/x"]
    library.clear()
    http.request(f"{url}/x", "POST", body="{}", headers={})
    assert library == ([] if not (http.cache or http.force_exception_to_status_code) else [f"{url}/x"])


def test_a_timeout_drops_the_connection_as_httplib2_does(recorder: Any) -> None:
    gate = threading.Event()

    def answer(n: int) -> bytes | None:
        if n == 2:
            gate.wait(5)
        return _ANSWER

    _, url = recorder(answer)
    http = LeanHttp(timeout=0.3)
    http.request(f"{url}/a", "GET")
    [connection] = http.connections.values()
    with pytest.raises(TimeoutError):
        http.request(f"{url}/a", "GET")
    gate.set()
    assert http.connections == {}
    assert connection.sock is None


def test_a_dropped_kept_alive_connection_is_reopened_and_the_request_sent_again(recorder: Any) -> None:
    server, url = recorder(lambda n: None if n == 2 else _ANSWER)
    http = LeanHttp(timeout=5)
    http.request(f"{url}/a", "POST", body="1")
    response, content = http.request(f"{url}/a", "POST", body="2")
    assert (response.status, content) == (200, b'{"id": "x"}')
    assert [r.rsplit(b"\r\n", 1)[1] for r in server.requests] == [b"1", b"2", b"2"]  # httplib2's resend, as documented


# --- header blocks and responses --------------------------------------------------------------------------


_BLOCKS = [
    b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n",
    b"Vary: Origin\r\nvary: X-Origin\r\nX-Empty:\r\nX-Tight:v\r\nX-Pad: \t v \t\r\n\r\n",
    b'X-Latin: caf\xe9\r\nETag: "1"\r\n\r\n',
    b"\r\n",
    b"X-Folded: a\r\n  b\r\nNext: c\r\n\r\n",
    b"No colon here\r\nX-After: 1\r\n\r\n",
    b": empty name\r\nX-After: 1\r\n\r\n",
    b"X-Bare: lf\nX-After: 1\n\n",
    b"X-Cut: eof\r\n",
    b"Content-Type: multipart/mixed; boundary=x\r\n\r\n",
    b"Content-Type: message/rfc822\r\n\r\n",
    b"From nobody\r\nX-After: 1\r\n\r\n",
    b"X-Cr: a\rb\r\n\r\n",
    b"X-Name : spaced\r\n\r\n",
]


@pytest.mark.parametrize("block", _BLOCKS)
def test_header_blocks_parse_as_the_email_parser_parses_them(block: bytes) -> None:
    lines = io.BytesIO(block).readlines()
    ours = parse_header_block(lines)
    theirs = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(block.decode("iso-8859-1"))
    assert ours.items() == theirs.items()
    assert ours.keys() == theirs.keys()
    for name in {*theirs.keys(), "absent", "CONTENT-TYPE"}:
        assert ours.get(name) == theirs.get(name)
        assert ours.get_all(name) == theirs.get_all(name)
    payload = lambda m: [p.items() for p in m.get_payload()] if m.is_multipart() else m.get_payload()  # noqa: E731
    assert (payload(ours), len(ours.defects)) == (payload(theirs), len(theirs.defects))


def test_plain_blocks_skip_the_email_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = [b for b in _BLOCKS[:4]]
    monkeypatch.setattr(email.parser.Parser, "parsestr", lambda *a, **k: pytest.fail("the email parser ran"))
    for block in fast:
        assert isinstance(parse_header_block(io.BytesIO(block).readlines()), PlainMessage)


def test_plain_message_fetches_non_ascii_values_through_the_policy() -> None:
    message = PlainMessage()
    message.set_raw("X-Surrogate", "a\udcff")
    message.set_raw("X-Plain", "b")
    reference = http.client.HTTPMessage()
    reference.set_raw("X-Surrogate", "a\udcff")
    reference.set_raw("X-Plain", "b")
    assert [str(v) for _, v in message.items()] == [str(v) for _, v in reference.items()]
    assert type(message.get("x-surrogate")) is type(reference.get("x-surrogate"))
    assert message.get("x-plain") == "b"


class _Socket:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(io.BytesIO(self.data))


_RESPONSES = [
    _ANSWER,
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx",
    b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
    b"HTTP/1.0 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 1\r\n\r\nx",
    b"HTTP/1.1 200 OK\r\n\r\nuntil close",
    b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\nX-Skip: 1\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: -4\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: many\r\nX-Folded: a\r\n b\r\n\r\nrest",
    b"HTTP/1.1 410 Gone \r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
]


@pytest.mark.parametrize("raw", _RESPONSES)
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_lean_response_begins_as_http_client_does(raw: bytes, method: str) -> None:
    def read(kind: type[http.client.HTTPResponse]) -> tuple[object, ...]:
        response = kind(_Socket(raw), method=method)  # type: ignore[arg-type]
        response.begin()
        fields = (response.status, response.reason, response.version, response.chunked, response.length)
        return (*fields, response.will_close, response.getheaders(), response.read())

    assert read(LeanResponse) == read(http.client.HTTPResponse)


def test_lean_response_refuses_an_unknown_protocol_as_http_client_does() -> None:
    for kind in (LeanResponse, http.client.HTTPResponse):
        with pytest.raises(http.client.UnknownProtocol):
            kind(_Socket(b"HTTP/2.0 200 OK\r\n\r\n"), method="GET").begin()  # type: ignore[arg-type]


def test_lean_response_leaves_begin_to_http_client_without_its_header_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean, "_read_headers", None)
    response = LeanResponse(_Socket(_ANSWER), method="GET")  # type: ignore[arg-type]
    response.begin()
    assert not isinstance(response.msg, PlainMessage)
    assert response.getheader("etag") == '"3"'


def test_the_header_reader_is_used_only_on_the_pythons_whose_begin_it_follows() -> None:
    assert lean.headers_reader((3, 11, 7), http.client) is lean.headers_reader((3, 13, 0), http.client) is not None
    for other in ((3, 10, 14), (3, 14, 0), (4, 0)):
        assert lean.headers_reader(other, http.client) is None
    assert lean.headers_reader((3, 12, 1), object()) is None


def test_lean_response_leaves_begin_to_http_client_when_debugging(capsys: pytest.CaptureFixture[str]) -> None:
    response = LeanResponse(_Socket(_ANSWER), debuglevel=1, method="GET")  # type: ignore[arg-type]
    response.begin()
    assert 'header: ETag: "3"' in capsys.readouterr().out


def test_socket_timeout_is_the_builtin_timeout() -> None:
    assert socket.timeout is TimeoutError  # what classification's "timeout" row catches
