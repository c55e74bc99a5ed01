"""The HTTP adapter of every session exchangelib opens, given to it through its documented hook
``BaseProtocol.HTTP_ADAPTER_CLS`` (providers/exchange/provider.py): exchangelib mounts one on each session, for
EWS calls, OAuth token fetches and autodiscover's requests alike.

- Each request is counted as it goes out (core/model/provider_io.py), just before requests' own ``send``, so a
  refused connection counts and a failure before any request is calsync's own, never the server's.
- The proxy for a host is read from the environment once per process (``HTTP(S)_PROXY``, ``ALL_PROXY``,
  ``NO_PROXY``, as requests reads them), and replaces what requests read for the request: a worker keeps going
  where it went when the environment changes under it. Setting proxies in the adapter's ``send`` is
  exchangelib's documented way to choose them.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlsplit

from requests import PreparedRequest, Response
from requests.adapters import HTTPAdapter
from requests.utils import get_environ_proxies, select_proxy

from calsync.core.model.provider_io import request_sent


@functools.lru_cache(maxsize=256)
def proxies_for(origin: str) -> dict[str, str]:
    """The proxy requests would choose for ``origin`` (``scheme://host[:port]``) per the environment, read once."""
    proxy = select_proxy(origin, get_environ_proxies(origin))
    return {"all": proxy} if proxy else {}


class CountingAdapter(HTTPAdapter):
    """requests' ``HTTPAdapter`` that counts each request and sends it through the proxy read once for its host."""

    def send(self, request: PreparedRequest, *args: Any, **kwargs: Any) -> Response:
        """``HTTPAdapter.send``, counted, with the proxies of :func:`proxies_for`."""
        request_sent()
        parts = urlsplit(request.url or "")
        kwargs["proxies"] = proxies_for(f"{parts.scheme}://{parts.netloc}")
        return super().send(request, *args, **kwargs)
