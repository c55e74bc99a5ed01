"""Console settings (a mixin of :class:`~core.config.settings.Settings`): session expiry and the trusted proxy.

It imports nothing of calsync, so core/config/settings.py may import it (the one import into the console that
pyproject's contracts allow besides the console's own modules).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any

from pydantic import BaseModel, Field, IPvAnyNetwork, field_validator, model_validator
from pydantic_settings import NoDecode

#: A header name is an HTTP token; anything else could never arrive and is a typo.
_HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"


class ConsoleSettings(BaseModel):
    """``CALSYNC_CONSOLE_*``: how long a console session lasts unused, and which proxy may name the operator."""

    # Seconds a signed-in browser may sit unused before it must sign in again (each use restarts the clock).
    console_session_idle_seconds: float = Field(default=1800, ge=60, le=7 * 86400)
    # The request header a trusted proxy (oauth2-proxy: X-Forwarded-Email) names the signed-in operator in;
    # unset: no proxy is trusted, operators sign in with their keys.
    console_trusted_proxy_header: str | None = Field(default=None, pattern=_HEADER_NAME)
    # The proxies' addresses (CIDRs, comma-separated): the header counts only from a peer among them.
    console_trusted_proxies: Annotated[tuple[IPvAnyNetwork, ...], NoDecode] = ()

    @field_validator("console_trusted_proxy_header", mode="before")
    @classmethod
    def _empty_header_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("console_trusted_proxies", mode="before")
    @classmethod
    def _split_networks(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        try:  # strict=False: 10.0.0.1/8 means the network 10.0.0.0/8, as an operator writing it means
            return tuple(ipaddress.ip_network(str(part), strict=False) for part in value)
        except ValueError as exc:
            raise ValueError(f"must be IP networks (CIDRs) separated by commas: {exc}") from None

    @model_validator(mode="after")
    def _check_proxy(self) -> ConsoleSettings:
        # A header without proxies would either trust nobody (a silently broken sign-in) or everybody: refuse it.
        if self.console_trusted_proxy_header and not self.console_trusted_proxies:
            raise ValueError(
                "CALSYNC_CONSOLE_TRUSTED_PROXY_HEADER is set but CALSYNC_CONSOLE_TRUSTED_PROXIES is empty: "
                "list the proxies' addresses (CIDRs) the header may come from"
            )
        return self

    def is_trusted_proxy(self, peer: str | None) -> bool:
        """Whether ``peer`` (the TCP peer's address) is one of the trusted proxies."""
        if peer is None or not self.console_trusted_proxies:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:  # a Unix socket's peer, a test client's name
            return False
        return any(address in network for network in self.console_trusted_proxies)
