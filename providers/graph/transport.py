"""The Graph adapter's ``httpx.Client``: no cookies taken, and its API requests built in httpx's own steps, less merged.

Costs of httpx 0.28 per Graph create (cProfile, 1,000 creates against the emulator, 2026-12-02):

- ``Client._send_single_request`` hands every response to ``self.cookies.extract_cookies``, which wraps the
  response and its request for ``http.cookiejar`` (an ``urllib.request.Request`` with its URL parse) before
  the jar is even asked: ≈ 165 Python calls per create with a jar that takes none. :class:`GraphClient`'s
  ``cookies`` are :class:`NoCookies`, whose ``extract_cookies`` takes nothing at once; its jar is still one
  that takes no cookie, so nothing set by hand is kept from a response either.
- ``Client.build_request`` merges the client's headers into the request's (two ``Headers`` built, the
  defaults' keys searched), parses the URL again, merges the (empty) cookies and parameters, then
  ``Request`` encodes the JSON body and adds ``Host`` and ``Content-*`` through ``setdefault`` and one
  more ``Headers``. :meth:`GraphClient.api_request` builds the same request (same method, URL, header
  list in the same order, body bytes and extensions): the merged headers are kept per (token, URL host,
  extra headers), the body is encoded as httpx's ``encode_json`` encodes it, and the request is built from
  them with ``Request(stream=...)``, httpx's way of taking headers as given; it is then sent with
  ``Client.send``. A request without a JSON body or with query parameters, a URL that is not an absolute
  ``httpx.URL``, any other httpx than the one compared (:data:`PREPARED_AS`) and a client with auth,
  parameters or a base URL of its own take ``Client.request``. The adapter passes an ``httpx.URL`` for its
  creates (POST) only: its PATCH, GET and DELETE requests send a ``str`` URL and so take ``Client.request``
  (a PATCH's ``If-Match`` would otherwise make a kept header set per update).

Every request goes out through :meth:`GraphClient.send` (``Client.request`` ends there, msal's token calls too), which
counts it as handed to the network (core/model/provider_io.py): a failure before any is calsync's own.

Gain (benchmarks/graph_calls.py, cProfile, 1,000 creates, 2026-12-02): 1,752 → 1,585 Python calls per create
for the cookies, 1,585 → 1,393 for the requests (1,421 with ``setdefault`` per request; the merged set now
says once whether it has ``Content-Length`` and ``Content-Type``; docs/notes/exchange.md, "msal and httpx");
the tests compare the lean request with ``build_request``'s field by field and what a transport is handed by
either path.
"""

from __future__ import annotations

import http.client
import http.cookiejar
import json as jsonlib
import threading
import urllib.request
from collections.abc import Mapping
from typing import Any

import httpx

from calsync.core.model.provider_io import request_sent

#: The httpx whose ``build_request`` :meth:`GraphClient.api_request` was compared with (tests).
PREPARED_AS = "0.28.1"
#: Past this many merged header sets (one per token and host) the memo is emptied and filled again.
MEMO_SIZE = 256


class _NoCookieJar(http.cookiejar.CookieJar):
    """A jar that takes no cookies from responses, so none is ever sent back (Graph and Entra need none)."""

    def extract_cookies(self, response: http.client.HTTPResponse, request: urllib.request.Request) -> None:
        """Take none."""


class NoCookies(httpx.Cookies):
    """httpx's cookies on a jar that takes none, not even wrapping the response for it."""

    def extract_cookies(self, response: httpx.Response) -> None:
        """Take none (``Cookies.extract_cookies`` would build urllib wrappers for a jar that takes none)."""


class GraphClient(httpx.Client):
    """An ``httpx.Client`` (msal's too) whose cookies are :class:`NoCookies`, with :meth:`api_request`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._no_cookies = NoCookies(_NoCookieJar())
        self._merged: dict[tuple[bytes, tuple[tuple[str, str], ...]], tuple[httpx.Headers, bool, bool]] = {}
        self._memo_lock = threading.Lock()
        #: Whether :meth:`api_request` may build requests itself: the httpx compared, nothing client-wide to merge.
        self.lean = (httpx.__version__ == PREPARED_AS and self.auth is None and not self.params
                     and self.base_url == httpx.URL())  # fmt: skip

    @property
    def cookies(self) -> httpx.Cookies:
        """No cookies: none is kept from a response, so none is sent."""
        return self._no_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        """Ignored: this client keeps no cookies."""

    @property
    def headers(self) -> httpx.Headers:
        """The client's headers (``Client.headers``)."""
        return self._headers

    @headers.setter
    def headers(self, headers: Any) -> None:
        httpx.Client.headers.fset(self, headers)  # type: ignore[attr-defined]
        if hasattr(self, "_merged"):
            self._merged = {}

    def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        """``Client.send``, counted as a request handed to the network before it runs."""
        request_sent()
        return super().send(request, **kwargs)

    def api_request(
        self,
        method: str,
        url: str | httpx.URL,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str],
    ) -> httpx.Response:
        """``self.request(method, url, json=..., params=..., headers=...)``, built in fewer steps when it can."""
        if not self.lean or json is None or params is not None or not isinstance(url, httpx.URL) or (
                not url.is_absolute_url):  # fmt: skip
            return self.request(method, url, json=json, params=params, headers=headers)
        return self.send(self.build_lean(method, url, json, headers))

    def build_lean(self, method: str, url: httpx.URL, json: Any, headers: Mapping[str, str]) -> httpx.Request:
        """What ``build_request(method, url, json=json, headers=headers)`` builds, for an absolute URL and a body."""
        merged, given_length, given_type = self._merged_for(url, headers)
        body = jsonlib.dumps(json, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        extensions = {"timeout": self.timeout.as_dict()}
        # Request copies the kept headers into its own: the content headers go on that copy.
        request = httpx.Request(method, url, headers=merged, stream=httpx.ByteStream(body), extensions=extensions)
        if not given_length:  # Request._prepare's setdefault, the lookup done once per merged set
            request.headers["Content-Length"] = str(len(body))
        if not given_type:
            request.headers["Content-Type"] = "application/json"
        request.read()
        return request

    def _merged_for(self, url: httpx.URL, headers: Mapping[str, str]) -> tuple[httpx.Headers, bool, bool]:
        """The client's headers merged with ``headers`` (``Headers.update``), ``Host`` first, whether they have
        ``Content-Length`` and ``Content-Type``; kept."""
        key = (url.netloc, tuple(headers.items()))
        kept = self._merged.get(key)
        if kept is None:
            merged = httpx.Headers(self.headers)
            merged.update(headers)
            if "Host" not in merged:
                merged = httpx.Headers([(b"Host", url.netloc), *merged.raw])
            kept = (merged, "Content-Length" in merged, "Content-Type" in merged)
            with self._memo_lock:
                if len(self._merged) >= MEMO_SIZE:
                    self._merged.clear()
                self._merged[key] = kept
        return kept
