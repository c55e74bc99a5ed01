"""Whether a provider call reached the provider: each adapter's transport says so as a request goes out.

A failure before any request was handed to the network is calsync's own (a bug, bad content, our store),
never the provider's: it must not count toward a circuit breaker or an outage excuse, and the same one
twice in a row is dead-lettered as a worker bug instead of walking the retry schedule
(docs/notes/traffic.md, "Whose failure is it").

"Handed to the network" is each adapter's last step before the socket, called just before it runs, so a
connection refused or a timeout counts as a request (the provider, or the way to it, failed):

- Google: the worker thread's ``httplib2.Http.request`` (``SendingHttp``, providers/google/provider.py), which
  the API call and google-auth's token refresh both go through;
- EWS: the ``send`` of the requests adapter exchangelib mounts on each of its sessions (providers/exchange/transport.py:
  its token fetches included), and an autodiscover lookup before the first request (providers/exchange/);
- Graph: the ``request`` event hook of the httpx client of the API calls and msal's token calls (providers/graph/);
- memory: each write, which stands for the provider's answer (its faults included).

The traffic gate (core/traffic/gate.py) enters the delivery's :class:`RequestsSent` around the provider
call; the adapters, which only import this model layer, call :func:`request_sent`. Each worker thread runs
one delivery at a time and the adapters' libraries send on the calling thread, so a context variable is
what ties a request to its delivery.
"""

from __future__ import annotations

import contextvars

_counting: contextvars.ContextVar[RequestsSent | None] = contextvars.ContextVar("calsync_requests", default=None)


class RequestsSent:
    """How many requests one delivery handed to its provider; while entered, the one this thread counts into."""

    __slots__ = ("_token", "count")

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> RequestsSent:
        self._token = _counting.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _counting.reset(self._token)


def request_sent() -> None:
    """An adapter's transport hands a request to the network now (called before it does, so a refusal counts)."""
    counting = _counting.get()
    if counting is not None:
        counting.count += 1
