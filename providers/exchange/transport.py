"""The requests sessions exchangelib talks EWS through: the environment read once, responses parsed whole, less merged.

Costs of exchangelib 5.6 on requests 2.34, measured with ``benchmarks/adapters.py`` and cProfile (the first
three with one create = FindItem + CreateItem against the EWS emulator, 2026-12-01):

- requests reads the proxy and CA-bundle variables on every request (``trust_env``: two scans of
  ``os.environ`` in ``getproxies_environment`` per request, 12 % of the adapter's CPU). Each session
  of a tuned protocol stops trusting the environment and gets what the environment said instead:
  the proxy requests would choose for each host the session talks to (the EWS endpoint and an OAuth
  token endpoint, ``NO_PROXY`` honoured) and ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``, read once.
- exchangelib parses every response through ``response.iter_content()`` with its default chunk of
  one byte, one generator step per byte (25 % of the adapter's CPU). A response hook makes that
  iterator yield the body in whole chunks; the bytes lxml sees are the same.
- requests merges the session's ``proxies`` and ``params`` into every request, empty or not: two dict copies
  and four runtime ``Protocol`` checks (``SupportsItems``, slow in Python 3.11) per request. An empty one is
  set to None, which requests' ``merge_setting`` answers with the request's own value: Python calls per
  create 2,680 → 2,519 (cProfile), ≈ 80 µs of a request's preparation (260 → 180 µs, a quiet loop; 2026-12-02).
- ``Session.prepare_request`` re-parses and re-encodes the same endpoint URL (with its empty query parameters)
  on every request and merges the headers through ``to_key_val_list``, two runtime ``Protocol`` checks each.
  A tuned session prepares exchangelib's requests (no parameters, cookies or auth of their own, the environment
  not trusted) with requests' own steps, in requests' order, the URL prepared once per endpoint; anything
  else, or another requests than the one compared (``PREPARED_AS``), takes ``Session.prepare_request``. Python
  calls per create 2,187 → 1,899 (cProfile, a loop of creates against the emulator, 2026-12-02); the tests
  compare the prepared requests field by field.
- Every request a tuned protocol's sessions send is counted as it goes out (core/model/provider_io.py): EWS
  calls and the OAuth token fetches alike (exchangelib fetches a token with the session ``raw_session`` just
  made, inside ``create_session``), so a failure before any of them is calsync's own, never the server's.
- Its adapters look the request's URL up in the (empty) proxies twice per request (``select_proxy``: two URL
  parses); with no proxies they take requests' no-proxy branch directly, and any proxies take requests' own
  methods: Python calls per create 1,899 → 1,829 (the same loop; docs/notes/exchange.md, "Create service and
  sessions").
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.cookies import RequestsCookieJar
from requests.exceptions import InvalidURL
from requests.models import PreparedRequest
from requests.sessions import Session, merge_cookies, merge_hooks
from requests.structures import CaseInsensitiveDict
from requests.utils import get_environ_proxies, select_proxy

from calsync.core.model.provider_io import request_sent

_TUNED = "_calsync_tuned"
#: The requests release whose ``Session.prepare_request`` :func:`prepare_request` follows (the tests compare).
PREPARED_AS = "2.34.2"


@functools.cache
def _ca_bundle() -> str | None:
    return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None


@functools.cache
def proxy_for(url: str) -> tuple[str, str | None]:
    """(``scheme://host``, the proxy requests would use for ``url`` per the environment), read once per URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}", select_proxy(url, get_environ_proxies(url))


def forget_environment() -> None:
    """Read the environment again for protocols tuned from now on (tests that change it)."""
    _ca_bundle.cache_clear()
    proxy_for.cache_clear()


def _whole_chunks(response: Any, **_: Any) -> None:
    iter_content = response.iter_content

    def chunks(chunk_size: int | None = None, decode_unicode: bool = False) -> Any:
        return iter_content(chunk_size, decode_unicode)  # requests' own default is one byte

    response.iter_content = chunks


@functools.lru_cache(maxsize=64)
def _prepared_url(url: str) -> str:
    # An invalid URL raises here every time: lru_cache keeps no exceptions.
    prepared = PreparedRequest()
    prepared.prepare_url(url, None)
    return str(prepared.url)


def _lean(session: Any, request: Any) -> bool:
    return (
        requests.__version__ == PREPARED_AS
        and not session.trust_env  # else requests would look for netrc credentials
        and type(request.url) is str  # the prepared URL is kept by it
        and not request.params
        and not session.params
        and type(request.headers) is dict
        and request.cookies is None
        and request.auth is None
    )


def prepare_request(session: Any, request: Any) -> Any:
    """``session.prepare_request(request)``, in requests' steps, for the requests exchangelib sends."""
    if not _lean(session, request):
        return Session.prepare_request(session, request)
    headers = CaseInsensitiveDict(session.headers)  # merge_setting: the session's, then the request's, no Nones
    headers.update(request.headers)
    for name in [k for k, v in headers.items() if v is None]:
        del headers[name]
    prepared = PreparedRequest()
    prepared.prepare_method(request.method)
    prepared.url = _prepared_url(request.url)
    prepared.prepare_headers(headers)
    # requests merges the request's cookies (none: an empty jar) after the session's, into a new jar.
    prepared.prepare_cookies(merge_cookies(RequestsCookieJar(), session.cookies))  # type: ignore[no-untyped-call]
    prepared.prepare_body(request.data, request.files, request.json)
    prepared.prepare_auth(session.auth, request.url)
    prepared.prepare_hooks(merge_hooks(request.hooks, session.hooks))  # type: ignore[no-untyped-call]
    return prepared


def request_url(adapter: Any, request: Any, proxies: Any) -> Any:
    """``adapter.request_url``: with no proxies, requests' answer is the request's path."""
    if proxies or requests.__version__ != PREPARED_AS:
        return HTTPAdapter.request_url(adapter, request, proxies)
    return request.path_url


def connection(adapter: Any, request: Any, verify: Any, proxies: Any = None, cert: Any = None) -> Any:
    """``adapter.get_connection_with_tls_context``: with no proxies, requests' pool from its pool manager."""
    if proxies or requests.__version__ != PREPARED_AS:
        return HTTPAdapter.get_connection_with_tls_context(adapter, request, verify, proxies=proxies, cert=cert)
    try:
        host_params, pool_kwargs = adapter.build_connection_pool_key_attributes(request, verify, cert)
    except ValueError as e:
        raise InvalidURL(e, request=request)  # noqa: B904 (as requests raises it)
    return adapter.poolmanager.connection_from_host(**host_params, pool_kwargs=pool_kwargs)


def counted_send(send: Callable[..., Any], request: Any, **kwargs: Any) -> Any:
    """A session's ``send``, counted as a request handed to the network before it runs."""
    request_sent()
    return send(request, **kwargs)


def tune(protocol: Any) -> None:
    """Make every session the exchangelib ``protocol`` creates from now on read no environment per request,
    and count each request it sends (core/model/provider_io.py).

    Idempotent: protocols are cached process-wide and shared by the accounts of one endpoint and login.
    """
    if getattr(protocol, _TUNED, False):
        return
    urls = (protocol.service_endpoint, getattr(protocol.credentials, "token_url", None))
    # A host without a proxy gets no entry: requests then falls back to the (absent) scheme entries, so no proxy.
    proxies = {origin: proxy for origin, proxy in map(proxy_for, filter(None, urls)) if proxy is not None}
    create = protocol.create_session

    def create_session() -> Any:
        session = create()
        session.trust_env = False
        session.proxies.update(proxies)
        # requests merges a session's proxies and params into every request (copying both dicts); for a None
        # setting it takes the request's own: nothing to merge when the session has none.
        session.proxies = session.proxies or None
        session.params = session.params or None
        if (bundle := _ca_bundle()) is not None and session.verify is True:
            session.verify = bundle
        session.hooks["response"].append(_whole_chunks)
        session.prepare_request = functools.partial(prepare_request, session)
        for adapter in session.adapters.values():
            if type(adapter) is HTTPAdapter:
                adapter.request_url = functools.partial(request_url, adapter)  # type: ignore[method-assign]
                adapter.get_connection_with_tls_context = functools.partial(connection, adapter)  # type: ignore[method-assign]
        return session

    raw = protocol.raw_session

    def raw_session(*args: Any, **kwargs: Any) -> Any:
        # Every session of the protocol starts here, an OAuth one before it fetches its token with it: counted.
        session = raw(*args, **kwargs)
        session.send = functools.partial(counted_send, session.send)
        return session

    protocol.create_session = create_session
    protocol.raw_session = raw_session
    setattr(protocol, _TUNED, True)
