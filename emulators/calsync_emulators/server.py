"""A keep-alive HTTP/1.1 server that hosts one emulator app, its request log and its fault rules.

Every emulator gets the same control API under ``/_emulator/``:

- ``POST /_emulator/reset``: forget all state, rules and the request log;
- ``GET /_emulator/requests``: the request log, ``[{"method", "path", "status", ...}]`` in arrival order
  (the newest ``REQUEST_LOG_LIMIT`` requests: an emulator serving a long benchmark must not grow forever)
  (``status`` is null for a dropped connection; apps may add fields);
- ``GET /_emulator/requests/count``: ``{"total", "failed"}``, every request logged since the reset, however
  many the log still holds (``failed``: not answered 2xx), for benchmarks counting requests per job;
- ``POST /_emulator/faults`` (a :class:`FaultRule` as JSON), ``GET`` lists them, ``DELETE`` clears them;
- anything else under ``/_emulator/`` goes to :meth:`EmulatorApp.control`.

With a TLS context (``tls=``) the same port also speaks https: a connection whose first byte is a TLS
handshake is wrapped, any other is served as plain HTTP (so EWS over http and Entra over https share it).

Responses always carry ``Content-Length`` and never ``Connection: close``: exchangelib and httplib2
reuse connections and misbehave when a server closes them on errors.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import json
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import ValidationError

from calsync_emulators.faults import FaultRule, FaultRules

CONTROL_PREFIX = "/_emulator/"
REQUEST_LOG_LIMIT = 50_000  # requests an emulator remembers (the newest), each a few hundred bytes


@dataclass(frozen=True)
class Request:
    """An HTTP request as the emulator app sees it."""

    method: str
    raw_path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes

    @property
    def path(self) -> str:
        """The path with percent-escapes decoded (split ``raw_path`` first when segments may hold '/')."""
        return unquote(self.raw_path)

    def json(self) -> Any:
        """The body parsed as JSON (None when empty)."""
        return json.loads(self.body) if self.body else None

    def header(self, name: str) -> str | None:
        """A header by case-insensitive name."""
        return self.headers.get(name.lower())


@dataclass
class Response:
    """What the app answers; ``log`` adds fields to this request's log entry."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    log: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> Response:
        """A JSON response."""
        body = json.dumps(payload).encode()
        return cls(status, body, {"Content-Type": "application/json; charset=UTF-8", **(headers or {})})


class EmulatorApp(abc.ABC):
    """Base of an emulator: subclasses implement :meth:`handle` and :meth:`render_fault`."""

    rule_type: type[FaultRule] = FaultRule

    def __init__(self) -> None:
        self.rules = FaultRules(self.rule_type)

    @abc.abstractmethod
    def handle(self, request: Request) -> Response:
        """Serve one API request."""

    @abc.abstractmethod
    def render_fault(self, rule: FaultRule, request: Request) -> Response:
        """The error response a fault rule produces, in the provider's own wire format."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget all provider state (the server clears rules and the log itself)."""

    def control(self, request: Request) -> Response | None:
        """App-specific control routes under /_emulator/; None means not found."""
        return None

    def concurrency_key(self, request: Request) -> str | None:
        """Whose requests are counted together in flight (a calendar, a mailbox); None: not counted."""
        return None


class _Dropped(Exception):
    """Raised inside the handler to close the connection without writing a response."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; without this, Nagle + delayed ACK add ~40 ms to every response.
    disable_nagle_algorithm = True
    server: EmulatorHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's stderr access log; the request log is served over HTTP instead."""

    def _read_request(self) -> Request:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        return Request(self.command, split.path, parse_qs(split.query, keep_blank_values=True), headers, body)

    def _write(self, response: Response) -> None:
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _dispatch(self) -> None:
        request = self._read_request()
        if request.raw_path.startswith(CONTROL_PREFIX):
            self._write(self.server.control(request))
            return
        try:
            response = self.server.serve(request)
        except _Dropped:
            self._drop()
            return
        self._write(response)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch


