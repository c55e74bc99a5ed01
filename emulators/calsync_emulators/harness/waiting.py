"""Free loopback ports and condition waits."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Callable[[], T], *, timeout: float = 30, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; raise AssertionError after ``timeout`` seconds.

    An AssertionError, so that a test using it fails (rather than errors) when the condition never comes.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
