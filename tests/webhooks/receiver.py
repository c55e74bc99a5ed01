"""A real webhook receiver for the tests: a small HTTP server that verifies every request with the
``standardwebhooks`` package (an implementation we did not write) and answers as the test scripts it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    """One request as the receiver saw it."""

    headers: dict[str, str]
    body: bytes
    verified_by: list[str]  # the secrets that verified it
    payload: Any
    status: int

    @property
    def webhook_id(self) -> str:
        """The ``webhook-id`` header."""
        return self.headers["webhook-id"]


@dataclass
class Receiver:
    """Answers with ``answer(n)`` (n = 1 for the first request); ``secrets`` are tried one by one."""

    secrets: list[str] = field(default_factory=list)
    answer: Callable[[int], int | tuple[int, dict[str, str], bytes]] = lambda n: 200
    delay: float = 0.0
    received: list[Received] = field(default_factory=list)
    url: str = ""

    def verified(self) -> list[Received]:
        """Requests that at least one known secret verified."""
        return [r for r in self.received if r.verified_by]

    def ids(self) -> list[str]:
        """The ``webhook-id`` of every request, in arrival order."""
        return [r.webhook_id for r in self.received]


def _handler(receiver: Receiver, lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            verified, payload = [], None
            for secret in receiver.secrets:
                try:
                    payload = Webhook(secret).verify(body, headers)
                    verified.append(secret)
                except WebhookVerificationError:
                    pass
            with lock:
                n = len(receiver.received) + 1
                scripted = receiver.answer(n)
                status, extra, text = scripted if isinstance(scripted, tuple) else (scripted, {}, b"")
                receiver.received.append(Received(headers, body, verified, payload, status))
            if receiver.delay:
                time.sleep(receiver.delay)
            try:
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a timeout under test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def serve(receiver: Receiver) -> Iterator[Receiver]:
    """Run the receiver on 127.0.0.1 while the generator is open (a fixture body)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver, threading.Lock()))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
