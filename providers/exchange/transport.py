"""The HTTP adapter of every session exchangelib opens, given to it through its documented hook
``BaseProtocol.HTTP_ADAPTER_CLS`` (providers/exchange/provider.py): exchangelib mounts one on each session, for
EWS calls, OAuth token fetches and autodiscover's requests alike.

- Each request is counted as it goes out (core/model/provider_io.py), just before requests' own ``send``, so a
  refused connection counts and a failure before any request is calsync's own, never the server's.
- The proxy for a host is read from the environment once per process (``HTTP(S)_PROXY``, ``ALL_PROXY``,
  ``NO_PROXY``, as requests reads them), and replaces what requests read for the request: a worker keeps going
  where it went when the environment changes under it. Setting proxies in the adapter's ``send`` is
  exchangelib's documented way to choose them.
- A response read whole (every EWS call: exchangelib never asks for a stream) is handed to exchangelib with
  ``iter_content`` defaulting to chunks of :data:`READ_CHUNK` bytes: exchangelib 5.6 parses each SOAP response
  from ``response.iter_content()``, whose default in requests is one byte per step, which was three quarters of
  the CPU of a full EWS read-back (1.7 ms per calendar item, docs/notes/drift.md). A caller naming its chunk size
  gets that size.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
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


READ_CHUNK = 64 * 1024


class CountingAdapter(HTTPAdapter):
    """requests' ``HTTPAdapter`` that counts each request and sends it through the proxy read once for its host."""

    def send(self, request: PreparedRequest, *args: Any, **kwargs: Any) -> Response:
        """``HTTPAdapter.send``, counted, with the proxies of :func:`proxies_for`; a response read whole is iterated
        in chunks of :data:`READ_CHUNK` by default (module docstring)."""
        request_sent()
        parts = urlsplit(request.url or "")
        kwargs["proxies"] = proxies_for(f"{parts.scheme}://{parts.netloc}")
        response = super().send(request, *args, **kwargs)
        if not kwargs.get("stream", args[0] if args else False):
            read = response.iter_content

            def iter_content(chunk_size: int | None = READ_CHUNK, decode_unicode: bool = False) -> Iterator[Any]:
                return read(chunk_size, decode_unicode)

            response.iter_content = iter_content  # type: ignore[method-assign]
        return response
