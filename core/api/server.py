"""The listening socket of ``calsync serve``: Nagle's algorithm off for every accepted connection.

asyncio turns on ``TCP_NODELAY`` only for sockets whose ``proto`` is ``IPPROTO_TCP``; a socket made with
``socket.socket(family)`` (uvicorn's ``bind_socket`` for ``--workers`` > 1, or a test's) has ``proto`` 0, so
the headers and the body of an answer, written separately, wait for the client's delayed ACK (tens of
milliseconds per request on Linux: docs/notes/performance.md). Linux hands the listening socket's
``TCP_NODELAY`` on to every connection it accepts, so it is set here once.
"""

from __future__ import annotations

import socket

_BACKLOG = 2048


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket for uvicorn (``port`` 0 picks a free one), inheritable by spawned servers."""
    family, kind, proto, _name, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(address)
    sock.listen(_BACKLOG)
    sock.set_inheritable(True)
    return sock
