"""The server's listening socket hands TCP_NODELAY to every connection (else ~40 ms delayed-ACK stalls per answer)."""

from __future__ import annotations

import socket

from calsync.core.api.server import listening_socket


def test_accepted_connections_have_nagle_off() -> None:
    with listening_socket("127.0.0.1", 0) as server, socket.create_connection(server.getsockname()[:2]):
        accepted, _address = server.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert server.proto == socket.IPPROTO_TCP
