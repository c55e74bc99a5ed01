"""The SSRF-safe HTTP client of webhook deliveries: resolve, check every address, connect to the checked one.

A receiver's host is resolved for every attempt and each address it resolves to is checked
(:func:`~core.webhooks.model.refused_address`): one refused address refuses the URL. The request then
goes to that checked IP, with the URL's host in the ``Host`` header and as the TLS server name (so the
certificate is verified against the host), never to whatever a second DNS answer might say: a DNS
rebinding cannot slip a private address in between the check and the connection. Redirects are not
followed. The connect timeout bounds the TCP and TLS set-up; the total timeout bounds the whole attempt.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import httpx

from calsync.core.model.errors import InvalidWebhookUrl
from calsync.core.model.retry_after import parse_retry_after
from calsync.core.webhooks.model import IpAddress, checked_url, refused_address
from calsync.core.webhooks.settings import Network, WebhookSettings, parse_networks

BODY_KEPT = 1024  # how much of a failed answer's body the DLQ record keeps

Resolver = Callable[[str, int], list[IpAddress]]


def system_resolver(host: str, port: int) -> list[IpAddress]:
    """Every address the system resolver gives for ``host`` (an IP literal resolves to itself)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (UnicodeError, ValueError, OSError) as exc:  # unknown, or a name no resolver takes (IDNA, length, NUL)
        raise httpx.ConnectError(f"cannot resolve {host}: {getattr(exc, 'strerror', None) or exc}") from None
    return list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))


@dataclass(frozen=True)
class Answer:
    """A receiver's answer: its status, the first bytes of its body, its Retry-After hint."""

    status: int
    body: bytes
    retry_after: float | None


class Transport:
    """Checks receiver URLs and posts to them (one httpx client, shared by the worker threads)."""

    def __init__(
        self,
        *,
        allow_http: bool,
        allowed_networks: Iterable[str],
        connect_timeout: float,
        timeout: float,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.allow_http = allow_http
        self.allowed: tuple[Network, ...] = parse_networks(allowed_networks)
        self.timeout = timeout
        self.resolver = resolver
        limit = httpx.Timeout(connect=connect_timeout, read=timeout, write=timeout, pool=timeout)
        self._client = httpx.Client(timeout=limit, follow_redirects=False, trust_env=False)

    @classmethod
    def from_settings(cls, settings: WebhookSettings) -> Transport:
        """The transport the webhook settings describe."""
        return cls(
            allow_http=settings.webhook_allow_http,
            allowed_networks=settings.webhook_allowed_networks.split(","),
            connect_timeout=min(3.0, settings.webhook_timeout),  # TCP and TLS: 3 s, or the whole request's
            timeout=settings.webhook_timeout,
        )

    def check(self, url: str) -> IpAddress:
        """The address an attempt may connect to; raises InvalidWebhookUrl (not https, refused address)."""
        _, host, port = checked_url(url, allow_http=self.allow_http)
        try:
            addresses = self.resolver(host, port)
        except httpx.ConnectError as exc:
            raise InvalidWebhookUrl(str(exc)) from None
        if not addresses:
            raise InvalidWebhookUrl(f"{host} resolves to no address")
        for address in addresses:
            why = refused_address(address, self.allowed)
            if why is not None:
                hint = " (a receiver of your own network: CALSYNC_WEBHOOK_ALLOWED_NETWORKS)"
                said = why if host.strip("[]") == str(address) else f"{host} resolves to {why}"
                raise InvalidWebhookUrl(f"{said}: refused{hint}")
        return addresses[0]

    def post(self, url: str, address: IpAddress, headers: Mapping[str, str], body: bytes) -> Answer:
        """POST ``body`` to the checked address; raises httpx's timeout and transport errors.

        httpx sets the ``Host`` header from the URL when it builds the request; the URL's host is then
        replaced by the address, and stays the TLS server name.
        """
        deadline = time.monotonic() + self.timeout
        request = self._client.build_request("POST", url, headers=headers, content=body)
        request.extensions["sni_hostname"] = request.url.host
        request.url = request.url.copy_with(host=str(address))
        response = self._client.send(request, stream=True)
        try:
            kept = bytearray()
            for chunk in response.iter_raw():
                if len(kept) < BODY_KEPT:
                    kept += chunk[: BODY_KEPT - len(kept)]
                if len(kept) >= BODY_KEPT or time.monotonic() > deadline:
                    break
            return Answer(response.status_code, bytes(kept), parse_retry_after(response.headers.get("retry-after")))
        finally:
            response.close()