class EmulatorHTTPServer(ThreadingHTTPServer):
    """Routes requests to the app through the fault rules and records them."""

    daemon_threads = True
    # socketserver listens with a backlog of 5: a burst of worker threads connecting at once would see SYNs
    # dropped and retried a second later.
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, app: EmulatorApp, address: tuple[str, int], tls: ssl.SSLContext | None = None) -> None:
        super().__init__(address, _Handler)
        self.app = app
        self.tls = tls
        self._log: collections.deque[dict[str, Any]] = collections.deque(maxlen=REQUEST_LOG_LIMIT)
        self._log_lock = threading.Lock()
        self._counts = {"total": 0, "failed": 0}
        self._in_flight: dict[str, int] = {}
        self._highest: dict[str, int] = {}

    @property
    def url(self) -> str:
        """Base URL clients should use, e.g. ``http://127.0.0.1:8123``."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def https_url(self) -> str:
        """The same port over TLS (only with a TLS context)."""
        return self.url.replace("http://", "https://", 1)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """On the connection's own thread: wrap it in TLS when it starts with a handshake record."""
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            if request.recv(1, socket.MSG_PEEK) != b"\x16":
                super().finish_request(request, client_address)
                return
            wrapped = self.tls.wrap_socket(request, server_side=True)  # takes over the descriptor
        except (OSError, ssl.SSLError):
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            with contextlib.suppress(OSError):
                wrapped.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that dropped its connection (a worker stopping) is no error of ours: no traceback for it."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def record(self, request: Request, status: int | None, extra: Mapping[str, Any] | None = None) -> None:
        """Append one entry to the request log."""
        entry = {"method": request.method, "path": request.path, "status": status, **(extra or {})}
        with self._log_lock:
            self._log.append(entry)
            self._counts["total"] += 1
            self._counts["failed"] += status is None or not 200 <= status < 300

    def requests(self) -> list[dict[str, Any]]:
        """A copy of the request log."""
        with self._log_lock:
            return list(self._log)

    def serve(self, request: Request) -> Response:
        """Apply a matching fault rule around the app's own handling, counting requests in flight per key."""
        key = self.app.concurrency_key(request)
        if key is None:
            return self._serve(request)
        with self._log_lock:
            now = self._in_flight[key] = self._in_flight.get(key, 0) + 1
            self._highest[key] = max(self._highest.get(key, 0), now)
        try:
            return self._serve(request)
        finally:
            with self._log_lock:
                self._in_flight[key] -= 1

    def _serve(self, request: Request) -> Response:
        rule = self.app.rules.take(request.method, request.path, request)
        if rule is not None and rule.delay_ms:
            time.sleep(rule.delay_ms / 1000)
        if rule is None or not rule.breaks_response:
            response = self.app.handle(request)
            self.record(request, response.status, response.log)
            return response
        applied: dict[str, Any] = {}
        if rule.after:
            applied = self.app.handle(request).log
        if rule.drop:
            self.record(request, None, {**applied, "fault": "drop"})
            raise _Dropped
        response = self.app.render_fault(rule, request)
        self.record(request, response.status, {**applied, **response.log, "fault": rule.reason or "status"})
        return response

    def control(self, request: Request) -> Response:
        """The shared control API; unknown routes go to the app."""
        route = (request.method, request.raw_path[len(CONTROL_PREFIX) :].rstrip("/"))
        if route == ("POST", "reset"):
            self.app.rules.clear()
            self.app.reset()
            with self._log_lock:
                self._log.clear()
                self._highest.clear()
                self._counts = dict.fromkeys(self._counts, 0)
            return Response.json(200, {"reset": True})
        if route == ("GET", "requests"):
            return Response.json(200, self.requests())
        if route == ("GET", "requests/count"):
            with self._log_lock:
                return Response.json(200, dict(self._counts))
        if route == ("GET", "concurrency"):
            with self._log_lock:
                return Response.json(200, {"highest": dict(self._highest)})
        if route == ("GET", "faults"):
            return Response.json(200, self.app.rules.snapshot())
        if route == ("DELETE", "faults"):
            self.app.rules.clear()
            return Response.json(200, {"cleared": True})
        if route == ("POST", "faults"):
            try:
                rule = self.app.rules.add(request.json() or {})
            except (ValidationError, ValueError) as exc:
                return Response.json(400, {"error": str(exc)})
            return Response.json(201, rule.model_dump(exclude_defaults=True))
        answer = self.app.control(request)
        return answer if answer is not None else Response.json(404, {"error": f"no control route {route}"})


class RunningEmulator:
    """An emulator serving on a background thread (pytest fixtures, the demo)."""

    def __init__(
        self, app: EmulatorApp, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.app = app
        self.server = EmulatorHTTPServer(app, (host, port), tls)
        self._thread = threading.Thread(target=self.server.serve_forever, name="emulator", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """Base URL of the emulator."""
        return self.server.url

    def stop(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> RunningEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(
    app: EmulatorApp,
    host: str,
    port: int,
    announce: Callable[[str], None] | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Serve in the foreground until interrupted (``calsync emulator ...``); ``announce`` gets the bound URL."""
    server = EmulatorHTTPServer(app, (host, port), tls)
    if announce is not None:
        announce(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
