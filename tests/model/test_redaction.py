"""Redaction without services: registered secrets are masked whole, whatever else is registered."""

from __future__ import annotations

import uuid

from calsync.core.model.redaction import MASK, redact, register_secrets


def test_a_secret_containing_another_registered_secret_is_masked_whole() -> None:
    inner = f"inner-{uuid.uuid4().hex[:8]}"
    outer = f"outer-{uuid.uuid4().hex[:8]}-{inner}-tail"
    register_secrets({"password": inner, "refresh_token": outer})
    masked = redact(f"token {outer} refused; password {inner} too")
    assert masked == f"token {MASK} refused; password {MASK} too"


def test_only_secret_fields_are_masked_identifiers_survive() -> None:
    secret = f"GOCSPX-{uuid.uuid4().hex}"
    client_id = f"{uuid.uuid4().hex[:12]}.apps.googleusercontent.com"
    token_uri = "https://oauth2.googleapis.com/token"
    credentials = {"type": "authorized_user", "client_id": client_id, "client_secret": secret, "token_uri": token_uri,
                   "username": "room-booker", "nested": {"svc_password": "p4ssw0rd!"}}  # fmt: skip
    register_secrets(credentials)
    message = redact(f"credentials {client_id} at {token_uri} for room-booker ({secret}, p4ssw0rd!) authorized_user")
    assert message == f"credentials {client_id} at {token_uri} for room-booker ({MASK}, {MASK}) authorized_user"


def test_token_shaped_strings_are_masked_by_pattern_whatever_their_case() -> None:
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
    shown = {
        "HTTP 401 BEARER abcdefgh12345678 refused": f"HTTP 401 BEARER {MASK} refused",
        "access ya29.a0AfH6SMBx-token here": f"access {MASK} here",
        "refresh 1//0gLxyz-abc.def kept": f"refresh {MASK} kept",
        f"jwt {jwt} seen": f"jwt {MASK} seen",
        'body {"Refresh_Token": "r-12345"}': f'body {{"Refresh_Token": "{MASK}"}}',
        "url ?PASSWORD=hunter22&x=1": f"url ?PASSWORD={MASK}&x=1",
        f"pem {key} end": f"pem {MASK} end",
        "Authorization: Basic dXNlcjpwYXNz": f"Authorization: Basic {MASK}",
    }
    assert {text: redact(text) for text in shown} == shown
