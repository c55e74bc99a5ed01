"""CALSYNC_CONSOLE_*: a trusted-proxy header needs the proxies' addresses, the addresses must be networks, and the
settings reach a child process unchanged."""

from __future__ import annotations

import ipaddress

import pytest

from calsync.core.config.settings import load_settings
from calsync.core.model.errors import ConfigurationError


def test_a_proxy_header_without_proxies_is_refused_at_start() -> None:
    with pytest.raises(ConfigurationError, match="CALSYNC_CONSOLE_TRUSTED_PROXIES is empty"):
        load_settings(console_trusted_proxy_header="X-Forwarded-Email")
    assert load_settings(console_trusted_proxy_header="").console_trusted_proxy_header is None


@pytest.mark.parametrize("value", ["10.0.0.0/8,nonsense", "10.0.0.0/33", "fe80::/200"])
def test_proxies_must_be_networks(value: str) -> None:
    with pytest.raises(ConfigurationError, match="CALSYNC_CONSOLE_TRUSTED_PROXIES: must be IP networks"):
        load_settings(console_trusted_proxies=value)


def test_a_header_name_must_be_an_http_token() -> None:
    with pytest.raises(ConfigurationError, match="CALSYNC_CONSOLE_TRUSTED_PROXY_HEADER"):
        load_settings(console_trusted_proxy_header="X Forwarded Email", console_trusted_proxies="10.0.0.0/8")


def test_trusted_peers_are_those_inside_the_networks() -> None:
    settings = load_settings(
        console_trusted_proxy_header="X-Forwarded-Email", console_trusted_proxies=" 10.1.0.0/16, fd00::/8 ,127.0.0.1"
    )
    assert settings.console_trusted_proxies[2] == ipaddress.ip_network("127.0.0.1/32")
    assert [settings.is_trusted_proxy(p) for p in ["10.1.2.3", "10.2.0.1", "fd00::1", "::1", "127.0.0.1"]] == [
        True, False, True, False, True,
    ]  # fmt: skip
    assert not settings.is_trusted_proxy(None) and not settings.is_trusted_proxy("testclient")
    assert not load_settings().is_trusted_proxy("127.0.0.1")  # no proxies configured: nobody


def test_the_console_settings_reach_a_child_process_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(
        console_trusted_proxy_header="X-Forwarded-Email",
        console_trusted_proxies="10.0.0.0/8,fd00::/8",
        console_session_idle_seconds=600,
    )
    env = settings.as_environment()
    assert env["CALSYNC_CONSOLE_TRUSTED_PROXIES"] == "10.0.0.0/8,fd00::/8"
    for name, value in env.items():
        if name.startswith("CALSYNC_CONSOLE_"):
            monkeypatch.setenv(name, value)
    again = load_settings()
    assert again.console_trusted_proxies == settings.console_trusted_proxies
    assert again.console_session_idle_seconds == 600
