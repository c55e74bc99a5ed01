"""The Graph adapter's HTTP client keeps no cookies (neither Graph nor Entra needs them), so it sends none."""

from __future__ import annotations

import httpx

from calsync.providers.graph.provider import GraphProvider


def test_cookies_set_by_a_response_are_not_kept_nor_sent(provider: GraphProvider) -> None:
    client = provider._http
    request = client.build_request("POST", "https://login.example/tenant/oauth2/v2.0/token")
    cookies = [("Set-Cookie", "fpc=abc; Path=/; Secure"), ("Set-Cookie", "esctx=def; domain=.login.example")]
    response = httpx.Response(200, request=request, headers=cookies)
    client.cookies.extract_cookies(response)  # what httpx does with every response
    assert not client.cookies
    assert "cookie" not in client.build_request("GET", "https://login.example/tenant/next").headers
